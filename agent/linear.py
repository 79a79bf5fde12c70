r"""Regular expressions that take time linear in the text they read: RE2 (google-re2).

Whatever the agent reads from an event log is untrusted: anyone who can write into the log
directory chooses plan descriptions, node names, property values, even the application's own
`spark.redaction.regex`. Python's `re` backtracks, so one crafted text can hold the agent for
minutes (a plan detail line of 3,000 spaces; `(x+x+)+y` against 30 characters). RE2 never
backtracks: for a given pattern a match takes time linear in the text, and a compiled pattern
takes bounded memory. Every pattern under `agent/spark` is compiled here
(`tests/test_hostile_text.py` checks that no module there imports `re`); the per-line shapes
of plan text are hand-written scanners instead (`plan.text`, `plan.expressions`), because a
call into RE2 costs microseconds where `re` costs a fraction of one.

RE2 reads Python's syntax without backreferences and lookaround, and differs in what the
patterns here take care of:

* `\w`, `\s` and `\b` are ASCII in RE2, Unicode in Python. `compile` refuses them and their
  negations; a pattern spells Python's classes with `WORD` and `SPACE`, and a word boundary
  by the characters either side of it.
* `\d` is ASCII `[0-9]` (Python's takes any Unicode digit): Spark prints ids, counts and
  versions in ASCII.
* `$` matches only at the very end of the text (Python's also before a final newline): the
  patterns read stripped text or single lines.
* Text is handed to RE2 as UTF-8, so it must hold no lone surrogate: event-log JSON (orjson)
  holds none; file names are filtered where they are listed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Protocol

import re2

#: Python's `\w` on text (what `str.isalnum()` or `_` accepts), to use inside brackets.
WORD: Final = r"\p{L}\p{N}_"
#: Python's `\s` on text (what `str.isspace()` accepts), to use inside brackets.
SPACE: Final = (
    r"\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
#: The escapes whose RE2 meaning (ASCII) differs from Python's (Unicode).
_ASCII_ONLY: Final = frozenset("wWsSbB")

#: RE2's own error: a pattern it cannot compile.
PatternError = re2.error


class Match(Protocol):
    """A match, as much of `re.Match` as the agent reads (groups typed like typeshed's)."""

    def __getitem__(self, group: int | str, /) -> str | Any: ...
    def groupdict(self) -> dict[str, str | Any]: ...
    def start(self, group: int = 0, /) -> int: ...
    def end(self, group: int = 0, /) -> int: ...


class Pattern(Protocol):
    """A compiled pattern, as much of `re.Pattern` as the agent uses."""

    def match(self, text: str) -> Match | None: ...
    def fullmatch(self, text: str) -> Match | None: ...
    def search(self, text: str) -> Match | None: ...
    def finditer(self, text: str) -> Iterator[Match]: ...
    def findall(self, text: str) -> list[Any]: ...
    def sub(self, repl: str, text: str, count: int = 0) -> str: ...


def compile(pattern: str) -> Pattern:
    """One of the agent's own patterns, compiled by RE2. Raises ValueError when it uses an
    escape whose meaning RE2 changes (see the module docstring)."""
    escape = _ascii_only_escape(pattern)
    if escape is not None:
        raise ValueError(
            f"pattern {pattern!r} uses \\{escape}, which RE2 reads as ASCII only: "
            "spell it with linear.WORD or linear.SPACE"
        )
    return _compiled(pattern, None)


def compile_foreign(pattern: str, *, max_mem: int) -> Pattern:
    """A pattern the event log brings, written for Java (`spark.redaction.regex`), compiled
    by RE2 with at most `max_mem` bytes for its programs. Its classes are left as written:
    RE2's ASCII `\\w`, `\\s`, `\\d` and `\\b` are Java's too. Raises PatternError when RE2
    cannot compile it (a Java-only construct, or a program larger than `max_mem`)."""
    return _compiled(pattern, max_mem)


def _compiled(pattern: str, max_mem: int | None) -> Pattern:
    options = re2.Options()
    options.log_errors = False  # RE2 would write the pattern to stderr, past our logs
    if max_mem is not None:
        options.max_mem = max_mem
    compiled: Pattern = re2.compile(pattern, options)
    return compiled


def _ascii_only_escape(pattern: str) -> str | None:
    """The first of `\\w \\W \\s \\S \\b \\B` in `pattern` (an escaped backslash is no escape)."""
    i = pattern.find("\\")
    while i != -1 and i + 1 < len(pattern):
        if pattern[i + 1] in _ASCII_ONLY:
            return pattern[i + 1]
        i = pattern.find("\\", i + 2)
    return None
