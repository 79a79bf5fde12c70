"""RFC 8785 canonical bytes: equal to the `rfc8785` reference, the RFC's own vectors, errors."""

from __future__ import annotations

import collections
import copy
import enum
import json
import math
import struct
import uuid
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.delivery import canonical as canonical_module
from agent.delivery.canonical import canonicalize
from agent.errors import CanonicalizationError
from tests.fuzz import examples
from tests.olschema import example_run_event

SAFE = 2**53 - 1

# Characters where orjson and JCS could part ways: controls and escapes, DEL, U+2028/9, the
# BMP above U+E000 (sorts after astral characters in UTF-16), astral characters themselves.
_TRICKY = '\x00\x01\x08\t\n\x0c\r\x1f"\\/\x7f\x80\u00f6\u2028\u2029\u20ac\ue000\ufb33\uffff'
_ASTRAL = "\U00010000\U0001f600\U0010ffff"
tricky_text = st.text(alphabet=st.sampled_from(_TRICKY + _ASTRAL + "a0.:,[]{}e+-"), max_size=8)
any_text = st.one_of(st.text(max_size=12), tricky_text)

finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    # every bit pattern, so that all magnitudes and subnormals are drawn evenly
    st.integers(0, 2**64 - 1)
    .map(lambda bits: struct.unpack("<d", bits.to_bytes(8, "little"))[0])
    .filter(math.isfinite),
    st.integers(-(10**22), 10**22).map(float),
    st.sampled_from([0.0, -0.0, 1e16, 1e21, 1e-6, 1e-7, 5e-324, 1.7976931348623157e308]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-SAFE, SAFE),
    st.integers(-(2**31), 2**31),
    finite_floats,
    any_text,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(any_text, children, max_size=6),
    ),
    max_leaves=60,
)


def nested(depth: int, leaf: Any = 1.0) -> Any:
    """A value `depth` containers deep, alternating objects and arrays."""
    value = leaf
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


@given(json_values)
@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_matches_reference_on_arbitrary_json(value: Any) -> None:
    """Every JSON value gives exactly the bytes of the rfc8785 reference package."""
    assert canonicalize(value) == rfc8785.dumps(value)


@given(finite_floats)
@settings(max_examples=examples(3000), deadline=None)
@example(1e16)
@example(-1e-6)
@example(123456789012345680.0)
def test_matches_reference_on_floats_of_all_magnitudes(number: float) -> None:
    """Floats print as ECMAScript Number.prototype.toString, alone and inside containers."""
    assert canonicalize(number) == rfc8785.dumps(number)
    assert canonicalize([number, {"x": number}]) == rfc8785.dumps([number, {"x": number}])


@given(st.lists(finite_floats, max_size=5), st.lists(tricky_text, max_size=5))
@settings(max_examples=examples(800), deadline=None)
def test_float_lookalikes_in_strings_do_not_confuse_the_float_rewrite(
    numbers: list[float], texts: list[str]
) -> None:
    """Strings holding float-like text next to real floats leave the output exact."""
    texts += [f"[{orjson_text},]" for orjson_text in ("1.0", "1e+16", "1e-6", "-0.0")]
    value: dict[str, Any] = {"numbers": numbers, "texts": texts, "mixed": [*numbers, *texts]}
    assert canonicalize(value) == rfc8785.dumps(value)


@given(st.dictionaries(tricky_text, st.integers(0, 9), max_size=8))
@settings(max_examples=examples(800), deadline=None)
def test_keys_sort_by_utf16_code_units(mapping: dict[str, int]) -> None:
    """Object keys sort by UTF-16 code units, astral characters before U+E000..U+FFFF."""
    assert canonicalize(mapping) == rfc8785.dumps(mapping)


@pytest.mark.parametrize("depth", [1, 100, 254, 255, 256, 600])
def test_deep_nesting_matches_reference(depth: int) -> None:
    """Nesting past orjson's 255 levels still matches the reference."""
    assert canonicalize(nested(depth)) == rfc8785.dumps(nested(depth))


# RFC 8785 appendix B: IEEE-754 bit patterns and their canonical text.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    """Each number of RFC 8785 appendix B serializes as the RFC prints it."""
    number = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonicalize(number) == expected.encode()
    assert canonicalize({"n": [number]}) == b'{"n":[' + expected.encode() + b"]}"


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_rfc8785_appendix_b_nan_and_infinity_are_refused(bits: str) -> None:
    """NaN and the infinities of appendix B have no canonical form."""
    number = struct.unpack(">d", bytes.fromhex(bits))[0]
    with pytest.raises(CanonicalizationError):
        canonicalize(number)


def test_rfc8785_section_3_2_2_example() -> None:
    """The RFC's sample object (numbers, escapes, literals) gives the RFC's exact output."""
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode()
    assert canonicalize(json.loads(source)) == expected


def test_rfc8785_section_3_2_3_sorting_example() -> None:
    """The RFC's sorting sample orders keys by UTF-16 code units, emoji before U+FB33."""
    source = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    ).encode()
    assert canonicalize(source) == expected


