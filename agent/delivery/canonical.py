"""RFC 8785 (JSON Canonicalization Scheme) bytes of plain JSON values.

`canonicalize` returns exactly the bytes of the `rfc8785` reference package for every value
that package accepts, and raises `CanonicalizationError` (a ValueError) where it refuses one:
NaN and infinities, integers outside the IEEE-754 safe range, non-string object keys, lone
surrogates, nesting deeper than the recursion limit, and types other than dict, list, tuple,
str, int, float, bool and None (subclasses count as their base type, as in the reference).

Fast path (about 20x the reference on a 5 KB RunEvent): orjson with sorted keys already writes
JCS for everything but some floats. Its string escaping is the JCS one (\\b \\t \\n \\f
\\r \\" \\\\, lowercase \\u00xx for other controls, everything else raw UTF-8) and it
refuses lone surrogates; its key order (code points) equals the JCS order (UTF-16 code units)
unless one key holds a character in U+E000..U+FFFF and another an astral one;
OPT_STRICT_INTEGER refuses exactly the integers JCS refuses. What orjson cannot tell is whether
a float, or a type it accepts and JCS does not (UUID, Enum, subclasses), is inside: `_scan`
finds out level by level with `gc.get_referents`, which lists the items of dicts, lists and
tuples from C. The few float layouts where orjson and ECMAScript differ (1.0, 1e+16, 1e-6) are
rewritten in orjson's output. Anything unusual takes a pure-Python serializer that mirrors the
reference and names the location of whatever it refuses.
"""

from __future__ import annotations

import gc
import re
from math import isfinite
from typing import Any, Final

import orjson

from agent.errors import CanonicalizationError

#: The largest integer magnitude an IEEE-754 double holds exactly (2**53 - 1).
MAX_SAFE_INTEGER: Final = 2**53 - 1

