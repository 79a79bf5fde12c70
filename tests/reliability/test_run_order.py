"""Whole applications delivered to a collector that is slow or restarts: every run arrives
with its START first and exactly one terminal event, nothing twice (the real daemon reading
real Spark event logs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.agentproc import AgentProcess, keygen, metric
from tests.applog import unpacked
from tests.collector import slow
from tests.reliability import harness

LOGS = Path(__file__).resolve().parents[1] / "data" / "eventlogs"
APPLICATIONS = ("success", "sql_failure", "cancelled")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    keygen(tmp_path)
    events = tmp_path / "events"
    events.mkdir()
    for number, name in enumerate(APPLICATIONS):
        (events / f"local-170000000000{number}").write_bytes(unpacked(LOGS / f"{name}.jsonl.zst"))
    return tmp_path


def daemon_config(workdir: Path, url: str, **http: Any) -> Path:
    return harness.config_file(
        workdir,
        harness.http_lineage(url, **http),
        spark={"event_log_dirs": [str(workdir / "events")], "replay_horizon": 0},
    )


def wait_finished(process: AgentProcess, count: int, timeout: float = 60) -> None:
    """Block until the agent read `count` logs to their end (every event made)."""
    deadline = time.monotonic() + timeout
    while sum(line.get("event") == "eventlog_finished" for line in process.logs()) < count:
        assert time.monotonic() < deadline, process.raw_output()[-3000:]
        time.sleep(0.1)


def emitted_order(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each run's event types in the order they arrived."""
    runs: dict[str, list[str]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event["eventType"])
    return runs


def test_a_collector_taking_4s_per_post_gets_every_run_in_order(workdir: Path) -> None:
    """With the default timeout a collector that takes 4 s per POST gets every event once,
    each run START first and one terminal last: nothing unconfirmed, nothing dropped."""
    with harness.TallyCollector(slow(4.0)) as collector:
        with harness.agent(daemon_config(workdir, collector.url)) as process:
            wait_finished(process, len(APPLICATIONS))
            samples = harness.settle(process, "http", 1)
            harness.assert_healthy(process)
            made = metric(samples, "lineage_events_delivered_total", transport="http")
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            accounting = harness.stop_and_account(process)
        events = collector.events
    assert accounting["http"]["delivered"] == made == len(events) > 10
    assert len({e["run"]["facets"]["lineageAgent_signature"]["signature"] for e in events}) == made
    harness.assert_runs_whole(events)
    assert harness.check_events(events, workdir / "ed25519.key") == made


def test_a_collector_restarting_mid_application_loses_nothing(workdir: Path) -> None:
    """A collector that restarts while the applications' events flow (it answers what it
    read, is down 5 s, comes back on its port) gets every run whole: the events made while
    it was down waited, in order."""
    first = harness.TallyCollector(slow(0.3)).start()
    second: harness.TallyCollector | None = None
    try:
        with harness.agent(daemon_config(workdir, first.url)) as process:
            first.wait_for(3, timeout=60)
            wait_finished(process, len(APPLICATIONS))
            port = first.port
            first.stop(graceful=True)
            time.sleep(5)
            assert harness.drops(process.scrape(), "http") == {}
            second = harness.TallyCollector(port=port).start()
            samples = harness.settle(process, "http", 1)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            accounting = harness.stop_and_account(process)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    events = first.events + second.events
    assert 3 <= len(first.events) < len(events)
    assert accounting["http"]["delivered"] == len(events)
    assert len({e["run"]["facets"]["lineageAgent_signature"]["signature"] for e in events}) == len(
        events
    )
    runs = harness.assert_runs_whole(events)
    assert emitted_order(events) == runs
    assert harness.check_events(events, workdir / "ed25519.key") == len(events)
