"""The one record-reading loop: decoded lines of a log -> parsed records, problems counted.

The daemon's source and `replay` both read through `read_records`, so a log yields the same
records, in the same order, whichever of them reads it. A line the caller does not want
(its pre-filter says so from the raw bytes) is never parsed; a wanted line that is not JSON
is corrupt: counted and skipped, never a state change. Valid JSON that is not an object is no
event and is skipped as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent.spark.eventlog.reader import LogReader, ReadError, SkippedLine

Record = dict[str, Any]


@dataclass(slots=True)
class RecordBatch:
    """What one read gave: records with their raw lines, and what went wrong on the way."""

    records: list[tuple[bytes, Record]] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)  # why each corrupt line was skipped
    skipped: list[SkippedLine] = field(default_factory=list)  # lines too long to hold
    errors: list[ReadError] = field(default_factory=list)  # damaged codec streams
    lines: int = 0  # complete lines read, wanted or not
    bytes_read: int = 0  # stored (compressed) bytes read


def read_records(reader: LogReader, budget: int, wanted: Callable[[bytes], bool]) -> RecordBatch:
    """Read about `budget` decoded bytes of new complete lines and parse the wanted ones."""
    before = reader.bytes_read
    lines = reader.read_available(budget)
    batch = RecordBatch(lines=len(lines))
    for line in lines:
        if not wanted(line):
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            batch.corrupt.append(str(error))
            continue
        if not isinstance(record, dict):
            continue  # valid JSON of another shape (a list, a number) is no event: skipped
        batch.records.append((line, record))
    batch.skipped = reader.take_skipped()
    batch.errors = reader.take_errors()
    batch.bytes_read = reader.bytes_read - before
    return batch
