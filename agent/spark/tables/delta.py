"""What one Delta commit file (`_delta_log/<version>.json`, one JSON action per line) tells:
its `commitInfo.timestamp` and the schema of its `metaData.schemaString`.

Read as the reader always read it: only lines holding `"commitInfo"` or `"metaData"` are
parsed, the first that gives a timestamp gives the commit's, the first whose `metaData` has
a `schemaString` gives its schema, and a line that is no JSON makes what it was read for
unreadable (the question that reaches that commit tells nothing). Now in bounded memory: the
lines are found without splitting the file, each is parsed as a stream, only the timestamp
and the schema string are kept, and the schema is read within `SCHEMA_BUDGET`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from agent.spark.plan.syntax.schema import Field
from agent.spark.tables.fields import fields_size, spark_schema
from agent.spark.tables.jsonstream import Events, JSONError, finish, first_line, following, skip
from agent.spark.tables.jsonstream import events as json_events

_COMMIT_INFO: Final = b'"commitInfo"'
_META_DATA: Final = b'"metaData"'


@dataclass(frozen=True, slots=True)
class Commit:
    """A commit's timestamp and schema, None when it tells none; an error instead when the
    line that would tell is unreadable."""

    timestamp: int | None
    schema: tuple[Field, ...] | None
    timestamp_error: str | None = None
    schema_error: str | None = None

    @property
    def size(self) -> int:
        """Bytes it keeps, about, with its place in a cache."""
        return 768 + fields_size(self.schema or ())


def read_commit(raw: bytes) -> Commit:
    """What the commit file's bytes tell."""
    timestamp: int | None = None
    schema: tuple[Field, ...] | None = None
    timestamp_error = schema_error = None
    timed = typed = False  # each told (or made unreadable) by the first line that can
    for line in _marked_lines(raw, (_COMMIT_INFO, _META_DATA)):
        for_time = not timed and _COMMIT_INFO in line
        for_schema = not typed and _META_DATA in line
        if not (for_time or for_schema):
            continue
        try:
            stamp, text = _action(line)
        except ValueError as error:
            if for_time:
                timed, timestamp_error = True, str(error)
            if for_schema:
                typed, schema_error = True, str(error)
            continue
        if for_time and stamp is not None:
            timed, timestamp = True, stamp
        if for_schema and text is not None:
            typed = True
            try:
                schema = spark_schema(text)
            except ValueError as error:
                schema_error = str(error)
        if timed and typed:
            break
    return Commit(timestamp, schema, timestamp_error, schema_error)


def _marked_lines(raw: bytes, markers: tuple[bytes, ...]) -> Iterator[bytes]:
    """The lines of `raw` (as bytes.splitlines cuts them) that hold one of `markers`, in
    order, the others never cut out: a file of millions of short lines costs no more than
    one line. Linear: each marker and each line end is searched for once past each line."""
    found = [raw.find(marker) for marker in markers]
    done = 0  # where the last line given ended (its line end, or the file's)
    while True:
        at = min((i for i in found if i >= 0), default=-1)
        if at < 0:
            return
        start = max(raw.rfind(b"\n", done, at), raw.rfind(b"\r", done, at)) + 1
        end = _line_end(raw, at)
        yield raw[start:end]
        done = end
        found = [
            raw.find(marker, end) if 0 <= i < end else i
            for i, marker in zip(found, markers, strict=True)
        ]


def _line_end(raw: bytes, at: int) -> int:
    """Where the line holding `at` ends (at a CR or LF, as bytes.splitlines sees it)."""
    ends = [i for i in (raw.find(b"\n", at), raw.find(b"\r", at)) if i >= 0]
    return min(ends) if ends else len(raw)


def _action(line: bytes) -> tuple[int | None, str | None]:
    """(`commitInfo.timestamp` if an integer, `metaData.schemaString` if a string) of one
    action line; ValueError when the line is not one JSON value."""
    stream = json_events(line)
    stamp: int | None = None
    text: str | None = None
    try:
        first = following(stream)
        if first[0] != "start_map":
            skip(stream, first)
        else:
            for kind, key in stream:
                if kind == "end_map":
                    break
                value = following(stream)
                if key == "commitInfo":
                    found = _member(stream, value, "timestamp")
                    stamp = (
                        found if isinstance(found, int) and not isinstance(found, bool) else None
                    )
                elif key == "metaData":
                    found = _member(stream, value, "schemaString")
                    text = found if isinstance(found, str) else None
                else:
                    skip(stream, value)
        finish(stream)
    except JSONError as error:
        raise ValueError(f"not JSON: {first_line(error)}") from None
    return stamp, text


def _member(stream: Events, first: tuple[str, object], name: str) -> object:
    """The last value of key `name` in the object that begins with `first`, when it is no
    object or array; None otherwise. Reads past the whole object."""
    if first[0] != "start_map":
        skip(stream, first)
        return None
    found: object = None
    for kind, key in stream:
        if kind == "end_map":
            return found
        value = following(stream)
        skip(stream, value)
        found = value[1] if key == name else found
    raise ValueError("the JSON text ends inside a value")
