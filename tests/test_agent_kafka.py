"""The whole agent process shipping through the real KRaft broker, read back with the client."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent.errors import DROP_REASONS, UNCONFIRMED_REASONS
from tests.agentproc import (
    AgentProcess,
    accounting,
    assert_identity,
    keygen,
    labelled,
    metric,
    run_agent,
    write_config,
)
from tests.collector import closed_port
from tests.independent import public_key, verify
from tests.kafka import Kafka, running_kafka
from tests.olschema import validate_run_event
from tests.test_transport_kafka import consume


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    keygen(tmp_path)
    return tmp_path


def kafka_lineage(bootstrap: str, topic: str, **extra: str) -> dict[str, Any]:
    return {
        "enabled": True,
        "transport": "kafka",
        "kafka": {"topic": topic, "config": {"bootstrap.servers": bootstrap, **extra}},
    }


def wait_settled(agent: AgentProcess, produced: int, timeout: float = 60) -> dict[str, float]:
    """A scrape once every one of `produced` events is resolved (nothing queued)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = agent.scrape()
        total, _, _, _, queued = accounting(samples, "kafka")
        if total == produced and queued == 0:
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled after {timeout}s: {accounting(samples, 'kafka')}")
        time.sleep(0.2)


def test_events_consumed_valid_verified_and_ordered(workdir: Path, kafka_broker: Kafka) -> None:
    """Every event comes back from the topic schema-valid, verified, in order per run."""
    topic = f"agent-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=3)
    config = write_config(workdir, kafka_lineage(kafka_broker.bootstrap, topic))
    with run_agent(config, events=40) as agent:
        samples = wait_settled(agent, 40)
        assert metric(samples, "lineage_events_delivered_total", transport="kafka") == 40
        assert_identity(samples, "kafka")
        assert agent.stop() == 0
    records = consume(kafka_broker.bootstrap, topic, 40)
    assert len(records) == 40
    key = public_key(workdir / "ed25519.key")
    runs: dict[str, list[tuple[int, int, str]]] = {}
    for record in records:
        event = orjson.loads(record.value())
        validate_run_event(event)
        verify(event, key)
        run_id = event["run"]["runId"]
        key_of = (
            event["run"]["facets"].get("parent", {}).get("root")
            or event["run"]["facets"].get("parent")
            or {"job": event["job"]}
        )
        job = key_of["job"]
        assert record.key() == f"run:{job['namespace']}/{job['name']}".encode()
        runs.setdefault(run_id, []).append(
            (record.partition(), record.offset(), event["eventType"])
        )
    assert len(runs) == 20
    for seen in runs.values():
        assert len({partition for partition, _, _ in seen}) == 1
        assert [kind for _, _, kind in sorted(seen)] == ["START", "COMPLETE"]


def test_broker_restart_costs_only_counted_events(workdir: Path) -> None:
    """A broker stopped and started again mid-stream costs at most the events in flight when
    it stopped (counted unconfirmed); none is written twice, none dropped."""
    produced = 600
    with running_kafka(workdir) as kafka:
        topic = "restart"
        kafka.create_topic(topic, partitions=2)
        lineage = kafka_lineage(kafka.bootstrap, topic, **{"message.timeout.ms": "2000"})
        # The queue holds the whole outage: what never left waits and goes after the restart.
        config = write_config(workdir, {**lineage, "queue_size": produced})
        with run_agent(config, events=produced, rate=60) as agent:
            time.sleep(2.0)
            kafka.halt()
            time.sleep(3.0)
            during = agent.scrape()
            assert_identity(during, "kafka")
            kafka.resume()
            samples = wait_settled(agent, produced, timeout=90)
            assert agent.stop() == 0
        records = consume(kafka.bootstrap, topic, produced, timeout=30)
    _, delivered, dropped, unconfirmed, queued = accounting(samples, "kafka")
    not_sent = labelled(samples, "lineage_delivery_not_sent_total", "kafka")
    print(f"restart: {delivered:.0f} delivered, {dropped:.0f} dropped, {unconfirmed:.0f}")
    print(f"unconfirmed, {len(records)} records read back, {not_sent:.0f} sends not sent")
    assert produced == delivered + dropped + unconfirmed + queued
    assert dropped == 0
    assert delivered > 0
    payloads = [record.value() for record in records]
    assert len(set(payloads)) == len(payloads)  # no event written twice
    assert delivered <= len(payloads) <= delivered + unconfirmed
    reasons = {
        key.split("reason=")[1].split(",")[0]
        for key, value in samples.items()
        if value and key.startswith(("lineage_events_dropped_by_reason", "lineage_events_unc"))
    }
    assert reasons <= set(DROP_REASONS) | set(UNCONFIRMED_REASONS)
    by_run: dict[str, list[str]] = {}
    for payload in payloads:
        event = orjson.loads(payload)
        by_run.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert all(
        kinds in (["START"], ["COMPLETE"], ["START", "COMPLETE"]) for kinds in by_run.values()
    )


