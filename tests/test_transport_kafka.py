"""The Kafka transport against the real single-node KRaft broker: records, keys, failures."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer

from agent.config.loader import parse_config
from agent.config.model import KafkaTransportConfig
from agent.config.redact import redacted
from agent.delivery.envelope import Envelope
from agent.delivery.queue import BoundedQueue
from agent.delivery.transports.factory import lane_key_for
from agent.delivery.transports.kafka.settings import producer_settings
from agent.delivery.transports.kafka.transport import KafkaTransport
from agent.errors import ConfigError, DeliveryError, NotSent, StartError, Unconfirmed
from tests.collector import closed_port
from tests.kafka import Kafka, running_kafka


def settings(bootstrap: str, **extra: str) -> KafkaTransportConfig:
    return KafkaTransportConfig("lineage", {"bootstrap.servers": bootstrap, **extra})


def envelope(
    run_id: str, event_type: str, size: int = 0, facets: dict[str, Any] | None = None
) -> Envelope:
    event = {
        "run": {"runId": run_id, "facets": facets or {}},
        "job": {"namespace": "spark", "name": f"job-{run_id}"},
        "eventType": event_type,
        "pad": "x" * size,
    }
    payload = orjson.dumps(event)
    return Envelope(payload, run_id, event_type, "app", hashlib.sha256(payload).hexdigest(), 0.0)


def parent(namespace: str, name: str, root: tuple[str, str] | None = None) -> dict[str, Any]:
    """A ParentRunFacet naming the parent job (and the root job, when given)."""
    facet: dict[str, Any] = {
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": name},
    }
    if root is not None:
        facet["root"] = {
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": root[0], "name": root[1]},
        }
    return {"parent": facet}


def consume(bootstrap: str, topic: str, count: int, timeout: float = 30) -> list[Any]:
    """`count` records of `topic` from the beginning (all partitions), read with the client."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    records: list[Any] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    return records


async def test_records_keyed_by_run_and_ordered_per_partition(kafka_broker: Kafka) -> None:
    """A run with no parent is keyed `run:<namespace>/<job>`, as by the client; a run's events
    share a partition, in order."""
    topic = f"keys-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=3)
    transport = KafkaTransport(
        KafkaTransportConfig(topic, {"bootstrap.servers": kafka_broker.bootstrap}), queue_size=64
    )
    runs = [str(uuid.uuid4()) for _ in range(6)]
    try:
        for kind in ("START", "RUNNING", "COMPLETE"):
            await asyncio.gather(*(transport.send([envelope(run, kind)]) for run in runs))
    finally:
        await transport.aclose()
    records = consume(kafka_broker.bootstrap, topic, 18)
    assert len(records) == 18
    by_run: dict[str, list[tuple[int, int, str]]] = {}
    for record in records:
        event = orjson.loads(record.value())
        assert record.key() == f"run:spark/job-{event['run']['runId']}".encode()
        by_run.setdefault(event["run"]["runId"], []).append(
            (record.partition(), record.offset(), event["eventType"])
        )
    assert set(by_run) == set(runs)
    for seen in by_run.values():
        assert len({partition for partition, _, _ in seen}) == 1
        assert [kind for _, _, kind in sorted(seen)] == ["START", "RUNNING", "COMPLETE"]
    assert len({seen[0][0] for seen in by_run.values()}) > 1  # the keys spread the runs


async def test_steps_are_keyed_by_their_root_else_their_parent_job(kafka_broker: Kafka) -> None:
    """The client's key: the root parent's job, else the parent's job, else the run's own; an
    application's events and its steps' so share one partition, in the order sent."""
    topic = f"parents-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=4)
    transport = KafkaTransport(
        KafkaTransportConfig(topic, {"bootstrap.servers": kafka_broker.bootstrap}), queue_size=64
    )
    app, step, nested = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    sent = [
        envelope(app, "START"),
        envelope(step, "START", facets=parent("spark", f"job-{app}")),
        envelope(nested, "START", facets=parent("spark", "x", root=("airflow", "dag.task"))),
        envelope(step, "COMPLETE", facets=parent("spark", f"job-{app}")),
        envelope(app, "COMPLETE"),
    ]
    try:
        for one in sent:
            await transport.send([one])
    finally:
        await transport.aclose()
    records = consume(kafka_broker.bootstrap, topic, len(sent))
    keys = {(orjson.loads(r.value())["run"]["runId"], r.key()) for r in records}
    assert keys == {
        (app, f"run:spark/job-{app}".encode()),
        (step, f"run:spark/job-{app}".encode()),
        (nested, b"run:airflow/dag.task"),
    }
    shared = [r for r in records if r.key() == f"run:spark/job-{app}".encode()]
    assert len({r.partition() for r in shared}) == 1
    order = [orjson.loads(r.value()) for r in sorted(shared, key=lambda r: r.offset())]
    assert [(e["run"]["runId"], e["eventType"]) for e in order] == [
        (app, "START"),
        (step, "START"),
        (step, "COMPLETE"),
        (app, "COMPLETE"),
    ]


