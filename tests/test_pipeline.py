"""The pipeline's drop policy and accounting, with in-memory transports."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from agent.delivery.envelope import Envelope
from agent.delivery.pipeline import Pipeline
from agent.delivery.queue import BoundedQueue
from agent.delivery.shipping import Delivery
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics
from agent.testing import RecordingTransport, sample_run_events
from tests.waits import until


@dataclass
class HeldTransport(RecordingTransport):
    """A RecordingTransport whose sends wait for `release`: a send under way for as long as
    the test needs, however busy the machine."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0  # sends begun

    async def send(self, batch: Sequence[Envelope]) -> None:
        self.waiting += 1
        await self.release.wait()
        await super().send(batch)


def fake_sign(event: Mapping[str, Any]) -> bytes:
    return orjson.dumps(event)


def build(
    *transports: RecordingTransport, capacity: int = 1024, lanes: int = 1, batch: int = 1
) -> tuple[Pipeline, Metrics, HealthTracker]:
    metrics = Metrics(CollectorRegistry())
    health = HealthTracker()
    pipeline = Pipeline(fake_sign, metrics, health)
    for transport in transports:
        pipeline.add(
            Delivery(
                transport,
                BoundedQueue(capacity, lanes),
                batch_size=batch,
                metrics=metrics,
                health=health,
            )
        )
    return pipeline, metrics, health


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def identity_holds(pipeline: Pipeline) -> None:
    for name, counts in pipeline.accounting().items():
        assert counts["offered"] == pipeline.produced, name
        resolved = counts["delivered"] + counts["dropped"] + counts["unconfirmed"]
        assert counts["offered"] == resolved + counts["queued"], name


async def test_overflow_drops_exact_count() -> None:
    """With the transport stalled, everything past the capacity is dropped and counted; at
    the drain deadline the waiting events are dropped, the one in flight is unconfirmed."""
    slow = RecordingTransport(name="slow", delay=10)
    pipeline, metrics, health = build(slow, capacity=10)
    for delivery in pipeline.deliveries.values():
        delivery.start()
    for event in sample_run_events(100):
        pipeline.submit("app-1", event)
    await asyncio.sleep(0)
    identity_holds(pipeline)
    assert sample(metrics, "lineage_events_dropped_total") == 90
    assert (
        sample(
            metrics, "lineage_events_dropped_by_reason_total", transport="slow", reason="queue_full"
        )
        == 90
    )
    assert health.get("app-1").dropped == {"queue_full": 90}
    left = await pipeline.deliveries["slow"].drain(time.monotonic() + 0.05)
    assert left == 9
    identity_holds(pipeline)
    assert sample(metrics, "lineage_events_dropped_total") == 99
    unconfirmed = "lineage_events_unconfirmed_total"
    assert sample(metrics, unconfirmed, transport="slow", reason="shutdown") == 1


async def test_failures_dropped_with_reason_and_health() -> None:
    """A transport error drops the batch with its reason, recorded per execution."""
    broken = RecordingTransport(name="http", fail="http_5xx")
    pipeline, metrics, health = build(broken)
    pipeline.deliveries["http"].start()
    for event in sample_run_events(4):
        pipeline.submit("app-9", event)
    await pipeline.deliveries["http"].drain(time.monotonic() + 1)
    assert (
        sample(
            metrics, "lineage_events_dropped_by_reason_total", transport="http", reason="http_5xx"
        )
        == 4
    )
    errors = list(health.get("app-9").recent)
    assert [e.event_type for e in errors] == ["START", "COMPLETE", "START", "COMPLETE"]
    assert all(e.component == "lineage" and e.transport == "http" for e in errors)
    identity_holds(pipeline)


async def test_fan_out_each_transport_accounts_alone() -> None:
    """Two transports each get every event; one failing does not affect the other."""
    good = RecordingTransport(name="file")
    bad = RecordingTransport(name="http", fail="connect")
    pipeline, metrics, _ = build(good, bad)
    for delivery in pipeline.deliveries.values():
        delivery.start()
    for event in sample_run_events(20):
        pipeline.submit("app", event)
    deadline = time.monotonic() + 2
    await asyncio.gather(*(d.drain(deadline) for d in pipeline.deliveries.values()))
    assert len(good.sent) == 20
    assert sample(metrics, "lineage_events_delivered_total", transport="file") == 20
    assert sample(metrics, "lineage_events_dropped_total") == 20
    identity_holds(pipeline)


async def test_events_of_a_run_keep_order_across_lanes() -> None:
    """With several lanes in flight, each run's START still precedes its COMPLETE."""
    transport = RecordingTransport(name="http", delay=0.001)
    pipeline, _, _ = build(transport, lanes=4)
    pipeline.deliveries["http"].start()
    for event in sample_run_events(200):
        pipeline.submit("app", event)
    await pipeline.deliveries["http"].drain(time.monotonic() + 5)
    seen: dict[str, list[str]] = {}
    for envelope in transport.sent:
        seen.setdefault(envelope.run_id, []).append(envelope.event_type)
    assert len(seen) == 100
    assert all(types == ["START", "COMPLETE"] for types in seen.values())


