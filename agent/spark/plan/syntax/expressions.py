"""What a Spark expression string reads, and how: the attribute references in text such as
``CASE WHEN (age#11 > 65) THEN senior ELSE city#12 END`` with the role each one plays.

Spark prints resolved expressions with their attributes as ``name#id`` (``L`` marks longs),
functions as ``name(args)``, binary operators in parentheses, and string literals *without
quotes* (``concat_ws(,, a#1)``). `references` scans such text once, left to right, keeping a
stack of the open function calls, and classifies every reference by the innermost context
that decides it:

* inside ``windowspecdefinition(...)`` or a ranking function's arguments: INDIRECT WINDOW;
* in a condition (``CASE WHEN ... THEN``, ``if (...)``, ``FILTER (WHERE ...)``), or the
  pivot column of ``pivotfirst(pivot, value, ...)`` (it picks the output column a value
  lands in, as the ``if (pivot <=> v)`` Spark writes for other pivots does): INDIRECT
  CONDITIONAL;
* inside an aggregate function: DIRECT AGGREGATION;
* the whole expression is the attribute itself (or ``empty2null(attr)``, which Spark's file
  writer puts around a string partition column: the value is the column's): DIRECT
  IDENTITY; else DIRECT TRANSFORMATION.

Masking (the value cannot be read back: hashes, `mask`, counts) is flagged on DIRECT ones.
Attributes whose *name* is the text of another expression (``sum(salary#13)#38``) are one
reference to #38; the ids inside their names are not read. Lambda variables
(``lambda x#30``), plan ids (``[id=#55]``) and dynamic-pruning subqueries are not
references. A string literal that happens to look like ``x#12`` is read as a reference: the
text cannot tell them apart. ``... N more fields`` (Spark cut the expression at
`spark.sql.debug.maxToStringFields`) sets `References.truncated`: the references are incomplete.

The text is untrusted: every scan here is linear in it (hand-written over `str` methods, or
RE2 through `agent.linear`), brackets are matched in one pass, and nested skipped calls are
measured once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from agent import linear
from agent.spark.plan.syntax.text import digits_end, is_number, without_delay

Kind = Literal["DIRECT", "INDIRECT"]

#: DIRECT subtypes, weakest first: a chain of steps is as strong as its strongest step.
DIRECT_ORDER: Final = ("IDENTITY", "TRANSFORMATION", "AGGREGATION")

AGGREGATES: Final = frozenset(
    {
        "sum", "avg", "mean", "count", "count_if", "min", "max", "first", "last", "any_value",
        "collect_list", "collect_set", "array_agg", "approx_count_distinct",
        "approx_percentile", "percentile", "percentile_approx", "percentile_cont",
        "percentile_disc", "median", "mode", "stddev", "stddev_pop", "stddev_samp", "std",
        "variance", "var_pop", "var_samp", "corr", "covar_pop", "covar_samp", "skewness",
        "kurtosis", "bool_and", "bool_or", "every", "some", "any", "bit_and", "bit_or",
        "bit_xor", "max_by", "min_by", "string_agg", "listagg", "hll_sketch_agg",
        "hll_union_agg", "histogram_numeric", "regr_count", "regr_avgx", "regr_avgy",
        "regr_sxx", "regr_syy", "regr_sxy", "regr_slope", "regr_intercept", "regr_r2",
        "try_sum", "try_avg", "bitmap_construct_agg", "bitmap_or_agg",
    }
)  # fmt: skip
#: Aggregates whose result does not reveal the values they read.
MASKING_AGGREGATES: Final = frozenset(
    {"count", "count_if", "approx_count_distinct", "regr_count", "hll_sketch_agg"}
)
#: Functions whose result does not reveal their input (hashes, masks).
MASKING: Final = frozenset(
    {"md5", "sha", "sha1", "sha2", "crc32", "hash", "xxhash64", "mask", "murmur3hash"}
)
#: Window functions whose arguments are the window's ordering, not values they return.
RANKING: Final = frozenset(
    {"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile"}
)
_LAMBDA = linear.compile(rf"lambda [^{linear.SPACE},()]+#\d+L?")
_TRUNCATED = linear.compile(r"\.\.\. \d+ more fields")
_KEYWORDS: Final = ("CASE", "WHEN", "THEN", "ELSE", "END")
_SKIPPED_CALLS: Final = ("dynamicpruningexpression",)
#: What a dynamic-partition write does to a string partition column (empty string -> null).
_WRITER_WRAPPER: Final = "empty2null("


@dataclass(frozen=True, slots=True, order=True)
class Transformation:
    """How an input field reaches an output field, as the columnLineage facet spells it."""

    type: Kind
    subtype: str
    masking: bool = False


IDENTITY: Final = Transformation("DIRECT", "IDENTITY")
TRANSFORMATION: Final = Transformation("DIRECT", "TRANSFORMATION")
AGGREGATION: Final = Transformation("DIRECT", "AGGREGATION")


def indirect(subtype: str) -> Transformation:
    return Transformation("INDIRECT", subtype)


def compose(outer: Transformation, inner: Transformation) -> Transformation:
    """The transformation of a two-step path: `inner` from the source to an intermediate
    attribute, `outer` from there to the output. INDIRECT wins (the inner one first, as the
    OpenLineage Spark integration merges them); else the stronger DIRECT subtype."""
    if inner.type == "INDIRECT":
        chosen = inner
    elif outer.type == "INDIRECT":
        chosen = outer
    else:
        strength = DIRECT_ORDER.index
        chosen = outer if strength(outer.subtype) >= strength(inner.subtype) else inner
    masking = outer.masking or inner.masking
    if chosen.masking == masking:
        return chosen
    return Transformation(chosen.type, chosen.subtype, masking)


@dataclass(frozen=True, slots=True)
class References:
    """The references of one expression, in order of appearance (an id may repeat)."""

    references: tuple[tuple[int, Transformation], ...]
    truncated: bool = False


def attribute_id(text: str) -> int | None:
    """The id of `text` when it is exactly one attribute (``name#12L``), else None."""
    text = text.strip()
    name, sep, tail = text.rpartition("#")
    number = without_delay(tail).removesuffix("L")
    if not (sep and name and is_number(number)):
        return None
    # a name holds no operator outside its own brackets: `a#1 + b` is not one attribute
    if name.endswith((")", "]")):
        return int(number) if _name_start(text, len(name)) == 0 else None
    return int(number) if " " not in name and "(" not in name else None


def references(text: str) -> References:
    """Every attribute `text` reads, with the transformation its role implies."""
    alone = attribute_id(text)
    if alone is None and text.startswith(_WRITER_WRAPPER) and text.endswith(")"):
        # Spark's file writer wraps a string partition column so: the value is unchanged
        alone = attribute_id(text[len(_WRITER_WRAPPER) : -1])
    if alone is not None:
        return References(((alone, IDENTITY),))
    hidden = _hidden_spans(text)
    frames: list[tuple[int, str]] = []  # (position of "(", context) for open calls
    cases: list[tuple[int, bool]] = []  # (paren depth, in a WHEN condition) per open CASE
    keywords = {
        at: word
        for at, word in whole_words(text, _KEYWORDS)
        if not text.startswith("#", at + len(word))
    }
    refs = _references(text)
    found: list[tuple[int, Transformation]] = []
    i = 0
    hidden_index = 0
    while i < len(text):
        if hidden_index < len(hidden) and i == hidden[hidden_index][0]:
            i = hidden[hidden_index][1]
            hidden_index += 1
            continue
        ch = text[i]
        if ch == "(":
            frames.append((i, _context(text, i)))
        elif ch == ")" and frames:
            frames.pop()
        elif ch == "," and frames and frames[-1][1] == "pivot":
            frames[-1] = (frames[-1][0], "")  # past the pivot column: the value and the rest
        elif i in keywords:
            _case_keyword(keywords[i], len(frames), cases)
        elif i in refs and _is_reference(text, i):
            found.append((refs[i], _classify(frames, cases)))
        i += 1
    truncated = "more fields" in text and _TRUNCATED.search(text) is not None
    return References(tuple(found), truncated=truncated)


def _context(text: str, paren: int) -> str:
    """What an opening bracket starts: a known call, a condition, or plain grouping."""
    start = _identifier_start(text, paren)
    name = text[start:paren].lower()
    if text.endswith("if ", 0, paren) and _identifier_start(text, paren - 1) == paren - 3:
        return "condition"  # `if (predicate) value else value`
    if text.endswith("FILTER (WHERE ", 0, paren) or text.endswith("FILTER ", 0, paren):
        return "condition"
    if name == "windowspecdefinition" or name in RANKING:
        return "window"
    if name == "pivotfirst":
        return "pivot"  # its first argument only, until the first comma at its depth
    for prefix in ("partial_", "merge_", "finalmerge_"):
        name = name.removeprefix(prefix)
    if name in AGGREGATES:
        return "mask-aggregate" if name in MASKING_AGGREGATES else "aggregate"
    if name in MASKING:
        return "mask"
    return ""


def _case_keyword(word: str, depth: int, cases: list[tuple[int, bool]]) -> None:
    if word == "CASE":
        cases.append((depth, False))
    elif cases and cases[-1][0] == depth:
        if word == "WHEN":
            cases[-1] = (depth, True)
        elif word in ("THEN", "ELSE"):
            cases[-1] = (depth, False)
        else:  # END
            cases.pop()


def _classify(frames: list[tuple[int, str]], cases: list[tuple[int, bool]]) -> Transformation:
    contexts = {context for _, context in frames}
    if "window" in contexts:
        return indirect("WINDOW")
    if "condition" in contexts or "pivot" in contexts or any(in_when for _, in_when in cases):
        return indirect("CONDITIONAL")
    masking = "mask" in contexts or "mask-aggregate" in contexts
    if "aggregate" in contexts or "mask-aggregate" in contexts:
        return Transformation("DIRECT", "AGGREGATION", masking)
    return Transformation("DIRECT", "TRANSFORMATION", masking)


def _is_reference(text: str, hash_at: int) -> bool:
    """`#12` ends an attribute name, not a plan id (`[id=#55]`) or a bare `#12`."""
    if hash_at == 0:
        return False
    return text[hash_at - 1] not in " \t=([,"


def _hidden_spans(text: str) -> list[tuple[int, int]]:
    """Spans to skip, sorted: names of attributes named after expressions (`sum(a#1)#9`, the
    `#9` stays), lambda variables, and calls never read (dynamic pruning)."""
    spans: list[tuple[int, int]] = []
    openers: dict[int, int] | None = None  # matched once, when a name needs it
    for start in _references(text):
        if start and text[start - 1] in ")]":
            openers = _openers(text) if openers is None else openers
            opener = openers.get(start - 1)
            name_start = None if opener is None else _identifier_start(text, opener)
            if name_start is not None and name_start < start:
                spans.append((name_start, start))
    if "lambda " in text:
        spans += [(m.start(), m.end()) for m in _LAMBDA.finditer(text)]
    skipped_to = 0  # a skipped call inside another is in its span already
    for start, name in sorted(whole_words(text, _SKIPPED_CALLS)):
        paren = start + len(name)
        if start >= skipped_to and text.startswith("(", paren):
            end = _closing(text, paren)
            skipped_to = end + 1 if end is not None else len(text)
            spans.append((start, skipped_to))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:  # nested or overlapping spans collapse into the outer one
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _references(text: str) -> dict[int, int]:
    """Where each `#N` (or `#NL`) that no word character or `#` follows is -> N."""
    found: dict[int, int] = {}
    at = text.find("#")
    while at != -1:
        end = digits_end(text, at + 1)
        after = end + 1 if text.startswith("L", end) else end
        glued = after < len(text) and (_is_word(text[after]) or text[after] == "#")
        if end > at + 1 and not glued:
            found[at] = int(text[at + 1 : end])
        at = text.find("#", at + 1)
    return found


def whole_words(text: str, words: Iterable[str]) -> list[tuple[int, str]]:
    """Where each of `words` stands whole in `text` (no word character either side)."""
    found: list[tuple[int, str]] = []
    for word in words:
        at = text.find(word)
        while at != -1:
            end = at + len(word)
            if (at == 0 or not _is_word(text[at - 1])) and (
                end == len(text) or not _is_word(text[end])
            ):
                found.append((at, word))
            at = text.find(word, at + 1)
    return found


def _openers(text: str) -> dict[int, int]:
    """Each closing bracket's position -> its opening bracket's, round and square alike."""
    found: dict[int, int] = {}
    open_at: list[int] = []
    for i, ch in enumerate(text):
        if ch in "([":
            open_at.append(i)
        elif ch in ")]" and open_at:
            found[i] = open_at.pop()
    return found


def _is_word(ch: str) -> bool:
    """Whether `ch` is a word character, as Python's `\\w` says."""
    return ch.isalnum() or ch == "_"


def _name_start(text: str, end: int) -> int | None:
    """Where the expression-like name ending at `end` (after `)` or `]`) begins."""
    depth = 0
    i = end - 1
    while i >= 0:
        ch = text[i]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            depth -= 1
            if depth == 0:
                return _identifier_start(text, i)
        i -= 1
    return None


def _identifier_start(text: str, end: int) -> int:
    """Start of the identifier that ends at `end` (`end` itself when there is none)."""
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return start


def _closing(text: str, opening: int) -> int | None:
    depth = 0
    for i in range(opening, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None
