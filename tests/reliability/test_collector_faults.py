"""Collector faults under the real daemon (http transport): the collector fails for a while
and recovers, and every event ends delivered or dropped with the reason the collector's own
tally explains. The faults are driven through the in-memory source; one real PySpark pipeline
under the same faults is in test_pipeline_faults.py."""

from __future__ import annotations

import signal
import ssl
import time
from pathlib import Path

import pytest
import trustme
import yaml

from tests.agentproc import AgentProcess, assert_identity, metric
from tests.collector import Behaviour, closed_port, slow
from tests.reliability import harness

EVENTS = 450
RESENT = "lineage_events_resent_total"
RATE = 300.0


def run_phases(
    process: AgentProcess, collector: harness.TallyCollector, phases: list[Behaviour]
) -> tuple[dict[str, float], int]:
    """Switch the collector through `phases`, one per equal share of the events; return the
    settled scrape and how many events had been produced when the last phase began."""
    share = EVENTS // len(phases)
    last_began = 0
    for number, behaviour in enumerate(phases):
        collector.set_behaviour(behaviour)
        last_began = harness.wait_produced(process, number * share) if number else 0
        if number < len(phases) - 1:
            harness.wait_produced(process, (number + 1) * share)
    return harness.settle(process, "http", EVENTS), last_began


@pytest.mark.parametrize(
    ("fault", "outcome", "reason", "tallied"),
    [
        (500, "dropped", "http_500", 500),
        (503, "dropped", "http_503", 503),
        (501, "dropped", "http_5xx", 501),
        (400, "dropped", "http_4xx", 400),
        (401, "dropped", "http_4xx", 401),
        (413, "dropped", "http_4xx", 413),
        ("hang", "unconfirmed", "timeout", "hang"),
        ("reset", "unconfirmed", "network", "reset"),
        ("close_mid_response", "unconfirmed", "network", "close_mid_response"),
    ],
)
def test_fault_then_recovery_is_counted_exactly(
    workdir: Path, fault: Behaviour, outcome: str, reason: str, tallied: int | str
) -> None:
    """A fault between healthy phases, retries off: what the collector refused is dropped,
    what it took without answering is unconfirmed, one each per request (a terminal event's
    one resend included); recovery delivers all."""
    with harness.TallyCollector(validate=False) as collector:
        lineage = harness.http_lineage(collector.url, timeout="1500ms", **harness.AT_ONCE)
        config = harness.config_file(workdir, lineage)
        with harness.memory_agent(config, EVENTS, RATE) as process:
            samples, recovered_at = run_phases(process, collector, [201, fault, 201])
            harness.assert_healthy(process)
            delivered = metric(samples, "lineage_events_delivered_total", transport="http")
            resent = metric(samples, RESENT, transport="http", reason="unconfirmed_terminal")
            counted = {"dropped": harness.drops, "unconfirmed": harness.unconfirmed}
            assert collector.tally(tallied) > 0  # the fault met at least one request
            lost = collector.tally(tallied) - resent  # a resend is a request, not an event
            # None, when every request the fault met was a terminal event resent and stored.
            assert counted[outcome](samples, "http") == ({reason: lost} if lost else {})
            other = "unconfirmed" if outcome == "dropped" else "dropped"
            assert counted[other](samples, "http") == {}
            assert delivered == collector.tally(201) == collector.accepted
            assert delivered + lost == EVENTS
            assert 0 <= lost < EVENTS
            if outcome == "dropped":
                assert resent == 0
            accounting = harness.stop_and_account(process)
    assert accounting == {
        "http": {
            "offered": EVENTS,
            "delivered": delivered,
            "dropped": EVENTS - delivered if outcome == "dropped" else 0,
            "unconfirmed": EVENTS - delivered if outcome == "unconfirmed" else 0,
            "queued": 0,
        }
    }
    arrived = {harness.event_index(event) for event in collector.events}
    assert set(range(recovered_at, EVENTS)) <= arrived
    assert harness.check_events(collector.events, workdir / "ed25519.key") == delivered


