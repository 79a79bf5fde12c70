"""Scale of the watched directory: the real daemon starting over `logs` completed application
logs (copies of the real sample logs under new ids, zstd, both layouts; cached in the work
folder).

Three starts, each with a fresh state database and a loopback collector in its own process:
* baseline: an empty directory; start-up = spawn to `agent_started`;
* horizon excluding them (the logs are two days old, `replay_horizon` 1d, the default):
  start-up = spawn to the end of the first scan (`eventlogs_skipped_by_horizon`), then the
  resident set;
* horizon including them (`replay_horizon: 0`): every log is read and translated; time =
  spawn to the last `eventlog_finished`, with the peak resident set and what became of the
  events (a replay of this size outruns one-event-per-POST delivery, so the queue's drops are
  reported). Its baseline is this process decompressing the same logs and `json.loads`-ing
  every line, as in the ingest benchmark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.agentproc import AgentProcess
from tests.bench.corpus import populate, set_age
from tests.bench.harness import (
    CollectorProcess,
    Context,
    Figure,
    LogTail,
    Result,
    agent_config,
    agent_process,
    peak_rss_mib,
    rss_mib,
    scrape,
    total,
    wait_until,
)

TWO_DAYS = 2 * 86400.0


@dataclass(frozen=True)
class Params:
    logs: int = 5000
    replay_timeout: float = 900.0


FULL = Params()
SMOKE = Params(logs=50, replay_timeout=120.0)


def ensure_logs(context: Context, count: int) -> tuple[Path, dict[str, Any]]:
    """`count` completed logs in `scale-<count>/logs`, made once and reused."""
    folder = context.work / f"scale-{count}"
    logs = folder / "logs"
    manifest_path = folder / "manifest.json"
    if manifest_path.exists() and logs.is_dir():
        manifest: dict[str, Any] = json.loads(manifest_path.read_text())
        if manifest.get("entries") == sum(1 for _ in logs.iterdir()):
            return logs, manifest
    context.directory(folder.name)
    began = time.monotonic()
    counts = populate(logs, completed=count, running=0, start_id=1_780_000_000_000)
    manifest = {
        "logs": count,
        "entries": count,
        **counts,
        "seconds_to_make": round(time.monotonic() - began, 1),
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return logs, manifest


@dataclass
class Start:
    """One start of the daemon; times come from its own log's timestamps."""

    ready_seconds: float  # spawn to `agent_started`
    scan_seconds: float | None  # spawn to the end of the first scan (logs skipped)
    replay_seconds: float | None  # `agent_started` to the last `eventlog_finished`
    rss_mib: float
    peak_rss_mib: float
    samples: dict[str, float]


_TIMED = ("agent_started", "eventlogs_skipped_by_horizon", "eventlog_finished")


def start(
    base: Path, logs: Path, ready: Any, timeout: float, spark: dict[str, Any] | None = None
) -> Start:
    """Start the daemon on `logs`; `ready(tail)` says when its start-up work is done."""
    with CollectorProcess.standard() as collector:
        config = agent_config(base, endpoint=collector.url, event_dirs=[logs], spark=spark)
        spawned = time.time()
        with agent_process(config) as agent:
            tail = LogTail(agent.log_path)

            def done() -> bool:
                tail.poll(keep=lambda line: line.get("event") in _TIMED)
                return bool(ready(tail))

            wait_until(done, timeout, f"start-up over {logs}", 0.05)
            time.sleep(1.0)  # deliveries and the ledger flush settle
            _drained(agent)
            samples = scrape(agent)
            pid = agent.proc.pid
            rss, peak = rss_mib(pid), peak_rss_mib(pid)
            agent.stop()
            tail.poll(keep=lambda line: line.get("event") in _TIMED)
    stamps: dict[str, float] = {}
    for line in tail.lines:  # the last line of each kind wins
        stamps[line["event"]] = _epoch(line["timestamp"])
    started = stamps["agent_started"]
    scanned = stamps.get("eventlogs_skipped_by_horizon")
    finished = stamps.get("eventlog_finished")
    return Start(
        started - spawned,
        None if scanned is None else scanned - spawned,
        None if finished is None else finished - started,
        rss,
        peak,
        samples,
    )


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _drained(agent: AgentProcess, timeout: float = 120.0) -> None:
    """Wait (bounded) until the queue is empty: every event delivered or dropped."""

    def empty() -> bool:
        samples = scrape(agent)
        return bool(samples) and not samples.get("lineage_queue_depth{transport=http}")

    wait_until(empty, timeout, "the agent's queue to drain", 0.2)


def run(context: Context) -> Result:
    from tests.bench.ingest import for_each_line

    params = SMOKE if context.smoke else FULL
    result = Result("scale", "python -m tests.bench scale")
    logs, manifest = ensure_logs(context, params.logs)
    set_age(logs, TWO_DAYS)
    base = context.directory("scale-runs")
    empty = base / "empty"
    empty.mkdir()
    result.setup = {"logs": manifest, "agent": "python -m agent run (real daemon), http"}

    baseline = start(base / "agent-empty", empty, lambda tail: tail.count("agent_started") > 0, 60)
    excluded = start(
        base / "agent-excluded",
        logs,
        lambda tail: tail.count("eventlogs_skipped_by_horizon") > 0,
        300,
    )
    included = start(
        base / "agent-included",
        logs,
        lambda tail: tail.count("eventlog_finished") >= params.logs,
        params.replay_timeout,
        spark={"replay_horizon": 0},
    )
    if excluded.scan_seconds is None or included.replay_seconds is None:
        raise RuntimeError("the agent's log lacks the start-up lines this benchmark times")

    began = time.perf_counter()
    for_each_line(log_files(logs), json.loads)
    parse_seconds = time.perf_counter() - began

    result.add(
        Figure(
            "startup_horizon_excluding_s",
            excluded.scan_seconds,
            "s",
            "start-up over an empty directory",
            baseline.ready_seconds,
            None,
            {
                "logs_skipped": params.logs,
                "what": "process spawn to the end of the first "
                "scan (every log skipped and remembered in the state database)",
            },
        )
    )
    result.add(
        Figure(
            "rss_horizon_excluding_mib",
            excluded.rss_mib,
            "MiB",
            "RSS over an empty directory",
            baseline.rss_mib,
            None,
            {"peak_rss_mib": round(excluded.peak_rss_mib, 1)},
        )
    )
    samples = included.samples
    result.add(
        Figure(
            "replay_horizon_including_s",
            included.replay_seconds,
            "s",
            "zstd decompression + json.loads of every line of the same logs",
            parse_seconds,
            None,
            {
                "what": "agent_started to the last eventlog_finished",
                "events_emitted": total(samples, "lineage_events_emitted_total"),
                "events_delivered": samples.get("lineage_events_delivered_total{transport=http}"),
                "events_dropped_by_reason": {
                    k.split("reason=", 1)[1].split(",")[0].rstrip("}"): v
                    for k, v in samples.items()
                    if k.startswith("lineage_events_dropped_by_reason_total{")
                },
            },
        )
    )
    result.add(
        Figure(
            "rss_horizon_including_peak_mib",
            included.peak_rss_mib,
            "MiB",
            "peak RSS over an empty directory",
            baseline.peak_rss_mib,
            None,
            {"rss_after_replay_mib": round(included.rss_mib, 1)},
        )
    )
    return result


def log_files(logs: Path) -> list[Path]:
    """Every event file under `logs` (all zstd): single files and rolling directories."""
    files: list[Path] = []
    for entry in sorted(logs.iterdir()):
        files += sorted(entry.glob("events_*")) if entry.is_dir() else [entry]
    return files
