"""Event logs read through `ApplicationLog` as the daemon and `replay` read them: the record
batches translated in order, the tables' metadata filled after each, the warnings taken.
Shared by the tests that replay checked-in logs or the logs their own jobs wrote."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import zstandard

from agent.spark.eventlog.discovery import scan
from agent.spark.eventlog.layout import LogRef
from agent.spark.eventlog.records import RecordBatch
from agent.spark.follow.application import ApplicationLog
from agent.spark.translate.datasets.versions import TableMetadata
from agent.spark.translate.options import TranslateOptions

Event = dict[str, Any]
#: A name Spark could give a single-file log.
LOG_NAME = "local-1700000000000"


def machine_places() -> tuple[str, ...]:
    """The places of the machine running the tests that a log made here could name: the
    checkout, the temporary directory, the home directory and the interpreter's environment.
    A checked-in log names none of them (its generator rewrote them)."""
    places = (Path(__file__).resolve().parents[1], tempfile.gettempdir(), Path.home(), sys.prefix)
    return tuple(f"{str(place).rstrip('/')}/" for place in places)


def unpacked(path: Path) -> bytes:
    """The lines of a checked-in `*.jsonl.zst` log."""
    return zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())


def staged(directory: Path, text: bytes) -> LogRef:
    """`text` as the one single-file log of a new event-log directory."""
    directory.mkdir(parents=True)
    (directory / LOG_NAME).write_bytes(text)
    (ref,) = scan(directory)
    return ref


def read_through(
    ref: LogRef,
    options: TranslateOptions,
    *,
    table_metadata: TableMetadata | None = None,
    apart: bool = False,
) -> tuple[list[Event], list[str]]:
    """The RunEvents and warnings of a log; with `apart`, the tables' metadata is looked at
    after each record rather than after each read, as a daemon reading a growing log may."""
    log = ApplicationLog(ref, options, max_line_bytes=64 << 20, table_metadata=table_metadata)
    events: list[Event] = []
    warnings: list[str] = []
    while True:
        batch = log.read()
        pieces = [RecordBatch(lines=1, records=[r]) for r in batch.records] if apart else [batch]
        for piece in pieces:
            events += log.finish(log.feed(piece))
        warnings += log.take_warnings()
        if log.reader.caught_up:
            break
    log.close()
    return events, warnings