def test_slow_collector_overflows_the_queue_never_the_source(workdir: Path) -> None:
    """A slow collector overflows the queue as queue_full, never blocks, then recovers."""
    capacity = 100
    with harness.TallyCollector(validate=False) as collector:
        lineage = {
            **harness.http_lineage(collector.url, timeout="3s", concurrency=2),
            "queue_size": capacity,
        }
        config = harness.config_file(workdir, lineage)
        with harness.memory_agent(config, EVENTS, RATE) as process:
            harness.wait_produced(process, EVENTS // 5)
            collector.set_behaviour(slow(0.4))
            harness.wait_produced(process, EVENTS // 2)
            collector.set_behaviour(201)
            # Requests already waiting for their slow answer hold the queue a moment longer.
            harness.wait_until(
                "the queue has room again",
                lambda: (
                    metric(process.scrape(), "lineage_queue_depth", transport="http") < capacity
                ),
            )
            samples = harness.settle(process, "http", EVENTS)
            harness.assert_healthy(process)
            delivered = metric(samples, "lineage_events_delivered_total", transport="http")
            lost = harness.drops(samples, "http")
            assert set(lost) == {"queue_full"}
            assert delivered == collector.accepted == collector.tally(201)
            assert delivered + lost["queue_full"] == EVENTS
            accounting = harness.stop_and_account(process)
    assert accounting["http"]["dropped"] == lost["queue_full"]
    assert harness.check_events(collector.events, workdir / "ed25519.key") == delivered


def test_collector_down_from_the_start_then_up(workdir: Path) -> None:
    """Nothing listening: the events wait in the queue, none dropped; once a collector is up
    it gets every one, each run's in order."""
    port = closed_port()
    url = f"http://127.0.0.1:{port}/api/v1/lineage"
    config = harness.config_file(workdir, harness.http_lineage(url, timeout="1s"))
    with harness.memory_agent(config, EVENTS, RATE) as process:
        harness.wait_produced(process, EVENTS // 3)
        assert harness.drops(process.scrape(), "http") == {}
        with harness.TallyCollector(port=port) as collector:
            samples = harness.settle(process, "http", EVENTS)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            assert (
                metric(
                    samples, "lineage_delivery_not_sent_total", transport="http", reason="connect"
                )
                > 0
            )
            assert collector.accepted == collector.tally(201) == EVENTS
            accounting = harness.stop_and_account(process)
    assert accounting["http"] == {
        "offered": EVENTS,
        "delivered": EVENTS,
        "dropped": 0,
        "unconfirmed": 0,
        "queued": 0,
    }
    assert {harness.event_index(event) for event in collector.events} == set(range(EVENTS))
    harness.assert_runs_whole(collector.events)
    assert harness.check_events(collector.events, workdir / "ed25519.key") == EVENTS


def test_collector_restarts_mid_stream_and_loses_nothing(workdir: Path) -> None:
    """A collector that restarts (answers what it read, then is down 20 s) loses nothing: the
    events made meanwhile wait and arrive, each run's START first, nothing twice."""
    first = harness.TallyCollector().start()
    second: harness.TallyCollector | None = None
    try:
        config = harness.config_file(workdir, harness.http_lineage(first.url, timeout="1s"))
        with harness.memory_agent(config, EVENTS, RATE / 15) as process:  # 30 s of events
            harness.wait_produced(process, EVENTS // 6)
            port = first.port
            first.stop(graceful=True)
            time.sleep(20)
            assert harness.drops(process.scrape(), "http") == {}
            second = harness.TallyCollector(port=port).start()
            samples = harness.settle(process, "http", EVENTS)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == harness.unconfirmed(samples, "http") == {}
            assert first.accepted + second.accepted == EVENTS
            accounting = harness.stop_and_account(process)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert accounting["http"]["delivered"] == EVENTS
    events = first.events + second.events
    assert sorted(harness.event_index(event) for event in events) == list(range(EVENTS))
    harness.assert_runs_whole(events)
    assert harness.check_events(events, workdir / "ed25519.key") == EVENTS


def test_collector_dies_mid_stream_and_comes_back(workdir: Path) -> None:
    """A collector killed mid-stream (connections cut) and back on its port: requests cut
    in flight are unconfirmed, the rest waits and arrives; nothing is dropped."""
    first = harness.TallyCollector().start()
    second: harness.TallyCollector | None = None
    try:
        config = harness.config_file(workdir, harness.http_lineage(first.url, timeout="1s"))
        with harness.memory_agent(config, EVENTS, RATE) as process:
            harness.wait_produced(process, EVENTS // 3)
            first.stop()
            harness.wait_produced(process, EVENTS // 2)
            second = harness.restart_on_same_port(first)
            samples = harness.settle(process, "http", EVENTS)
            harness.assert_healthy(process)
            delivered = metric(samples, "lineage_events_delivered_total", transport="http")
            assert harness.drops(samples, "http") == {}
            cut = harness.unconfirmed(samples, "http")
            assert set(cut) <= {"network"}
            assert delivered == first.accepted + second.accepted
            assert delivered + sum(cut.values()) == EVENTS
            accounting = harness.stop_and_account(process)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert accounting["http"]["delivered"] == delivered
    events = first.events + second.events
    assert (
        len({harness.event_index(event) for event in events}) == len(events) == delivered
    )  # once each
    assert harness.check_events(events, workdir / "ed25519.key") == delivered


def test_untrusted_certificate_until_the_ca_is_configured(workdir: Path) -> None:
    """An untrusted certificate: nothing is sent and nothing dropped, the events wait; with
    the CA added (reload), every one of them arrives."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_file = workdir / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with harness.TallyCollector(tls=context) as collector:
        config = harness.config_file(workdir, harness.http_lineage(collector.url, timeout="1s"))
        with harness.memory_agent(config, EVENTS, RATE) as process:
            harness.wait_produced(process, EVENTS // 3)
            assert collector.requests == []  # nothing was sent before the handshake failed
            attempts = process.scrape()
            assert metric(
                attempts, "lineage_delivery_not_sent_total", transport="http", reason="tls"
            )
            document = yaml.safe_load(config.read_text())
            document["lineage"]["http"]["ca_file"] = str(ca_file)
            config.write_text(yaml.safe_dump(document))
            process.signal(signal.SIGHUP)
            process.wait_log("reload_ok")
            samples = harness.settle(process, "http", EVENTS)
            harness.assert_healthy(process)
            assert harness.drops(samples, "http") == {}
            assert collector.accepted == collector.tally(201) == EVENTS
            accounting = harness.stop_and_account(process)
    assert accounting["http"]["delivered"] == EVENTS
    assert {harness.event_index(event) for event in collector.events} == set(range(EVENTS))
    assert harness.check_events(collector.events, workdir / "ed25519.key") == EVENTS


def test_every_scrape_adds_up_while_events_flow(workdir: Path) -> None:
    """Each of many scrapes taken while events are made, shipped and refused adds up:
    produced = delivered + dropped + unconfirmed + queued in every one, not only at rest."""
    with harness.TallyCollector(slow(0.002)) as collector:
        lineage = {**harness.http_lineage(collector.url, **harness.AT_ONCE), "queue_size": 20}
        config = harness.config_file(workdir, lineage)
        with harness.memory_agent(config, 3000, 1000.0) as process:
            scrapes = 0
            while scrapes < 200 and (scrapes < 20 or collector.accepted < 2500):
                assert_identity(process.scrape(), "http")
                scrapes += 1
            harness.settle(process, "http", 3000)
    assert scrapes >= 20 and collector.accepted > 0