def test_realistic_run_event_matches_reference() -> None:
    """The example RunEvent (ints, floats, nested facets) matches the reference."""
    event = example_run_event()
    assert canonicalize(event) == rfc8785.dumps(event)


def test_input_is_not_changed() -> None:
    """Canonicalizing never changes the value, also when floats are rewritten."""
    event = example_run_event()
    before = copy.deepcopy(event)
    canonicalize(event)
    assert event == before
    assert repr(event) == repr(before)  # floats stay floats, key order stays


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


class Kind(enum.StrEnum):
    BATCH = "BATCH"


class Text(str):
    pass


class Real(float):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"kind": Kind.BATCH, "level": Level.HIGH},
        {"text": Text("x\n"), "real": Real(2.0)},
        collections.OrderedDict([("b", 1), ("a", (1.5, 2.0))]),
        {Text("k"): [True, False, None]},
    ],
    ids=["str-and-int-enums", "subclasses", "ordered-dict-and-tuple", "subclass-key"],
)
def test_subclasses_serialize_as_their_base_type(value: Any) -> None:
    """Subclasses of the JSON types give the reference's bytes."""
    assert canonicalize(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": [1, float("nan")]}, "float nan is not representable in JSON (at /a/1)"),
        (float("inf"), "float inf is not representable in JSON (at the top level)"),
        ([{"x": -math.inf}], "float -inf is not representable in JSON (at /0/x)"),
        (
            {"n": 2**53},
            "integer 9007199254740992 is outside the IEEE-754 safe range of JSON numbers "
            "[-(2**53-1), 2**53-1] (at /n)",
        ),
        (
            [-(2**53)],
            "integer -9007199254740992 is outside the IEEE-754 safe range of JSON numbers "
            "[-(2**53-1), 2**53-1] (at /0)",
        ),
        ({"a": {1: 2}}, "object key 1 is not a string (at /a)"),
        ({"id": uuid.UUID(int=7)}, "unsupported type uuid.UUID (at /id)"),
        ({"raw": [b"bytes"]}, "unsupported type bytes (at /raw/0)"),
        ({"c": Colour.RED}, "unsupported type tests.test_canonical.Colour (at /c)"),
        ({"s": {1, 2}}, "unsupported type set (at /s)"),
        (
            {"a/b~c": ["ok", "\ud800"]},
            "string contains the lone surrogate U+D800, which has no UTF-8 form (at /a~1b~0c/1)",
        ),
        (
            {"x": {"\udc00": 1}},
            "object key contains the lone surrogate U+DC00, which has no UTF-8 form "
            "(at /x/\\udc00)",
        ),
    ],
    ids=[
        "nan",
        "inf",
        "minus-inf",
        "big-int",
        "small-int",
        "int-key",
        "uuid",
        "bytes",
        "enum",
        "set",
        "surrogate-value",
        "surrogate-key",
    ],
)
def test_refused_values_name_problem_and_location(value: Any, message: str) -> None:
    """A value JCS cannot hold raises CanonicalizationError naming it and its JSON Pointer."""
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize(value)
    assert str(caught.value) == message
    with pytest.raises(ValueError):
        rfc8785.dumps(value)  # the reference refuses the same value


@given(
    st.recursive(
        st.one_of(
            scalars,
            st.sampled_from([math.nan, math.inf, 2**53, -(2**60), "\ud83d", b"x"]),
        ),
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(any_text, children, max_size=4)
        ),
        max_leaves=20,
    )
)
@settings(max_examples=examples(800), deadline=None)
def test_refuses_exactly_what_the_reference_refuses(value: Any) -> None:
    """Where the reference raises, canonicalize raises CanonicalizationError, and vice versa."""
    try:
        expected = rfc8785.dumps(value)
    except ValueError:
        with pytest.raises(CanonicalizationError):
            canonicalize(value)
    else:
        assert canonicalize(value) == expected


def test_cycle_is_refused() -> None:
    """A value that contains itself is refused instead of recursing forever."""
    loop: dict[str, Any] = {}
    loop["self"] = [loop]
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize(loop)
    assert str(caught.value) == (
        "value is nested too deeply to canonicalize (Python recursion limit)"
    )


def test_far_too_deep_nesting_is_refused() -> None:
    """Nesting beyond the recursion limit is refused with a clear message."""
    with pytest.raises(CanonicalizationError) as caught:
        canonicalize(nested(50_000))
    assert str(caught.value) == (
        "value is nested too deeply to canonicalize (Python recursion limit)"
    )


@pytest.mark.parametrize("with_floats", [False, True], ids=["ints-only", "with-floats"])
def test_run_events_take_the_fast_path(with_floats: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A typical RunEvent is canonicalized without the pure-Python path (speed itself is
    measured by the benchmark, not here)."""
    event = example_run_event()
    if not with_floats:
        del event["inputs"][0]["inputFacets"]["dataQualityMetrics"]

    def no_slow_path(_obj: object) -> bytes:
        raise AssertionError("fell back to the pure-Python path")

    monkeypatch.setattr(canonical_module, "_slow", no_slow_path)
    assert canonicalize(event) == rfc8785.dumps(event)
