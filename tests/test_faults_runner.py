"""The pure parts of the Marquez fault runner (`tests/faults/`): the comparison of what the
agent made with what Marquez stored, the agent's accounting, the feed, the arguments. No
Marquez and no agent process here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.faults.cli import is_loopback, options_of, parse_args
from tests.faults.feed import Feeder, parts, renamed, workload
from tests.faults.report import (
    Accounting,
    Life,
    apply_stopped,
    compare,
    expected_runs,
    instant,
    life_from_samples,
    render,
    summary_table,
)


def event(run: str, kind: str, at: str, job: str = "app") -> dict[str, Any]:
    return {
        "eventType": kind,
        "eventTime": at,
        "run": {"runId": run},
        "job": {"namespace": "ns", "name": job},
    }


A_START = event("a", "START", "2026-11-24T04:44:04.880Z")
A_END = event("a", "COMPLETE", "2026-11-24T04:44:05.100Z")
B_START = event("b", "START", "2026-11-24T04:44:06.000Z", "app.step")
B_END = event("b", "FAIL", "2026-11-24T04:44:07.000Z", "app.step")
EXPECTED = [A_START, B_START, B_END, A_END]


def test_instant_compares_java_and_python_forms() -> None:
    """Marquez's `.16Z`, the agent's `.160Z` and an offset form name the same instant."""
    assert instant("2026-11-24T04:44:04.16Z") == instant("2026-11-24T04:44:04.160Z")
    assert instant("2026-11-24T05:44:04.160+01:00") == instant("2026-11-24T04:44:04.16Z")
    assert instant("2026-11-24T04:44:04Z") == "2026-11-24T04:44:04.000000000Z"
    with pytest.raises(ValueError):
        instant("yesterday")


def test_expected_runs_know_their_final_state() -> None:
    """A run ends in the state of its last terminal event, mapped to Marquez's RunState."""
    runs = expected_runs(EXPECTED)
    assert list(runs) == ["a", "b"]
    assert runs["a"].marquez_state == "COMPLETED"
    assert runs["b"].marquez_state == "FAILED"
    assert runs["b"].job == "ns/app.step"
    running = expected_runs([A_START])
    assert running["a"].marquez_state == "RUNNING"


def test_everything_stored_in_order_is_clean() -> None:
    """All events stored once and every run in its final state: nothing to report."""
    stored = [dict(e, eventTime=e["eventTime"].replace("0Z", "Z")) for e in EXPECTED]
    result = compare(EXPECTED, stored, {"a": "COMPLETED", "b": "FAILED"})
    assert (result.runs_expected, result.runs_in_marquez) == (2, 2)
    assert (result.events_expected, result.events_stored) == (4, 4)
    assert not (result.missing or result.duplicated or result.unexpected or result.wrong_state)


def test_missing_duplicated_and_other_runs() -> None:
    """A lost event is missing, a repeat is counted, and events of other runs are ignored."""
    other = event("z", "START", "2026-11-24T04:44:06.000Z")
    stored = [A_START, A_START, B_START, B_END, other]
    result = compare(EXPECTED, stored, {"a": "RUNNING", "b": "FAILED", "z": "RUNNING"})
    assert [key[:2] for key in result.missing] == [("a", "COMPLETE")]
    assert {key[:2]: n for key, n in result.duplicated.items()} == {("a", "START"): 2}
    assert result.unexpected == []
    assert result.events_stored == 4
    [wrong] = result.wrong_state
    assert (wrong.run_id, wrong.found, wrong.expected, wrong.why) == (
        "a",
        "RUNNING",
        "COMPLETED",
        "terminal missing",
    )


def test_terminal_stored_but_run_running_is_not_ended() -> None:
    """COMPLETE processed before START leaves the run RUNNING although both are stored."""
    result = compare(EXPECTED, EXPECTED, {"a": "RUNNING", "b": "FAILED"})
    assert [(w.run_id, w.why) for w in result.wrong_state] == [("a", "not ended")]
    assert result.missing == []


def test_absent_run_and_unexpected_event() -> None:
    """A run Marquez does not know is absent; an event of an expected run no log made is
    unexpected."""
    extra = event("a", "RUNNING", "2026-11-24T04:44:05.000Z")
    result = compare(EXPECTED, [A_START, extra, A_END], {"a": "COMPLETED", "b": None})
    assert result.runs_in_marquez == 1
    assert [(w.run_id, w.found, w.why) for w in result.wrong_state] == [("b", None, "absent")]
    assert [key[:2] for key in result.unexpected] == [("a", "RUNNING")]
    assert len(result.missing) == 2


SCRAPE = {
    "lineage_events_emitted_total{event_type=START}": 6.0,
    "lineage_events_emitted_total{event_type=COMPLETE}": 4.0,
    "lineage_events_offered_total{transport=http}": 10.0,
    "lineage_events_delivered_total{transport=http}": 5.0,
    "lineage_events_dropped_by_reason_total{reason=http_5xx,transport=http}": 3.0,
    "lineage_events_dropped_by_reason_total{reason=queue_full,transport=http}": 0.0,
    "lineage_events_unconfirmed_total{reason=timeout,transport=http}": 1.0,
    "lineage_queue_depth{transport=http}": 1.0,
    "lineage_delivery_not_sent_total{reason=connect,transport=http}": 7.0,
    "lineage_events_delivered_total{transport=file}": 99.0,
}


