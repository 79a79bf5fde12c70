"""Latency: from Spark writing SQLExecutionEnd to the collector receiving the terminal event.

A real PySpark application (`jobs/spark_driver.py`, action `writes`) runs `executions` small
parquet writes, `pause` seconds apart, while the real daemon (`python -m agent run`, http
transport, defaults otherwise) watches its event-log directory and ships to a loopback
collector in its own process that stamps each event's arrival (`tests/bench/arrivals.py`).

For every execution: `t_spark` is the `time` field of its SQLExecutionEnd (the driver's
clock, milliseconds; this machine's clock), `t_arrival` when the collector read the request
holding the run's terminal event (matched by eventTime, which the translator takes from that
same field). Latency = t_arrival - t_spark.

Baseline, the floor of any reader outside the JVM: a thread in this process that is woken by
inotify when the log grows and decodes it at once (`t_visible`, when the SQLExecutionEnd line
could first be read). It shows how much of the latency is Spark's own (listener bus, event
log writer, flush) and how much is the agent's.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.bench.harness import (
    CollectorProcess,
    Context,
    Figure,
    Result,
    Target,
    agent_config,
    agent_process,
    percentile,
    wait_until,
)

_SQL_END = b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"'
TERMINAL = ("COMPLETE", "FAIL", "ABORT")


@dataclass(frozen=True)
class Params:
    executions: int = 60
    rows: int = 1000
    pause: float = 0.3


FULL = Params()
SMOKE = Params(executions=3, rows=100, pause=0.1)


class SqlEndWatcher:
    """Notes when each SQLExecutionEnd line of a rolling zstd log first became readable."""

    def __init__(self, events_dir: Path) -> None:
        from inotify_simple import INotify, flags

        self._flags = flags
        self.events_dir = events_dir
        self.seen: list[tuple[int, int, float]] = []  # (execution id, time ms, seen at)
        self._inotify = INotify()
        self._inotify.add_watch(str(events_dir), flags.CREATE | flags.MOVED_TO)
        self._dirs: set[Path] = set()
        self._files: dict[Path, tuple[int, Any, bytes]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sql-end-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import zstandard

        mask = self._flags.CREATE | self._flags.MODIFY | self._flags.MOVED_TO
        while not self._stop.is_set():
            self._inotify.read(timeout=100)
            now = time.time()
            for folder in self.events_dir.glob("eventlog_v2_*"):
                if folder not in self._dirs:
                    self._dirs.add(folder)
                    self._inotify.add_watch(str(folder), mask)
            for folder in self._dirs:
                for path in folder.glob("events_*"):
                    offset, decoder, partial = self._files.get(
                        path,
                        (
                            0,
                            zstandard.ZstdDecompressor().decompressobj(read_across_frames=True),
                            b"",
                        ),
                    )
                    with path.open("rb") as file:
                        file.seek(offset)
                        data = file.read()
                    if not data:
                        continue
                    *lines, partial = (partial + decoder.decompress(data)).split(b"\n")
                    self._files[path] = (offset + len(data), decoder, partial)
                    for line in lines:
                        if line.startswith(_SQL_END):
                            record = json.loads(line)
                            self.seen.append((record["executionId"], record["time"], now))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._inotify.close()


def _epoch_ms(event_time: str) -> int:
    return round(datetime.fromisoformat(event_time.replace("Z", "+00:00")).timestamp() * 1000)


def match(
    seen: list[tuple[int, int, float]], arrivals: list[dict[str, Any]]
) -> tuple[list[tuple[float, float]], int]:
    """(latency, floor) in seconds per execution whose terminal event arrived, and how many
    executions found no terminal event."""
    terminal: dict[int, list[float]] = {}
    for arrival in arrivals:
        if arrival["jobType"] == "SQL_JOB" and arrival["eventType"] in TERMINAL:
            terminal.setdefault(_epoch_ms(arrival["eventTime"]), []).append(arrival["t"])
    pairs, missing = [], 0
    for _execution, time_ms, visible in seen:
        arrived = terminal.get(time_ms)
        if not arrived:
            missing += 1
            continue
        pairs.append((arrived.pop(0) - time_ms / 1000, visible - time_ms / 1000))
    return pairs, missing


def run(context: Context) -> Result:
    params = SMOKE if context.smoke else FULL
    result = Result("latency", "python -m tests.bench latency")
    base = context.directory("latency")
    events_dir = base / "events"
    events_dir.mkdir()
    arrivals_file = base / "arrivals.json"
    result.setup = {
        "executions": params.executions,
        "pause_seconds": params.pause,
        "agent": "python -m agent run (real daemon), http transport, default settings",
        "spark": "one PySpark application, parquet writes, rolling zstd event log (defaults)",
    }
    spark = context.spark  # the JVM is up before the clock matters
    collector = CollectorProcess(
        [sys.executable, "-m", "tests.bench.arrivals", "--out", str(arrivals_file)]
    )
    watcher = SqlEndWatcher(events_dir)
    try:
        config = agent_config(base / "agent", endpoint=collector.url, event_dirs=[events_dir])
        with agent_process(config) as agent:
            answer = spark.call(
                "writes",
                120 + params.executions * 30,
                event_dir=str(events_dir),
                work=str(base / "scratch"),
                app_name="bench latency",
                executions=params.executions,
                rows=params.rows,
                pause=params.pause,
            )
            wait_until(
                lambda: len(watcher.seen) >= params.executions,
                30,
                "every SQLExecutionEnd seen in the log",
            )
            # Wait (bounded) for the terminal events to be delivered before stopping.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                samples = agent.scrape()
                delivered = samples.get("lineage_events_delivered_total{transport=http}", 0)
                if delivered >= 2 * params.executions + 2:
                    break
                time.sleep(0.2)
            code = agent.stop()
    finally:
        watcher.close()
        collector.stop()
    arrivals = json.loads(arrivals_file.read_text())
    pairs, missing = match(watcher.seen, arrivals)
    if missing:
        result.notes.append(f"{missing} executions had no terminal event at the collector")
    if code != 0:
        result.notes.append(f"the agent exited {code}")
    if not pairs:
        raise RuntimeError("no execution could be matched to a terminal event")
    latency_ms = [p[0] * 1000 for p in pairs]
    floor_ms = [p[1] * 1000 for p in pairs]
    agent_ms = [(p[0] - p[1]) * 1000 for p in pairs]
    detail = {
        "executions_matched": len(pairs),
        "executions_unmatched": missing,
        "app_id": answer["app_id"],
        "latency_ms_min_max": [round(min(latency_ms), 1), round(max(latency_ms), 1)],
        "agent_share_ms_p50_p99": [
            round(percentile(agent_ms, 0.5), 1),
            round(percentile(agent_ms, 0.99), 1),
        ],
        "latency_ms_per_execution": [round(ms, 1) for ms in latency_ms],
        "agent_share_ms_per_execution": [round(ms, 1) for ms in agent_ms],
    }
    floor_name = "log line readable (inotify + zstd reader in the benchmark process)"
    result.add(
        Figure(
            "p50_ms",
            percentile(latency_ms, 0.5),
            "ms",
            floor_name,
            percentile(floor_ms, 0.5),
            Target("<=", 100.0, on="value"),
            detail,
        )
    )
    result.add(
        Figure(
            "p99_ms",
            percentile(latency_ms, 0.99),
            "ms",
            floor_name,
            percentile(floor_ms, 0.99),
            Target("<=", 500.0, on="value"),
        )
    )
    return result
