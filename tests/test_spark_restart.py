"""The real daemon killed with SIGKILL and restarted while real PySpark applications run:
across the agents' lives every run has one START and one terminal event, none twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.independent import public_key, verify
from tests.olschema import validate_run_event
from tests.spark_scenarios import (
    Event,
    assert_run_shapes,
    daemon_config,
    events_in,
    live_apps,
    spark_daemon,
    wait_events,
)

pytestmark = pytest.mark.spark

INSERT = "execute_insert_into_hadoop_fs_relation_command"


def outline(events: list[Event]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["job"]["name"]) for e in events]


def has(*wanted: tuple[str, str]) -> Callable[[list[Event]], bool]:
    """A predicate: every (eventType, job name) in `wanted` was written."""
    return lambda events: set(wanted) <= set(outline(events))


def test_sigkill_and_restart_mid_application(tmp_path: Path) -> None:
    """SIGKILL of the agent while a write runs, restart while the application still runs,
    then SIGKILL again and a second application that starts, works and ends while no agent
    runs: the union of what the three agents wrote has every run's START and terminal event
    exactly once, in order, signed and schema-valid."""
    config = daemon_config(tmp_path / "agent", tmp_path / "events")
    out = tmp_path / "agent" / "lineage.jsonl"
    one, two = "restart_one", "restart_two"
    with live_apps(tmp_path, "restart one", "restart two") as apps:
        apps.started(1)
        # Started once the first event file exists, as in test_spark_scenarios' live test.
        with spark_daemon(config) as first:
            apps.do("write first")
            wait_events(out, has(("COMPLETE", f"{one}.{INSERT}.data_first")))
            apps.send("hold second")
            apps.wait_file("holding-second")
            wait_events(out, has(("START", f"{one}.{INSERT}.data_second")))
            first.proc.kill()  # SIGKILL: no drain, no state saved at exit
            first.proc.wait(30)
        written_by_first = len(events_in(out))

        apps.release("second")
        apps.do("write third")  # the second write ends and a third runs: no agent watches
        with spark_daemon(config) as second:
            wait_events(
                out,
                has(
                    ("COMPLETE", f"{one}.{INSERT}.data_second"),
                    ("COMPLETE", f"{one}.{INSERT}.data_third"),
                ),
            )
            apps.do("stop")
            wait_events(out, has(("COMPLETE", one)))
            apps.started(2)
            wait_events(out, has(("START", two)))
            second.proc.kill()
            second.proc.wait(30)
        written_by_second = len(events_in(out)) - written_by_first

        # The second application works and ends while no agent runs.
        apps.do("write fourth")
        apps.do("stop")
        assert apps.process.wait(120) == 0
        with spark_daemon(config) as third:
            wait_events(out, has(("COMPLETE", two)))
            third.wait_log("eventlog_finished")
        events = events_in(out)

    assert written_by_first == 4 and written_by_second == 5
    assert outline(events) == [
        ("START", one),
        ("START", f"{one}.{INSERT}.data_first"),
        ("COMPLETE", f"{one}.{INSERT}.data_first"),
        ("START", f"{one}.{INSERT}.data_second"),
        # the first agent died here; the second one takes over
        ("COMPLETE", f"{one}.{INSERT}.data_second"),
        ("START", f"{one}.{INSERT}.data_third"),
        ("COMPLETE", f"{one}.{INSERT}.data_third"),
        ("COMPLETE", one),
        ("START", two),
        # the second agent died here; the application ended before the third one started
        ("START", f"{two}.{INSERT}.data_fourth"),
        ("COMPLETE", f"{two}.{INSERT}.data_fourth"),
        ("COMPLETE", two),
    ]
    pairs = Counter((e["run"]["runId"], e["eventType"]) for e in events)
    assert max(pairs.values()) == 1
    assert_run_shapes([e for e in events if e["job"]["name"].startswith(one)])
    assert_run_shapes([e for e in events if e["job"]["name"].startswith(two)])
    key = public_key(tmp_path / "agent" / "ed25519.key")
    for event in events:
        validate_run_event(event)
        verify(event, key)
