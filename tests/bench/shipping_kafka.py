"""Shipping through Kafka: the same RunEvents through lineage-agent's Kafka transport and
through openlineage-python's `KafkaTransport`, to the same real single-node KRaft broker
(tests/kafka.py), each contender to a topic of its own.

Contenders:
* the agent's real pieces in this process, wired as the daemon wires them (Signer, Pipeline,
  the delivery spool, Delivery with the Kafka transport's lanes, BoundedQueue of the default size,
  KafkaTransport): every event signed, produced keyed by its runId and counted delivered only
  on its delivery report;
* the peer's `KafkaTransport` with its defaults (`flush: true`: each `emit` waits until the
  record is acknowledged, its way of not losing events), sending the same events unsigned.
Both use librdkafka with the same settings the broker needs (`bootstrap.servers`); the agent
adds its own forced ones (no retries, no idempotence). What the broker took is read from
the topic's end offsets, not from the clients' word.

Every contender gets the same `events` events but stops after `time_cap` seconds (its rate is
then taken over what it sent).

The choice of client: confluent-kafka (librdkafka) and aiokafka, each alone in a process of
its own (tests/bench/kafka_clients.py), records awaited one by one for the latency and over
16 concurrent senders for the rate, with the CPU time and memory growth of the process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench.harness import Context, Figure, Result, Target
from tests.bench.shipping import Run, emit_capped, open_spool, submit_capped, until_settled


@dataclass(frozen=True)
class Params:
    events: int = 20_000
    time_cap: float = 30.0
    client_records: int = 20_000
    client_lanes: int = 16


FULL = Params()
SMOKE = Params(events=300, client_records=320)


def measure_client(kind: str, bootstrap: str, params: Params) -> dict[str, Any]:
    """tests/bench/kafka_clients.py for one client, in a process of its own."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.bench.kafka_clients",
            kind,
            bootstrap,
            f"client-{kind}",
            str(params.client_records),
            str(params.client_lanes),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


async def _agent(
    bootstrap: str, topic: str, events: Sequence[Mapping[str, Any]], cap: float, state_dir: Path
) -> Run:
    from nacl.signing import SigningKey
    from prometheus_client import CollectorRegistry

    from agent.config.model import KafkaTransportConfig, LineageConfig
    from agent.delivery.pipeline import Pipeline
    from agent.delivery.queue import BoundedQueue
    from agent.delivery.shipping import Delivery
    from agent.delivery.signing import Signer
    from agent.delivery.spool import Spool
    from agent.delivery.transports.factory import lanes_for
    from agent.delivery.transports.kafka.transport import KafkaTransport
    from agent.telemetry.health import HealthTracker
    from agent.telemetry.metrics import Metrics

    kafka = KafkaTransportConfig(topic, {"bootstrap.servers": bootstrap})
    lineage = LineageConfig(transport=("kafka",), kafka=kafka)
    metrics, health = Metrics(CollectorRegistry()), HealthTracker()
    spool = open_spool(Spool, state_dir, lineage)
    pipeline = Pipeline(Signer(SigningKey.generate()).sign_event, metrics, health, spool)
    lanes, batch = lanes_for(lineage, "kafka")
    queue = BoundedQueue(lineage.queue_size, lanes)
    transport = KafkaTransport(kafka, queue_size=lineage.queue_size)
    delivery = Delivery(
        transport, queue, batch_size=batch, metrics=metrics, health=health, spool=spool
    )
    pipeline.add(delivery)
    delivery.start()
    began, cpu = time.perf_counter(), time.process_time()
    deadline = began + cap
    sent, capped = await submit_capped(pipeline, queue, events, deadline)
    await until_settled(
        lambda: delivery.delivered + delivery.dropped + delivery.unconfirmed, sent, deadline
    )
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    await delivery.drain(time.monotonic() + 5)
    await delivery.aclose()
    spool.close()
    return Run(sent, seconds, cpu_seconds, capped=capped, dropped=delivery.dropped)


def run_peer(bootstrap: str, topic: str, events: Sequence[Mapping[str, Any]], cap: float) -> Run:
    from openlineage.client.transport.kafka import KafkaConfig, KafkaTransport

    transport = KafkaTransport(
        KafkaConfig.from_dict({"topic": topic, "config": {"bootstrap.servers": bootstrap}})
    )
    began, cpu = time.perf_counter(), time.process_time()
    try:
        # dicts serialize like events
        sent, capped = emit_capped(transport.emit, events, began, cap)
    finally:
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
        transport.close(5)
    return Run(sent, seconds, cpu_seconds, capped=capped)


def records_in(bootstrap: str, topic: str) -> int:
    """How many records the topic holds: the sum of its partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        consumer.close()


def run(context: Context) -> Result:
    from agent.testing import sample_run_events
    from tests.kafka import running_kafka

    params = SMOKE if context.smoke else FULL
    result = Result("shipping_kafka", "python -m tests.bench shipping_kafka")
    events = list(sample_run_events(params.events))
    result.setup = {
        "events": params.events,
        "agent": "in-process: Signer + Pipeline + spool + Delivery + BoundedQueue(1024, 64 "
        "lanes) + KafkaTransport (confluent-kafka), as the daemon wires them",
        "peer": "openlineage-python 1.54 KafkaTransport, defaults (flush after each emit)",
        "broker": "tests/kafka.py: one KRaft broker on loopback, topics of 3 partitions",
        "time_cap_seconds": params.time_cap,
    }
    with running_kafka(context.directory("shipping_kafka")) as kafka:
        for topic in ("agent", "peer"):
            kafka.create_topic(topic, partitions=3)
        with tempfile.TemporaryDirectory(prefix="bench-kafka-") as state_dir:
            agent = asyncio.run(
                _agent(kafka.bootstrap, "agent", events, params.time_cap, Path(state_dir))
            )
        agent.accepted = records_in(kafka.bootstrap, "agent")
        peer = run_peer(kafka.bootstrap, "peer", events, params.time_cap)
        peer.accepted = records_in(kafka.bootstrap, "peer")
        for kind in ("confluent", "aiokafka"):
            kafka.create_topic(f"client-{kind}", partitions=3)
        confluent = measure_client("confluent", kafka.bootstrap, params)
        aiokafka = measure_client("aiokafka", kafka.bootstrap, params)
    for name, outcome in (("agent", agent), ("peer", peer)):
        if outcome.accepted != outcome.sent - outcome.dropped:
            result.notes.append(
                f"{name}: the topic holds {outcome.accepted} of {outcome.sent} events sent "
                f"({outcome.dropped} dropped by the client)"
            )
    result.add(
        Figure(
            "kafka_one_record_per_event",
            agent.rate,
            "events/s",
            "openlineage-python KafkaTransport, defaults",
            peer.rate,
            Target(">=", 5.0),
            {
                "agent": agent.detail(),
                "peer": peer.detail() | {"rate": round(peer.rate, 1)},
            },
        )
    )
    clients = {"confluent_kafka": confluent, "aiokafka": aiokafka}
    for name, key, unit in (
        ("client_rate_confluent_vs_aiokafka", "records_per_second", "records/s"),
        ("client_p50_latency_confluent_vs_aiokafka", "p50_ms", "ms"),
        ("client_p99_latency_confluent_vs_aiokafka", "p99_ms", "ms"),
        ("client_cpu_confluent_vs_aiokafka", "cpu_us_per_record", "us/record"),
    ):
        result.add(Figure(name, confluent[key], unit, "aiokafka", aiokafka[key], None, clients))
    return result
