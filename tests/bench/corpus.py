"""Inputs made from real Spark logs: the RunEvents the translator makes of them, and copies of
them under new application ids (directories of hundreds or thousands of applications).

The copies are real logs with the application id replaced everywhere it occurs (the file
name, ApplicationStart's `App ID`, paths that embed it), so every copy is its own
application with its own run ids, as the agent sees a busy cluster's event-log directory.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from tests.samples import NAMES, sample_bytes

#: The sample logs (tests/data/eventlogs) that end with ApplicationEnd (completed).
#: Killed with SIGKILL: no ApplicationEnd, as a still running application looks.
RUNNING = ("sigkill",)
COMPLETED = tuple(name for name in NAMES if name not in RUNNING)

_APP_ID = re.compile(rb'"App ID":"([^"]+)"')
Layout = Literal["single", "rolling"]


def translated_events(names: Sequence[str] = COMPLETED + RUNNING) -> list[dict[str, Any]]:
    """Every RunEvent the translator makes of the sample logs (empty executions too)."""
    from agent.spark.translate.options import TranslateOptions
    from agent.spark.translate.translator import ApplicationTranslator

    events: list[dict[str, Any]] = []
    for name in names:
        translator = ApplicationTranslator(
            TranslateOptions(namespace="spark", emit_empty_executions=True)
        )
        for line in sample_bytes(name).splitlines():
            events.extend(translator.feed(orjson.loads(line)))
        events.extend(translator.close(cause="driver_lost", time_ms=0, message="log ended"))
    return events


@dataclass(frozen=True)
class Template:
    """A sample log with its application id, ready to be copied under other ids."""

    name: str
    app_id: bytes
    data: bytes

    @classmethod
    def load(cls, name: str) -> Template:
        data = sample_bytes(name)
        match = _APP_ID.search(data)
        if match is None:
            raise ValueError(f"{name}: no ApplicationStart with an App ID")
        return cls(name, match.group(1), data)

    def copy(self, app_id: str) -> bytes:
        return self.data.replace(self.app_id, app_id.encode())


def app_ids(first: int, count: int) -> Iterator[str]:
    """Distinct application ids shaped like local-mode ones (`local-<millis>`)."""
    for number in range(count):
        yield f"local-{first + number}"


def write_log(
    directory: Path, app_id: str, data: bytes, *, layout: Layout, complete: bool, zstd: bool
) -> Path:
    """Lay one application log out as Spark does (single file or rolling directory)."""
    import zstandard

    payload = zstandard.ZstdCompressor(level=3).compress(data) if zstd else data
    codec = ".zstd" if zstd else ""
    name = app_id.lower()
    if layout == "single":
        path = directory / f"{name}{codec}{'' if complete else '.inprogress'}"
        path.write_bytes(payload)
        return path
    folder = directory / f"eventlog_v2_{name}"
    folder.mkdir()
    (folder / f"events_1_{name}{codec}").write_bytes(payload)
    (folder / f"appstatus_{name}{'' if complete else '.inprogress'}").write_bytes(b"")
    return folder


def populate(
    directory: Path,
    *,
    completed: int,
    running: int,
    start_id: int,
    rolling_every: int = 5,
    age_seconds: float = 0.0,
) -> dict[str, int]:
    """Fill `directory` with `completed` finished and `running` in-progress application logs
    (copies of the samples, zstd-compressed as Spark 4 writes them; every `rolling_every`-th
    one in the rolling layout). `age_seconds` > 0 sets their modification time that far in
    the past. Returns counts by kind."""
    directory.mkdir(parents=True, exist_ok=True)
    finished = [Template.load(name) for name in COMPLETED]
    live = [Template.load(name) for name in RUNNING]
    ids = app_ids(start_id, completed + running)
    counts = {"single": 0, "rolling": 0, "bytes": 0}
    stamp = time.time() - age_seconds
    for number in range(completed + running):
        complete = number < completed
        template = (finished if complete else live)[number % (len(finished) if complete else 1)]
        layout: Layout = "rolling" if number % rolling_every == rolling_every - 1 else "single"
        app_id = next(ids)
        data = template.copy(app_id)
        path = write_log(directory, app_id, data, layout=layout, complete=complete, zstd=True)
        counts[layout] += 1
        counts["bytes"] += len(data)
        if age_seconds:
            _age(path, stamp)
    return counts


def _age(path: Path, stamp: float) -> None:
    targets = [path, *path.iterdir()] if path.is_dir() else [path]
    for target in targets:
        os.utime(target, (stamp, stamp))


def set_age(directory: Path, age_seconds: float) -> None:
    """Move the modification time of every log in `directory` `age_seconds` into the past."""
    stamp = time.time() - age_seconds
    for entry in directory.iterdir():
        _age(entry, stamp)