async def test_message_key_setting_keys_every_record(kafka_broker: Kafka) -> None:
    """`message_key` is the key of every record, whatever the run."""
    topic = f"fixed-{uuid.uuid4().hex[:8]}"
    transport = KafkaTransport(
        KafkaTransportConfig(topic, {"bootstrap.servers": kafka_broker.bootstrap}, "lineage"),
        queue_size=8,
    )
    try:
        await transport.send([envelope(str(uuid.uuid4()), "START")])
    finally:
        await transport.aclose()
    (record,) = consume(kafka_broker.bootstrap, topic, 1)
    assert record.key() == b"lineage"


async def test_unreachable_broker_is_not_sent() -> None:
    """With no broker answering, the record is not produced at all: NotSent, kept queued."""
    transport = KafkaTransport(settings(f"127.0.0.1:{closed_port()}"), queue_size=8)
    try:
        with pytest.raises(NotSent) as caught:
            await transport.send([envelope(str(uuid.uuid4()), "START")])
    finally:
        await transport.aclose()
    assert caught.value.reason == "connect"
    assert caught.value.detail.startswith("no broker answered a metadata request: ")


async def test_a_batch_of_more_than_one_event_is_refused() -> None:
    """Two events in one send are refused before either is produced: a refusal of the second
    would otherwise have the pipeline resend the first."""
    transport = KafkaTransport(settings(f"127.0.0.1:{closed_port()}"), queue_size=8)
    try:
        for batch in ([], [envelope(str(uuid.uuid4()), "START")] * 2):
            with pytest.raises(ValueError, match="one event at a time"):
                await transport.send(batch)
    finally:
        await transport.aclose()


async def test_request_timed_out_in_flight_is_unconfirmed(tmp_path: Path) -> None:
    """A broker that took the request and froze: the record times out unconfirmed, is not
    produced again, and shows up in the topic once the broker thaws (it was written)."""
    with running_kafka(tmp_path) as kafka:
        kafka.create_topic("frozen")
        transport = KafkaTransport(
            KafkaTransportConfig(
                "frozen", {"bootstrap.servers": kafka.bootstrap, "message.timeout.ms": "2000"}
            ),
            queue_size=8,
        )
        first, second = envelope(str(uuid.uuid4()), "START"), envelope(str(uuid.uuid4()), "START")
        try:
            await transport.send([first])
            kafka.process.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(Unconfirmed) as caught:
                    await transport.send([second])
            finally:
                kafka.process.send_signal(signal.SIGCONT)
        finally:
            await transport.aclose()
        values = [record.value() for record in consume(kafka.bootstrap, "frozen", 2)]
    assert caught.value.reason == "timeout"
    assert caught.value.detail.startswith("_MSG_TIMED_OUT: ")
    assert values == [first.payload, second.payload]


async def test_record_over_size_limit_is_dropped(kafka_broker: Kafka) -> None:
    """A record over message.max.bytes is refused before it leaves: dropped as too_large."""
    transport = KafkaTransport(
        settings(kafka_broker.bootstrap, **{"message.max.bytes": "2000"}), queue_size=8
    )
    try:
        with pytest.raises(DeliveryError) as caught:
            await transport.send([envelope(str(uuid.uuid4()), "START", size=5000)])
        await transport.send([envelope(str(uuid.uuid4()), "START")])  # the next one goes
    finally:
        await transport.aclose()
    assert caught.value.reason == "too_large"


async def test_broker_refusal_is_dropped(kafka_broker: Kafka) -> None:
    """A record the broker refuses for good (over the topic's own size limit) is dropped."""
    topic = f"small-{uuid.uuid4().hex[:8]}"
    kafka_broker.tool(
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        kafka_broker.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        "--config",
        "max.message.bytes=1000",
    )
    transport = KafkaTransport(
        KafkaTransportConfig(topic, {"bootstrap.servers": kafka_broker.bootstrap}), queue_size=8
    )
    try:
        with pytest.raises(DeliveryError) as caught:
            await transport.send([envelope(str(uuid.uuid4()), "START", size=3000)])
    finally:
        await transport.aclose()
    assert caught.value.reason == "too_large"
    assert caught.value.detail.startswith("MSG_SIZE_TOO_LARGE")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "retries",
            "3",
            "lineage.kafka.config.retries: must be 0 (at-most-once delivery: the producer "
            "never sends a record twice)",
        ),
        (
            "enable.idempotence",
            "true",
            "lineage.kafka.config.enable.idempotence: must be false (at-most-once delivery: "
            "the producer never sends a record twice)",
        ),
        (
            "transactional.id",
            "x",
            "lineage.kafka.config.transactional.id: transactions are not supported (they "
            "retry until a record is written, which at-most-once delivery forbids)",
        ),
    ],
)
def test_settings_that_would_resend_are_refused(name: str, value: str, message: str) -> None:
    """Producer settings that could write a record twice refuse the start, naming the key."""
    with pytest.raises(StartError) as caught:
        KafkaTransport(settings("127.0.0.1:9", **{name: value}), queue_size=8)
    assert str(caught.value) == message


