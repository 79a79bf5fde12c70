"""What a collector that did not store a request, answered late or died mid-request gets
from the real daemon (defaults, in-memory source, loopback collector): every event stored
once, each run's START first and its terminal event last, exact accounting. The collector
stores a request when its answer is due, whether or not the agent still waits, as Marquez
does."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from tests.agentproc import metric
from tests.collector import Behaviour, Request, per_request, reply, slow, timeline
from tests.reliability import harness

TERMINAL = ("COMPLETE", "FAIL", "ABORT")


def event_type(request: Request) -> str:
    return str(json.loads(request.content)["eventType"])


def stored_once_in_order(events: list[dict[str, Any]], count: int) -> dict[str, list[str]]:
    """Every one of `count` events stored exactly once; each run START first, terminal last."""
    assert sorted(harness.event_index(event) for event in events) == list(range(count))
    return harness.assert_runs_whole(events)


def test_a_collector_not_storing_for_20s_loses_nothing(workdir: Path) -> None:
    """503, then 500, then 429 with Retry-After for the collector's first 20 s: with the
    defaults every event is retried until stored, once, each run in order; each refusal is
    counted as a retry of its status and nothing is dropped."""
    events = 300
    failing = timeline((7.0, 503), (7.0, 500), (6.0, reply(429, "2")))
    with harness.TallyCollector(failing) as collector:
        config = harness.config_file(workdir, harness.http_lineage(collector.url, timeout="2s"))
        with harness.memory_agent(config, events, 15.0) as process:  # 20 s of events
            samples = harness.settle(process, "http", events)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            retried = {
                status: metric(
                    samples, "lineage_delivery_retries_total", transport="http", status=status
                )
                for status in ("429", "500", "502", "503", "504")
            }
            accounting = harness.stop_and_account(process)
    # Every refusal the collector answered is one retry of its status. Which phases the
    # retries fall in is the backoff's (0.5 s doubling to 30 s: it may wait out a phase).
    assert retried == {
        "503": collector.answers[503],
        "500": collector.answers[500],
        "429": collector.answers[429],
        "502": 0,
        "504": 0,
    }
    assert retried["503"] > 0
    assert accounting["http"] == {
        "offered": events,
        "delivered": events,
        "dropped": 0,
        "unconfirmed": 0,
        "queued": 0,
    }
    stored_once_in_order(collector.events, events)
    assert harness.check_events(collector.events, workdir / "ed25519.key") == events


def test_starts_answered_15s_late_are_stored_before_their_runs_end(workdir: Path) -> None:
    """STARTs answered 15 s late (timeout 2 s) and stored when the answer is due: the
    agent waits for the late answer on the same connection, so every run's START is stored
    before its terminal event, the terminal last, no START twice; late answers counted."""
    events = 6  # three runs: a 15 s wait each, several lanes

    def late_starts(request: Request) -> Behaviour:
        return slow(15.0) if event_type(request) == "START" else 201

    with harness.TallyCollector(per_request(late_starts)) as collector:
        lineage = harness.http_lineage(collector.url, timeout="2s", concurrency=8)
        config = harness.config_file(workdir, lineage)
        with harness.memory_agent(config, events) as process:
            samples = harness.settle(process, "http", events)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            late = metric(samples, "lineage_http_late_answers_total", transport="http")
            slow_lines = [line for line in process.logs() if line["event"] == "collector_slow"]
            accounting = harness.stop_and_account(process)
    assert late == events // 2
    assert slow_lines and slow_lines[0]["late"] >= 10.0
    assert accounting["http"]["delivered"] == events
    runs = stored_once_in_order(collector.events, events)
    assert all(types == ["START", "COMPLETE"] for types in runs.values()), runs
    assert Counter(event_type(r) for r in collector.requests)["START"] == events // 2


def test_a_terminal_event_cut_mid_request_is_resent_once(workdir: Path) -> None:
    """The collector resets the connection after reading a COMPLETE (killed mid-request):
    the agent sends that COMPLETE once more, the same bytes, counted as resent; every
    event is then stored once and nothing is unconfirmed."""
    events = 40
    cut: list[bytes] = []
    lock = threading.Lock()

    def reset_first_complete(request: Request) -> Behaviour:
        with lock:
            if not cut and event_type(request) == "COMPLETE":
                cut.append(request.content)
                return "reset"
        return 201

    with harness.TallyCollector(per_request(reset_first_complete)) as collector:
        config = harness.config_file(workdir, harness.http_lineage(collector.url, timeout="2s"))
        with harness.memory_agent(config, events, 50.0) as process:
            samples = harness.settle(process, "http", events)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            resent = metric(
                samples,
                "lineage_events_resent_total",
                transport="http",
                reason="unconfirmed_terminal",
            )
            line = process.wait_log("terminal_event_resent", timeout=5)
            accounting = harness.stop_and_account(process)
    assert resent == 1
    assert (line["event_type"], line["after"]) == ("COMPLETE", "network")
    assert collector.tally("reset") == 1
    assert accounting["http"]["delivered"] == events
    stored_once_in_order(collector.events, events)
    assert [r.content for r in collector.requests].count(cut[0]) == 2  # byte-identical
    assert harness.check_events(collector.events, workdir / "ed25519.key") == events
