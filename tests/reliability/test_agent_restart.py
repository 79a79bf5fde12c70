"""An agent restarted while its collector is down (an upgrade, `systemctl restart`, a node
reboot, the OOM killer) loses nothing: what never left is kept in the spool under the state
directory and goes out once after the restart, with the same bytes, each run in order."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.agentproc import metric
from tests.collector import closed_port
from tests.reliability import harness

EVENTS = 120


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_restart_while_the_collector_is_down_loses_nothing(
    workdir: Path, stop: signal.Signals
) -> None:
    """Collector down, agent stopped (SIGTERM or SIGKILL) and started again, collector up:
    every event reaches the collector exactly once, signed as it was, runs whole."""
    port = closed_port()
    config = harness.config_file(
        workdir, harness.http_lineage(f"http://127.0.0.1:{port}/api/v1/lineage", timeout="1s")
    )
    with harness.memory_agent(config, EVENTS) as first:
        harness.wait_produced(first, EVENTS)
        harness.wait_until(
            "every event spooled",
            lambda: metric(first.scrape(), "lineage_queue_depth", transport="http") == EVENTS,
        )
        assert harness.drops(first.scrape(), "http") == {}
        if stop == signal.SIGTERM:
            assert first.stop() == 0
            line = first.wait_log("agent_stopped", timeout=5)
            assert line["accounting"]["http"]["queued"] == EVENTS
        else:
            harness.kill(first)
    with harness.memory_agent(config, 0) as second:
        restored = second.wait_log("spool_restored", timeout=30)
        assert restored["unsent"] == {"http": EVENTS}
        with harness.TallyCollector(port=port) as collector:
            samples = harness.settle(second, "http")
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            assert metric(samples, "lineage_events_restored_total", transport="http") == EVENTS
            accounting = harness.stop_and_account(second)
    assert accounting["http"]["delivered"] == EVENTS
    assert sorted(harness.event_index(event) for event in collector.events) == list(range(EVENTS))
    harness.assert_runs_whole(collector.events)
    assert harness.check_events(collector.events, workdir / "ed25519.key") == EVENTS
    assert not list((workdir / "state" / "spool").glob("*.spool"))[1:]  # one fresh segment


def test_a_spool_of_garbage_never_stops_the_agent(workdir: Path) -> None:
    """A damaged spool segment is counted and skipped; the agent starts and ships."""
    spool = workdir / "state" / "spool"
    spool.mkdir(parents=True)
    (spool / f"{1:020d}.spool").write_bytes(b"\xa7E\x00\x00\x00\x10garbage" * 1000)
    with harness.TallyCollector() as collector:
        config = harness.config_file(workdir, harness.http_lineage(collector.url, timeout="1s"))
        with harness.memory_agent(config, 10) as process:
            samples = harness.settle(process, "http", 10)
            assert metric(samples, "lineage_spool_corrupt_records_total") >= 1
            process.wait_log("spool_records_skipped", timeout=5)
            harness.stop_and_account(process)
    assert len(collector.events) == 10