def test_delivery_timeout_alias_replaces_the_default() -> None:
    """`delivery.timeout.ms`, librdkafka's other name, takes the place of the agent's
    default `message.timeout.ms` instead of meeting it; one that is no number is refused."""
    config = settings("127.0.0.1:9", **{"delivery.timeout.ms": "30000"})
    built = producer_settings(config, 1024)
    assert built["delivery.timeout.ms"] == "30000"
    assert "message.timeout.ms" not in built
    with pytest.raises(StartError) as caught:
        KafkaTransport(settings("127.0.0.1:9", **{"delivery.timeout.ms": "1x"}), queue_size=8)
    assert str(caught.value).startswith("lineage.kafka.config: ")


def test_unknown_client_setting_refused_without_secret() -> None:
    """A setting librdkafka does not know refuses the start; secret values are not echoed."""
    with pytest.raises(StartError) as caught:
        KafkaTransport(
            settings("127.0.0.1:9", **{"sasl.password": "s3cret-pw", "no.such.thing": "1"}),
            queue_size=8,
        )
    assert str(caught.value).startswith("lineage.kafka.config: ")
    assert "no.such.thing" in str(caught.value)
    assert "s3cret-pw" not in str(caught.value)


def test_config_reads_client_shape_and_redacts_secrets(tmp_path: Path) -> None:
    """`lineage.kafka` takes the client's topic and librdkafka config; secrets show as ***."""
    text = (
        "lineage:\n"
        "  transport: kafka\n"
        "  kafka:\n"
        "    topic: lineage\n"
        "    message_key: spark\n"
        "    config:\n"
        "      bootstrap.servers: 127.0.0.1:9092\n"
        "      linger.ms: 5\n"
        "      enable.ssl.certificate.verification: true\n"
        "      security.protocol: SASL_SSL\n"
        "      sasl.password: s3cret-pw\n"
    )
    config = parse_config(text, str(tmp_path / "agent.yaml"))
    kafka = config.lineage.kafka
    assert kafka is not None
    assert (kafka.topic, kafka.message_key) == ("lineage", "spark")
    assert dict(kafka.config) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "linger.ms": "5",
        "enable.ssl.certificate.verification": "true",
        "security.protocol": "SASL_SSL",
        "sasl.password": "s3cret-pw",
    }
    shown = redacted(config)["lineage"]["kafka"]["config"]
    assert shown["sasl.password"] == "***"
    assert shown["bootstrap.servers"] == "127.0.0.1:9092"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "lineage:\n  transport: [file, kafka]\n",
            "2: lineage.kafka.topic: required because lineage.transport includes 'kafka'",
        ),
        (
            "lineage:\n  transport: kafka\n  kafka:\n    topic: t\n    config:\n"
            "      linger.ms: 5\n",
            "5: lineage.kafka.config.bootstrap.servers: required key is missing",
        ),
        (
            "lineage:\n  transport: kafka\n  kafka:\n    topic: t\n    config:\n"
            "      bootstrap.servers: [a, b]\n",
            "6: lineage.kafka.config.bootstrap.servers: expected a string, number or boolean, "
            "got a list",
        ),
        (
            "lineage:\n  transport: kafka\n  kafka:\n    config: {bootstrap.servers: a:1}\n",
            "3: lineage.kafka.topic: required key is missing",
        ),
        (
            "lineage:\n  transport: kafka\n  kafka:\n    topic: t\n    config:\n"
            "      bootstrap.servers: a:1\n      retries: 2\n",
            "7: lineage.kafka.config.retries: must be 0 (at-most-once delivery: the producer "
            "never sends a record twice)",
        ),
        (
            "lineage:\n  transport: kafka\n  kafka:\n    topic: t\n    config:\n"
            "      bootstrap.servers: a:1\n      enable.idempotence: true\n",
            "7: lineage.kafka.config.enable.idempotence: must be false (at-most-once delivery: "
            "the producer never sends a record twice)",
        ),
        (
            "lineage:\n  transport: kafka\n  kafka:\n    topic: t\n    config:\n"
            "      bootstrap.servers: a:1\n      transactional.id: lineage\n",
            "7: lineage.kafka.config.transactional.id: transactions are not supported (they "
            "retry until a record is written, which at-most-once delivery forbids)",
        ),
    ],
)
def test_config_errors_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    """A kafka section that cannot work is refused with file, line and key."""
    source = str(tmp_path / "agent.yaml")
    with pytest.raises(ConfigError) as caught:
        parse_config(text, source)
    assert str(caught.value) == f"{source}:{message}"


async def test_an_application_and_its_steps_share_a_queue_lane() -> None:
    """The kafka queue picks lanes by the record key, so a step's events wait behind its
    application's in one lane and leave in the order they came (an http queue: by runId)."""
    app, step = str(uuid.uuid4()), str(uuid.uuid4())
    queue = BoundedQueue(16, 64, lane_key_for("kafka"))
    sent = [
        envelope(app, "START"),
        envelope(step, "START", facets=parent("spark", f"job-{app}")),
        envelope(app, "COMPLETE"),
    ]
    for one in sent:
        assert queue.offer(one)
    lane = hash(f"run:spark/job-{app}") % 64
    assert await queue.take(lane, 10) == sent