async def test_unsignable_event_is_dropped_as_invalid() -> None:
    """An event the signer rejects is counted as an invalid drop, never shipped."""

    def refuse(_event: Mapping[str, Any]) -> bytes:
        raise ValueError("NaN is not allowed")

    transport = RecordingTransport(name="file")
    pipeline, metrics, _ = build(transport)
    pipeline.set_signer(refuse)
    pipeline.submit("app", next(sample_run_events(1)))
    assert (
        sample(
            metrics, "lineage_events_dropped_by_reason_total", transport="file", reason="invalid"
        )
        == 1
    )
    identity_holds(pipeline)


async def test_swap_closes_old_transport_after_in_flight() -> None:
    """A reload swaps the transport; the old one closes only after its send finished."""
    old = HeldTransport(name="http")
    new = RecordingTransport(name="http")
    pipeline, _, _ = build(old)
    delivery = pipeline.deliveries["http"]
    delivery.start()
    events = list(sample_run_events(2))
    pipeline.submit("app", events[0])
    await until(lambda: old.waiting == 1)  # its send under way, until released
    swap = asyncio.create_task(delivery.swap(new))
    await asyncio.sleep(0.01)  # a swap that would not wait closes the old one now
    assert not old.closed
    pipeline.submit("app", events[1])
    old.release.set()
    await swap
    assert old.closed
    await delivery.drain(time.monotonic() + 1)
    assert [e.event_type for e in old.sent] == ["START"]
    assert [e.event_type for e in new.sent] == ["COMPLETE"]


async def test_what_never_left_stays_queued_and_leaves_in_order() -> None:
    """Attempts that provably never left (`connect`) keep the events queued, not dropped;
    once the collector answers they leave, each run's events in their order."""
    down = RecordingTransport(name="http", fail="connect")
    pipeline, metrics, health = build(down, lanes=4)
    pipeline.deliveries["http"].start()
    events = list(sample_run_events(40))
    for event in events:
        pipeline.submit("app-1", event)
    deadline = time.monotonic() + 30
    while down.attempts < 12 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert down.sent == []
    assert sample(metrics, "lineage_events_dropped_total") == 0
    assert pipeline.accounting()["http"]["queued"] == 40
    assert (
        sample(metrics, "lineage_delivery_not_sent_total", transport="http", reason="connect") >= 12
    )
    assert health.get("app-1").healthy
    identity_holds(pipeline)
    down.fail = None
    while len(down.sent) < 40 and time.monotonic() < deadline + 10:
        await asyncio.sleep(0.05)
    assert len(down.sent) == len({e.digest for e in down.sent}) == 40  # each once
    for run in {e.run_id for e in down.sent}:
        order = [e.event_type for e in down.sent if e.run_id == run]
        assert order == [str(ev["eventType"]) for ev in events if ev["run"]["runId"] == run]
    assert pipeline.accounting()["http"] == {
        "offered": 40,
        "delivered": 40,
        "dropped": 0,
        "unconfirmed": 0,
        "queued": 0,
    }


async def test_unconfirmed_is_counted_apart_and_never_resent() -> None:
    """A request that left without an answer is unconfirmed: counted apart from drops, in
    the health tracker and the accounting, and never sent again."""
    hung = RecordingTransport(name="http", fail="timeout")
    pipeline, metrics, health = build(hung)
    pipeline.deliveries["http"].start()
    for event in sample_run_events(3):
        pipeline.submit("app-2", event)
    await until(lambda: pipeline.accounting()["http"]["unconfirmed"] == 3)
    assert hung.attempts == 3
    counted = sample(
        metrics, "lineage_events_unconfirmed_total", transport="http", reason="timeout"
    )
    assert counted == 3
    assert sample(metrics, "lineage_events_dropped_total") == 0
    assert pipeline.accounting()["http"]["unconfirmed"] == 3
    assert health.get("app-2").unconfirmed == {"timeout": 3}
    assert not health.get("app-2").healthy
    identity_holds(pipeline)


async def test_a_batch_that_never_left_is_dropped_at_the_drain_deadline() -> None:
    """Events still waiting for a collector that never answered are dropped as `shutdown`
    when the drain deadline passes: counted, not lost silently."""
    down = RecordingTransport(name="http", fail="connect")
    pipeline, metrics, _health = build(down)
    pipeline.deliveries["http"].start()
    for event in sample_run_events(5):
        pipeline.submit("app-3", event)
    await until(lambda: down.attempts >= 1)
    left = await pipeline.deliveries["http"].drain(time.monotonic() + 0.3)
    assert left == 5
    assert (
        sample(
            metrics, "lineage_events_dropped_by_reason_total", transport="http", reason="shutdown"
        )
        == 5
    )
    identity_holds(pipeline)
