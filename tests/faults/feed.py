"""Real PySpark event logs written into a followed directory over time, the way Spark writes
them: `<app id>.inprogress` growing in parts, renamed `<app id>` when the application ends.

Each sample is given an application id of its own (every occurrence of its old id replaced), so
its run ids are new: Marquez keys runs by id across namespaces, and a scenario run twice must
not meet its earlier runs. The applications are staggered: application k writes its part i at
step k + i, so some start while others are halfway or ending.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import zstandard

EVENTLOGS: Final = Path(__file__).resolve().parents[1] / "data" / "eventlogs"
#: The default workload, about 100 events in 55 runs: success, failure, cancellation, JDBC,
#: local files, DDL and an Iceberg catalog (paths under tests/data/eventlogs/, no suffix).
WORKLOAD: Final = (
    "success",
    "sql_failure",
    "cancelled",
    "jdbc/jdbc_postgres",
    "marquez/local_data",
    "marquez/table_ddl",
    "lakehouse/iceberg_hadoop",
)
_APP_ID = re.compile(rb'"App ID":"([^"]+)"')


@dataclass(frozen=True)
class AppLog:
    """One application's log under its new id."""

    sample: str
    app_id: str
    content: bytes


def read_sample(name: str) -> bytes:
    """The decompressed sample `tests/data/eventlogs/<name>.jsonl.zst`."""
    path = EVENTLOGS / f"{name}.jsonl.zst"
    reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    return reader.decompress(path.read_bytes())


def renamed(name: str, app_id: str) -> AppLog:
    """The sample with every occurrence of its application id replaced by `app_id`."""
    content = read_sample(name)
    found = _APP_ID.search(content)
    if found is None:
        raise ValueError(f"{name}: no application id in the log")
    return AppLog(name, app_id, content.replace(found.group(1), app_id.encode()))


def workload(names: Sequence[str], first_ms: int) -> list[AppLog]:
    """The samples under ids `local-<first_ms>`, `local-<first_ms + 1>`, ... (Spark's local
    mode form: `local-` and the driver's start in epoch milliseconds)."""
    return [renamed(name, f"local-{first_ms + i}") for i, name in enumerate(names)]


def parts(content: bytes, count: int) -> list[bytes]:
    """The log cut into `count` pieces at line ends (fewer when it has fewer lines)."""
    lines = content.splitlines(keepends=True)
    count = max(1, min(count, len(lines)))
    size, extra = divmod(len(lines), count)
    pieces, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        pieces.append(b"".join(lines[start:end]))
        start = end
    return pieces


class Feeder(threading.Thread):
    """Writes the applications over `seconds` in `steps` parts each; `progress` is the share
    of steps done (0..1); `stop` ends it early (what is written stays in progress)."""

    def __init__(self, directory: Path, apps: Sequence[AppLog], seconds: float, steps: int):
        super().__init__(name="feeder", daemon=True)
        self.directory = directory
        self.apps = list(apps)
        self.steps = max(1, steps)
        self.total = self.steps + len(self.apps) - 1
        self.pause = seconds / self.total
        self.done_steps = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    @property
    def progress(self) -> float:
        return self.done_steps / self.total

    def run(self) -> None:
        try:
            self._write()
        except BaseException as error:  # reported by the scenario
            self.error = error

    def _write(self) -> None:
        pieces = [parts(app.content, self.steps) for app in self.apps]
        for step in range(self.total):
            for k, app in enumerate(self.apps):
                i = step - k
                if not 0 <= i < len(pieces[k]):
                    continue
                growing = self.directory / f"{app.app_id}.inprogress"
                with growing.open("ab") as out:
                    out.write(pieces[k][i])
                if i == len(pieces[k]) - 1:
                    growing.rename(self.directory / app.app_id)
            self.done_steps = step + 1
            if self.stop.wait(self.pause):
                return

    def wait_progress(self, share: float, timeout: float) -> None:
        """Block until `share` of the steps are written (or the feed ended, or timeout)."""
        deadline = time.monotonic() + timeout
        while self.progress < share and self.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