_ORJSON_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
# orjson refuses deeper nesting; deeper values go to the slow path.
_ORJSON_MAX_DEPTH: Final = 255
_FAST_TYPES: Final = frozenset({dict, list, tuple, str, int, bool, type(None)})
# UTF-8 lead bytes of U+E000..U+FFFF and of astral characters. Code-point and UTF-16 order
# differ only between those two groups, so an output holding both bytes may be misordered.
# (Continuation bytes are 0x80..0xBF and never match.)
_BMP_HIGH: Final = re.compile(b"[\xee\xef]")
_ASTRAL: Final = re.compile(b"[\xf0-\xf4]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# Where orjson's float text differs from JCS: integral values (1.0, -0.0), exponents 16..20
# (1e+16) and exponent -6 (1e-6). Each pattern starts with a literal, which re scans for
# quickly (one alternation of all three is ten times slower), and ends with the terminator
# that must follow a float token.
_FLOAT_SHAPES: Final = (
    re.compile(rb"\.0[,}\]]"),
    re.compile(rb"e\+(?:1[6-9]|20)[,}\]]"),
    re.compile(rb"e-6[,}\]]"),
)
_SEPARATORS: Final = (b":", b",", b"[")
# Longer than any float orjson writes ("-1.2345678901234567e-308" is 24 bytes).
_MAX_FLOAT_TOKEN: Final = 32


class _SlowPath(Exception):
    """The fast path cannot vouch for this value; run the pure-Python serializer."""


class _Invalid(Exception):
    """A refused value; enclosing containers add their key or index while it unwinds."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str | int] = []


def canonicalize(obj: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of the JSON value `obj`.

    Raises CanonicalizationError naming the refused value and where it sits as a JSON
    Pointer, e.g. "float nan is not representable in JSON (at /run/facets/x/ratio)".
    """
    try:
        try:
            return _fast(obj)
        except _SlowPath:
            return _slow(obj)
    except RecursionError:
        raise CanonicalizationError(
            "value is nested too deeply to canonicalize (Python recursion limit)"
        ) from None


def _fast(obj: Any) -> bytes:
    if type(obj) is float:
        if not isfinite(obj):
            raise _SlowPath
        return _number(obj).encode()
    floats = _scan(obj)
    try:
        out = orjson.dumps(obj, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        # Non-string keys, unsafe integers, lone surrogates: the slow path says precisely.
        raise _SlowPath from None
    if not out.isascii() and _BMP_HIGH.search(out) and _ASTRAL.search(out):
        raise _SlowPath
    return _fix_floats(out, floats) if floats else out


def _scan(obj: Any) -> list[float]:
    """The floats inside `obj`; raises _SlowPath if it holds anything but exact JSON types.

    Checks the types of a level before listing the next, so a foreign object is never
    traversed (its referents would lead into the interpreter's own objects).
    """
    if not _REFERENTS_ARE_ITEMS:
        raise _SlowPath
    floats: list[float] = []
    level: list[Any] = [obj]
    for _ in range(_ORJSON_MAX_DEPTH):
        if not _FAST_TYPES.issuperset(map(type, level)):
            kinds = set(map(type, level))
            if float not in kinds or not _FAST_TYPES.issuperset(kinds - {float}):
                raise _SlowPath
            floats += [item for item in level if type(item) is float]
        level = gc.get_referents(*level)
        if not level:
            return floats
    raise _SlowPath


def _referents_are_items() -> bool:
    """Whether gc.get_referents lists all items of dicts, lists and tuples.

    True on CPython; checked once so that an interpreter that traverses differently gets
    the slow path instead of a value the scan did not fully see.
    """
    values = ["text", 7, 0.5, None, True, [], {}, ()]
    probes = [dict(zip("abcdefgh", values, strict=True)), list(values), tuple(values)]
    return all(
        sorted(map(id, gc.get_referents(probe)))
        == sorted(map(id, probe.values() if isinstance(probe, dict) else probe))
        for probe in probes
    )


_REFERENTS_ARE_ITEMS: Final = _referents_are_items()


def _fix_floats(out: bytes, floats: list[float]) -> bytes:
    """Rewrite the float tokens orjson wrote differently from JCS (1.0, 1e+16, 1e-6).

    Such tokens are found by the shape of their text with literal-prefix regexes, and each
    match is read back to the separator before it. A float token sits between a separator
    (: , [) and a terminator (, } ]), so every float yields exactly one match; a text found
    more often than there are floats with it also occurs inside a string, and then the slow
    path decides instead of guessing.
    """
    wanted: dict[bytes, list[Any]] = {}  # orjson text -> [JCS text, floats left to find]
    exact: set[bytes] = set()
    # One orjson call gives the text of every float; NaN and infinities come out as null.
    for value, text in zip(floats, orjson.dumps(floats)[1:-1].split(b","), strict=True):
        entry = wanted.get(text)
        if entry is None:
            if text in exact:
                continue
            if not isfinite(value):
                raise _SlowPath  # the slow path reports where the NaN or infinity sits
            canonical = _number(value).encode()
            if canonical == text:
                exact.add(text)
                continue
            wanted[text] = entry = [canonical, 0]
        entry[1] += 1
    if not wanted:
        return out
    shapes = {_shape(text) for text in wanted}
    edits: list[tuple[int, int, bytes]] = []
    for shape in shapes:
        for match in shape.finditer(out):
            end = match.end() - 1  # the terminator stays
            window = max(0, end - _MAX_FLOAT_TOKEN)
            head = out[window:end].rstrip(b"0123456789.e+-")
            entry = wanted.get(out[window + len(head) : end])
            if entry is not None and head.endswith(_SEPARATORS):
                entry[1] -= 1
                edits.append((window + len(head), end, entry[0]))
    if any(left for _, left in wanted.values()):
        raise _SlowPath
    edits.sort()
    pieces: list[bytes] = []
    position = 0
    for start, end, canonical in edits:
        pieces += (out[position:start], canonical)
        position = end
    pieces.append(out[position:])
    return b"".join(pieces)


def _shape(text: bytes) -> re.Pattern[bytes]:
    """The pattern that finds orjson's float text `text` (a wrong pick only costs the
    slow path: the count check in _fix_floats notices the missing matches)."""
    if text.endswith(b".0"):
        return _FLOAT_SHAPES[0]
    if b"e+" in text:
        return _FLOAT_SHAPES[1]
    if b"e-" in text:
        return _FLOAT_SHAPES[2]
    raise _SlowPath  # an orjson layout not met before: the slow path writes it


def _number(value: float) -> str:
    """ECMAScript Number.prototype.toString of a finite float (RFC 8785 section 3.2.2.3).

    repr() already gives the shortest round-tripping digits, which is what ECMAScript picks;
    only the layout differs: no trailing ".0", no exponent for 1e-6 <= |x| < 1e21, and an
    exponent with an explicit sign and no leading zero.
    """
    text = repr(value)
    if "e" not in text:
        if text.endswith(".0"):
            return "0" if value == 0 else text[:-2]  # both zeros: JCS writes -0 as 0
        return text
    mantissa, _, exp_text = text.partition("e")
    sign = ""
    if mantissa[0] == "-":
        sign, mantissa = "-", mantissa[1:]
    exponent = int(exp_text)
    digits = mantissa.replace(".", "")
    if 0 < exponent < 21:
        # repr switches to exponents at 1e16 and has at most 17 digits: none is dropped here.
        return sign + digits + "0" * (exponent + 1 - len(digits))
    if -7 < exponent < 0:
        return sign + "0." + "0" * (-exponent - 1) + digits
    return f"{sign}{mantissa}e{exponent:+d}"


def _slow(obj: Any) -> bytes:
    parts: list[bytes] = []
    try:
        _emit(obj, parts)
    except _Invalid as error:
        pointer = "".join(f"/{_pointer_token(step)}" for step in reversed(error.path))
        raise CanonicalizationError(f"{error.problem} (at {pointer or 'the top level'})") from None
    return b"".join(parts)


def _emit(value: Any, out: list[bytes]) -> None:
    """Append the JCS bytes of `value`, in the reference's isinstance dispatch order.

    Arrays and objects are handled inline (one stack frame per nesting level, as the
    reference), so both give up at about the same depth.
    """
    if value is None:
        out.append(b"null")
    elif isinstance(value, bool):
        out.append(b"true" if value else b"false")
    elif isinstance(value, int):
        number = int(value)
        if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
            raise _Invalid(
                f"integer {number} is outside the IEEE-754 safe range of JSON numbers "
                "[-(2**53-1), 2**53-1]"
            )
        out.append(str(number).encode())
    elif isinstance(value, str):
        out.append(_string(value, "string"))
    elif isinstance(value, float):
        real = float(value)
        if not isfinite(real):
            raise _Invalid(f"float {real!r} is not representable in JSON")
        out.append(_number(real).encode())
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for index, item in enumerate(list(value)):
            if index:
                out.append(b",")
            try:
                _emit(item, out)
            except _Invalid as error:
                error.path.append(index)
                raise
        out.append(b"]")
    elif isinstance(value, dict):
        mapping = dict(value)
        for key in mapping:
            if not isinstance(key, str):
                raise _Invalid(f"object key {key!r} is not a string")
        out.append(b"{")
        # RFC 8785 section 3.2.3: keys compare as arrays of UTF-16 code units.
        for index, (key, item) in enumerate(sorted(mapping.items(), key=_utf16_order)):
            if index:
                out.append(b",")
            try:
                out.append(_string(key, "object key"))
                out.append(b":")
                _emit(item, out)
            except _Invalid as error:
                error.path.append(key)
                raise
        out.append(b"}")
    else:
        kind = type(value)
        name = kind.__qualname__
        if kind.__module__ != "builtins":
            name = f"{kind.__module__}.{name}"
        raise _Invalid(f"unsupported type {name}")


def _utf16_order(entry: tuple[str, Any]) -> bytes:
    # "surrogatepass" keeps a key with a lone surrogate sortable, so that _string reports it
    # with its location instead of sorted() failing without one.
    return entry[0].encode("utf-16-be", "surrogatepass")


def _string(text: str, what: str) -> bytes:
    if not text.isascii():
        match = _SURROGATE.search(text)
        if match is not None:
            raise _Invalid(
                f"{what} contains the lone surrogate U+{ord(match.group()):04X}, "
                "which has no UTF-8 form"
            )
    # orjson's string escaping is exactly the JCS one (the tests hold it to the reference).
    return orjson.dumps(text)


def _pointer_token(step: str | int) -> str:
    token = str(step).replace("~", "~0").replace("/", "~1")
    # Keep the message printable when the key itself is the broken part.
    return token.encode("utf-8", "backslashreplace").decode()
