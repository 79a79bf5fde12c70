"""The Spark source over a real shared PostgreSQL state, in process: a hung server never
stalls the event loop, and a stop another agent recorded applies where the application is
followed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from agent.config.model import SparkConfig
from agent.delivery.envelope import Fence
from agent.spark.follow.source import SparkSource
from agent.state import pgconnection
from agent.state.postgres import PostgresState
from agent.telemetry.metrics import Metrics
from tests.pg import Postgres
from tests.spark_logs import SparkLogs
from tests.waits import until

Emitted = list[tuple[str, dict[str, Any], Fence | None]]


def half_written(logs: SparkLogs, events_dir: Path) -> tuple[Path, str, str]:
    """The real single-file log written up to its first SQL execution's end, in progress;
    (its path, the rest Spark writes later, its application id)."""
    source = next(logs.directory("single", "none").iterdir())
    lines = source.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "SQLExecutionEnd" in line)
    events_dir.mkdir()
    path = events_dir / f"{source.name}.inprogress"
    path.write_text("".join(lines[:cut]))
    return path, "".join(lines[cut:]), source.name


def shared_source(events_dir: Path, state_url: str) -> SparkSource:
    config = SparkConfig(
        event_log_dirs=(str(events_dir),), poll_interval=0.1, replay_horizon=0, stale_after=600
    )
    state = PostgresState(state_url, owner="a", lease_seconds=3.0)
    return SparkSource(config, "spark", state, Metrics(CollectorRegistry()))


async def test_a_hung_state_server_never_stalls_the_event_loop(
    spark_logs: SparkLogs, state_url: str, postgres_server: Postgres, tmp_path: Path
) -> None:
    """Every PostgreSQL process stopped for 6 s, past the 3 s lease, while the log grows: the
    loop keeps ticking (the calls wait in worker threads); once the server answers, the lease
    nobody took is still this agent's, and the runs end, each event once."""
    path, rest, _ = half_written(spark_logs, tmp_path / "events")
    source = shared_source(path.parent, state_url)
    emitted: Emitted = []
    stop = asyncio.Event()
    task = asyncio.create_task(source.run(lambda a, e, f=None: emitted.append((a, e, f)), stop))
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    try:
        await until(lambda: any(e["eventType"] == "START" for _, e, _ in emitted))
        ticker = asyncio.create_task(tick())
        with postgres_server.paused():
            with path.open("a") as out:
                out.write(rest)
            path.rename(path.with_suffix(""))
            await asyncio.sleep(6)
        ticker.cancel()
        finished = str(path.with_suffix("")).lower()
        await until(lambda: any(finished.endswith(key.lower()) for key in source._finished))
    finally:
        stop.set()
        await task
        source.state.close()
    # A call waiting on the loop would hold it a statement timeout (5 s) or the pause (6 s);
    # a gap of a fraction of that is a busy machine's scheduling, not a stall.
    assert max(gaps) < pgconnection.TIMEOUT * 0.4, f"the loop stalled {max(gaps):.2f}s"
    print(f"server stopped 6 s: the loop's longest gap was {max(gaps) * 1000:.0f} ms")
    keys = [(e["run"]["runId"], e["eventType"], e["eventTime"]) for _, e, _ in emitted]
    assert len(keys) == len(set(keys))
    assert {t for _, t, _ in keys} >= {"START", "COMPLETE"}
    # Every event under its lease, the first one: expired meanwhile, but nobody took it.
    assert {getattr(fence, "token", None) for _, _, fence in emitted} == {1}


async def test_a_stop_recorded_by_another_agent_applies_at_the_owner(
    spark_logs: SparkLogs, state_url: str, tmp_path: Path
) -> None:
    """`job stop` answered by another agent records the stop; the owner's next heartbeat
    applies it: the application's runs will end ABORT, without a restart."""
    path, _, app_id = half_written(spark_logs, tmp_path / "events")
    source = shared_source(path.parent, state_url)
    other = PostgresState(state_url, owner="b")
    stop = asyncio.Event()
    task = asyncio.create_task(source.run(lambda a, e, f=None: None, stop))
    try:
        await until(lambda: source.find(app_id) is not None)
        app = source.find(app_id)
        assert app is not None and not app.log.translator.stop_requested
        other.record_stop(app_id, "maintenance", "uid 0 (root)")
        await until(lambda: app.log.translator.stop_requested, seconds=5)
    finally:
        stop.set()
        await task
        source.state.close()
        other.close()
