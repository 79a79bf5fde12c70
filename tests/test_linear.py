"""The RE2 patterns of `agent.linear` read text as Python's `re` would, in linear time."""

from __future__ import annotations

import re
import sys
import time
import unicodedata

import pytest

from agent import linear

#: Every character Python knows (RE2's Unicode tables are newer: unassigned ones may differ).
ASSIGNED = "".join(
    chr(c)
    for c in range(sys.maxunicode + 1)
    if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"
)


def test_word_is_pythons_word_class() -> None:
    """`[WORD]` and `[^WORD]` split every assigned character as Python's `\\w` / `\\W` do."""
    ours = linear.compile(rf"[^{linear.WORD}]+").findall(ASSIGNED)
    assert ours == re.findall(r"\W+", ASSIGNED)
    assert linear.compile(rf"[{linear.WORD}]+").findall(ASSIGNED) == re.findall(r"\w+", ASSIGNED)


def test_space_is_pythons_space_class() -> None:
    """`[SPACE]` and `[^SPACE]` split every assigned character as Python's `\\s` / `\\S` do."""
    ours = linear.compile(rf"[{linear.SPACE}]+").findall(ASSIGNED)
    assert ours == re.findall(r"\s+", ASSIGNED)
    assert linear.compile(rf"[^{linear.SPACE}]+").findall(ASSIGNED) == re.findall(r"\S+", ASSIGNED)


@pytest.mark.parametrize("escape", list("wWsSbB"))
def test_ascii_only_escapes_are_refused(escape: str) -> None:
    """A class RE2 reads as ASCII only is refused with a message that says what to use."""
    with pytest.raises(ValueError) as raised:
        linear.compile(rf"a\{escape}+")
    assert str(raised.value) == (
        f"pattern 'a\\\\{escape}+' uses \\{escape}, which RE2 reads as ASCII only: "
        "spell it with linear.WORD or linear.SPACE"
    )


def test_an_escaped_backslash_before_a_letter_is_no_class() -> None:
    """`\\\\w` is a backslash and a `w`, not the class."""
    assert linear.compile(r"a\\w").fullmatch("a\\w") is not None


def test_a_pattern_re2_cannot_compile_raises_its_error_and_writes_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Lookaround is not RE2's: compiling it raises `PatternError`, and RE2 writes nothing
    to stderr (where the pattern, perhaps a secret, would bypass the agent's logs)."""
    with pytest.raises(linear.PatternError):
        linear.compile(r"(?<!hunter2)b")
    assert capfd.readouterr() == ("", "")


def test_a_memory_budget_refuses_a_foreign_pattern_too_large_for_it() -> None:
    """A foreign pattern whose program exceeds `max_mem` does not compile; with room it does."""
    big = r"(?:[a-z]{1,100}x){1,10}"
    with pytest.raises(linear.PatternError):
        linear.compile_foreign(big, max_mem=1 << 14)
    assert linear.compile_foreign(big, max_mem=1 << 20).search("abcx") is not None


def test_a_foreign_pattern_keeps_its_ascii_classes() -> None:
    """A pattern written for Java keeps `\\w` and `\\b`, ASCII as in Java (Python's are not)."""
    pattern = linear.compile_foreign(r"\bkey\w+", max_mem=1 << 20)
    found = pattern.search("spark.key_store")
    assert found is not None
    assert found[0] == "key_store"
    assert pattern.search("keyé") is None
    assert pattern.search("monkey_x") is None


def test_nested_quantifiers_run_in_linear_time() -> None:
    """`(x+x+)+y`, which backtracks exponentially in `re`, takes milliseconds of CPU time on
    100,000 x (CPU time: a busy machine does not lengthen it, as it would the wall time)."""
    pattern = linear.compile(r"(x+x+)+y")
    began = time.thread_time()
    assert pattern.search("x" * 100_000) is None
    assert time.thread_time() - began < 0.5