def test_sasl_password_passed_through_and_never_logged(workdir: Path, kafka_broker: Kafka) -> None:
    """SASL settings reach the client (the plaintext broker fails the handshake, so nothing
    is delivered and all is counted); the password appears in no log line."""
    password = f"pw-{uuid.uuid4().hex}"
    lineage = kafka_lineage(
        kafka_broker.bootstrap,
        "sasl",
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "agent",
            "sasl.password": password,
            "message.timeout.ms": "1000",
        },
    )
    config = write_config(workdir, {**lineage, "drain_timeout": "1s"})
    with run_agent(config, events=6) as agent:
        deadline = time.monotonic() + 30
        while not metric(
            agent.scrape(), "lineage_delivery_not_sent_total", transport="kafka", reason="connect"
        ):
            assert time.monotonic() < deadline, agent.raw_output()
            time.sleep(0.2)
        samples = agent.scrape()
        assert metric(samples, "lineage_events_delivered_total", transport="kafka") == 0
        assert_identity(samples, "kafka")
        assert agent.stop() == 0
        assert password not in agent.raw_output()
        client_lines = [line for line in agent.logs() if line.get("event") == "kafka_client_log"]
        assert client_lines  # librdkafka said why, once: not at every reconnection
        assert len(client_lines) == len({line["detail"].split(" ")[0] for line in client_lines})
        assert any(line.get("event") == "agent_stopped" for line in agent.logs())


def test_stop_with_broker_down_is_bounded_and_counted(workdir: Path) -> None:
    """With no broker, a stop takes the drain timeout plus the producer's bounded flush; the
    records awaited are unconfirmed, the events still queued kept in the spool, all counted."""
    lineage = kafka_lineage(f"127.0.0.1:{closed_port()}", "down", **{"message.timeout.ms": "60000"})
    config = write_config(workdir, {**lineage, "drain_timeout": "1s"})
    with run_agent(config, events=100) as agent:
        deadline = time.monotonic() + 20
        while accounting(agent.scrape(), "kafka")[0] < 100:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        samples = agent.scrape()
        assert metric(samples, "lineage_queue_depth", transport="kafka") == 100
        assert_identity(samples, "kafka")
        began = time.monotonic()
        assert agent.stop() == 0
        took = time.monotonic() - began
        stopped = agent.wait_log("agent_stopped")
    # drain_timeout (1 s), the closing flush (1 s) and the exit ended it: well before stop()'s
    # kill at 30 s, with the margin a busy machine needs.
    assert took < 15.0
    counts = stopped["accounting"]["kafka"]
    assert counts["offered"] == 100
    assert counts["delivered"] == 0
    assert counts["dropped"] == 0 == stopped["undelivered"]["kafka"]
    assert counts["unconfirmed"] > 0  # one awaited record per lane in use
    assert counts["queued"] == 100 - counts["unconfirmed"] == stopped["kept"]["kafka"]


def test_reload_mid_stream_swaps_the_producer_without_loss(
    workdir: Path, kafka_broker: Kafka
) -> None:
    """SIGHUP while events flow builds a new producer; the old one finishes what it holds:
    every event arrives once, each run in order."""
    topic = f"reload-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=3)
    produced = 300
    config = write_config(workdir, kafka_lineage(kafka_broker.bootstrap, topic))
    with run_agent(config, events=produced, rate=100) as agent:
        time.sleep(1.0)
        agent.signal(signal.SIGHUP)
        agent.wait_log("reload_ok")
        samples = wait_settled(agent, produced)
        assert metric(samples, "lineage_events_delivered_total", transport="kafka") == produced
        assert agent.stop() == 0
    records = consume(kafka_broker.bootstrap, topic, produced)
    payloads = [record.value() for record in records]
    assert len(payloads) == len(set(payloads)) == produced
    by_run: dict[str, list[tuple[int, int, str]]] = {}
    for record in records:
        event = orjson.loads(record.value())
        by_run.setdefault(event["run"]["runId"], []).append(
            (record.partition(), record.offset(), event["eventType"])
        )
    assert all(
        [kind for _, _, kind in sorted(seen)] == ["START", "COMPLETE"] for seen in by_run.values()
    )
