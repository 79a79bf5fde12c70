"""The throwaway KRaft broker of tests/kafka.py starts, carries records and stops cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kafka import Kafka, accepts, running_kafka


def _processes_naming(path: Path) -> list[int]:
    """Ids of live processes whose command line mentions `path`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(path).encode() in cmdline:
            found.append(int(entry.name))
    return found


def test_broker_round_trip(kafka_broker: Kafka) -> None:
    """Records produced to a new topic come back, in order, from the beginning."""
    kafka_broker.create_topic("round-trip", partitions=1)
    kafka_broker.produce("round-trip", ["one", "two", '{"k": 3}'])
    assert kafka_broker.consume("round-trip", 3) == ["one", "two", '{"k": 3}']


def test_broker_listens_on_loopback_only(kafka_broker: Kafka) -> None:
    """Both listeners are bound to 127.0.0.1 on the ports the fixture chose."""
    props = (kafka_broker.root / "server.properties").read_text()
    assert f"PLAINTEXT://127.0.0.1:{kafka_broker.port}" in props
    assert f"CONTROLLER://127.0.0.1:{kafka_broker.controller_port}" in props
    assert accepts(kafka_broker.port)


def test_stop_leaves_nothing(tmp_path: Path) -> None:
    """After the block (even one that raises) no broker process, port or directory remains."""
    seen: list[Kafka] = []
    with pytest.raises(RuntimeError, match="boom"), running_kafka(tmp_path) as kafka:
        seen.append(kafka)
        assert kafka.process.poll() is None
        raise RuntimeError("boom")
    (kafka,) = seen
    assert kafka.process.poll() is not None
    assert not kafka.root.exists()
    assert not accepts(kafka.port)
    assert _processes_naming(kafka.root) == []