def test_life_from_a_scrape() -> None:
    """The http transport's numbers, non-zero reasons only, produced over every event type."""
    life = life_from_samples(SCRAPE, "sigkill")
    assert (life.produced, life.offered, life.delivered, life.queued) == (10, 10, 5, 1)
    assert life.dropped == {"http_5xx": 3}
    assert life.unconfirmed == {"timeout": 1}
    assert life.not_sent == 7
    assert life.identity_holds


def test_stopped_line_completes_the_last_scrape() -> None:
    """Drops of the drain after the last scrape are added under `at_stop`."""
    life = life_from_samples(SCRAPE, "sigterm")
    numbers = {"offered": 10, "delivered": 5, "dropped": 4, "unconfirmed": 1, "queued": 0}
    apply_stopped(life, {"http": numbers})
    assert life.dropped == {"http_5xx": 3, "at_stop": 1}
    assert life.queued == 0
    assert life.identity_holds


def test_accounting_sums_lives_and_renders() -> None:
    """Lives add up; the text names every count and a broken identity stands out."""
    first = life_from_samples(SCRAPE, "sigkill")
    second = Life("sigterm", produced=4, offered=4, delivered=3, queued=0)
    accounting = Accounting([first, second])
    total = accounting.total()
    assert (total.produced, total.delivered, total.queued) == (14, 8, 1)
    assert accounting.to_json()["total"]["identity"] is False
    comparison = compare(EXPECTED, [A_START], {"a": "RUNNING", "b": None})
    text = render("demo", comparison, accounting, ["db-stop: exit 0"])
    assert "runs: expected 2, in Marquez 1, wrong final state 2" in text
    assert "IDENTITY BROKEN" in text and "note: db-stop: exit 0" in text
    assert "demo" in summary_table([("demo", comparison, accounting)])


def test_parts_cut_at_line_ends() -> None:
    """A log is cut into whole lines, all of it kept, never more parts than lines."""
    content = b"".join(b'{"n":%d}\n' % n for n in range(10))
    pieces = parts(content, 4)
    assert len(pieces) == 4 and b"".join(pieces) == content
    assert all(piece.endswith(b"\n") for piece in pieces)
    assert len(parts(b"one\ntwo\n", 5)) == 2


def test_samples_get_new_application_ids() -> None:
    """Every occurrence of the sample's application id is replaced; ids count up."""
    apps = workload(["success", "cancelled"], 1900000000000)
    assert [app.app_id for app in apps] == ["local-1900000000000", "local-1900000000001"]
    assert b"local-1795495169157" not in apps[0].content
    assert apps[0].content.count(b"local-1900000000000") >= 3
    with pytest.raises(FileNotFoundError):
        renamed("no-such-sample", "local-1")


def test_feeder_writes_in_progress_then_renames(tmp_path: Path) -> None:
    """Each log grows as `<id>.inprogress` and ends complete under its id, byte for byte."""
    apps = workload(["success", "cancelled"], 1900000000000)
    feeder = Feeder(tmp_path, apps, seconds=0.2, steps=3)
    feeder.start()
    feeder.join(timeout=10)
    assert not feeder.is_alive() and feeder.error is None and feeder.progress == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [app.app_id for app in apps]
    for app in apps:
        assert (tmp_path / app.app_id).read_bytes() == app.content


def test_feeder_stops_early(tmp_path: Path) -> None:
    """A stopped feed ends at once and leaves its logs in progress."""
    feeder = Feeder(tmp_path, workload(["success"], 1900000000000), seconds=60, steps=10)
    feeder.start()
    feeder.wait_progress(0.1, timeout=10)
    feeder.stop.set()
    feeder.join(timeout=30)  # half the minute the feed would run for if the stop went unseen
    assert not feeder.is_alive()
    assert [p.name for p in tmp_path.iterdir()] == ["local-1900000000000.inprogress"]


def test_arguments_defaults_and_commands(tmp_path: Path) -> None:
    """Every scenario by default; commands by option name; the work directory is stamped."""
    args = parse_args(
        ["--db-pause", "docker compose pause db", "--work", str(tmp_path), "--http-timeout", "3s"]
    )
    assert args.scenarios[0] == "db-restart" and "agent-kill-down" in args.scenarios
    options = options_of(args)
    assert options.commands == {"db-pause": "docker compose pause db"}
    assert options.http == {"timeout": "3s"}
    assert options.work.parent == tmp_path and options.work.name == options.stamp
    assert options.url == "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "http://marquez.example.com:5000"],
        ["--scenarios", "no-such"],
        ["--fault-at", "1.5"],
        ["--logs", "no_such_log"],
        ["--steps", "0"],
    ],
)
def test_arguments_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """A non-loopback Marquez, an unknown scenario or sample, or a bad number is a usage error."""
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_loopback_only() -> None:
    """Loopback addresses and localhost pass; other hosts and schemes do not."""
    assert is_loopback("http://127.0.0.1:5000")
    assert is_loopback("http://localhost:5000/")
    assert is_loopback("http://[::1]:5000")
    assert not is_loopback("http://10.0.0.5:5000")
    assert not is_loopback("ftp://127.0.0.1")
