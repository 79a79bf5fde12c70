"""What the pipeline sends again: batches the collector did not store (retried with backoff,
dropped as `http_<status>` after the last attempt) and a run's terminal event left without an
answer (resent once, byte-identical); the accounting stays exact throughout."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from agent.delivery.pipeline import Pipeline
from agent.delivery.queue import BoundedQueue
from agent.delivery.retry import Backoff, DeliveryPolicy
from agent.delivery.shipping import Delivery
from agent.errors import NotSent, NotStored, Unconfirmed
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics
from agent.testing import RecordingTransport, sample_run_events
from tests.test_pipeline import fake_sign, identity_holds, sample

#: Short waits, no jitter: what a test can time.
QUICK = Backoff(factor=0.01, cap=1.0, jitter=0.0)
RETRIES = "lineage_delivery_retries_total"
RESENT = "lineage_events_resent_total"
# Far below the waits these tests ask for (30 s, an hour) and far above the ones they expect
# (0.3 s) on a busy machine: an upper bound that tells which wait was taken, not a speed.
SOONER = 5.0


def build(
    transport: RecordingTransport, policy: DeliveryPolicy, lanes: int = 1
) -> tuple[Pipeline, Delivery, Metrics]:
    metrics = Metrics(CollectorRegistry())
    health = HealthTracker()
    pipeline = Pipeline(fake_sign, metrics, health)
    delivery = Delivery(
        transport,
        BoundedQueue(64, lanes),
        batch_size=1,
        metrics=metrics,
        health=health,
        policy=policy,
    )
    pipeline.add(delivery)
    delivery.start()
    return pipeline, delivery, metrics


async def settled(pipeline: Pipeline) -> None:
    """Wait (at most 30 s) until nothing of transport `http` is queued any more."""
    async with asyncio.timeout(30):
        while pipeline.accounting()["http"]["queued"]:
            await asyncio.sleep(0.01)


def not_stored(status: int, retry_after: float | None = None) -> NotStored:
    return NotStored(status, f"HTTP {status}", retry_after)


async def test_a_batch_not_stored_is_retried_then_delivered_and_the_run_waits() -> None:
    """503 twice, then 201: the START is delivered on its third attempt, the run's COMPLETE
    only after it; each retry is counted by status, nothing is dropped."""
    transport = RecordingTransport(name="http", script=[not_stored(503), not_stored(500)])
    pipeline, _, metrics = build(transport, DeliveryPolicy(retries=5, backoff=QUICK))
    for event in sample_run_events(2):
        pipeline.submit("app", event)
    await settled(pipeline)
    assert [e.event_type for e in transport.tried] == ["START", "START", "START", "COMPLETE"]
    assert [e.event_type for e in transport.sent] == ["START", "COMPLETE"]
    assert sample(metrics, RETRIES, transport="http", status="503") == 1
    assert sample(metrics, RETRIES, transport="http", status="500") == 1
    assert sample(metrics, "lineage_events_dropped_total") == 0
    assert pipeline.accounting()["http"]["delivered"] == 2
    identity_holds(pipeline)


async def test_retries_spent_drop_the_batch_as_http_status() -> None:
    """A collector that answers 503 to every attempt: after `retries` retries each event is
    dropped as http_503, counted once, the health tracker told."""
    transport = RecordingTransport(name="http", fail="http_503")
    pipeline, _, metrics = build(transport, DeliveryPolicy(retries=2, backoff=QUICK))
    for event in sample_run_events(2):
        pipeline.submit("app-7", event)
    await settled(pipeline)
    assert transport.attempts == 6
    assert sample(metrics, RETRIES, transport="http", status="503") == 4
    dropped = "lineage_events_dropped_by_reason_total"
    assert sample(metrics, dropped, transport="http", reason="http_503") == 2
    assert sample(metrics, "lineage_events_dropped_total") == 2
    assert pipeline.deliveries["http"].last_error == "http_503"
    identity_holds(pipeline)


async def test_no_retries_drops_at_once() -> None:
    """With retries 0 (`retry: {total: 0}`) a 500 drops the event at once as http_500."""
    transport = RecordingTransport(name="http", fail="http_500")
    pipeline, _, metrics = build(transport, DeliveryPolicy(retries=0, backoff=QUICK))
    pipeline.submit("app", next(sample_run_events(1)))
    await settled(pipeline)
    assert transport.attempts == 1
    dropped = "lineage_events_dropped_by_reason_total"
    assert sample(metrics, dropped, transport="http", reason="http_500") == 1
    assert sample(metrics, RETRIES, transport="http", status="500") == 0
    identity_holds(pipeline)


async def test_retry_after_is_honoured_within_the_cap() -> None:
    """A 429 asking for 0.4 s is tried again no sooner; one asking for an hour waits only
    the cap (backoff_max)."""
    transport = RecordingTransport(name="http", script=[not_stored(429, 0.4), None])
    policy = DeliveryPolicy(retries=3, backoff=Backoff(factor=0.0, cap=0.3, jitter=0.0))
    pipeline, _, _ = build(transport, policy)
    began = time.monotonic()
    pipeline.submit("app", next(sample_run_events(1)))
    await settled(pipeline)
    assert 0.3 <= time.monotonic() - began < SOONER  # no sooner than asked, up to the cap
    transport.script = [not_stored(429, 3600.0), None]
    began = time.monotonic()
    pipeline.submit("app", next(sample_run_events(1)))
    await settled(pipeline)
    assert 0.3 <= time.monotonic() - began < SOONER  # not the hour asked
    assert len(transport.sent) == 2


async def test_retry_after_is_ignored_when_told_so() -> None:
    """respect_retry_after_header false: the backoff decides, not the collector."""
    transport = RecordingTransport(name="http", script=[not_stored(503, 30.0), None])
    policy = DeliveryPolicy(retries=3, backoff=QUICK, respect_retry_after=False)
    pipeline, _, _ = build(transport, policy)
    began = time.monotonic()
    pipeline.submit("app", next(sample_run_events(1)))
    await settled(pipeline)
    assert time.monotonic() - began < SOONER  # not the 30 s asked


async def test_a_retry_wait_cut_by_the_drain_deadline_drops_as_shutdown() -> None:
    """Events waiting to be tried again when the drain deadline passes are dropped as
    `shutdown`, counted."""
    transport = RecordingTransport(name="http", fail="http_503")
    policy = DeliveryPolicy(retries=5, backoff=Backoff(factor=10.0, cap=10.0, jitter=0.0))
    pipeline, delivery, metrics = build(transport, policy)
    pipeline.submit("app", next(sample_run_events(1)))
    async with asyncio.timeout(30):
        while not transport.attempts:
            await asyncio.sleep(0.01)
    assert await delivery.drain(time.monotonic() + 0.2) == 1
    dropped = "lineage_events_dropped_by_reason_total"
    assert sample(metrics, dropped, transport="http", reason="shutdown") == 1
    identity_holds(pipeline)


async def test_an_unconfirmed_terminal_event_is_resent_once_byte_identical() -> None:
    """A COMPLETE whose request broke after it left goes once more, the same bytes, at the
    head of its lane: counted as resent, then as delivered (once), never unconfirmed."""
    broken = Unconfirmed("network", "reset mid-request")
    transport = RecordingTransport(name="http", script=[None, broken, None, None])
    pipeline, _, metrics = build(transport, DeliveryPolicy(resend_terminal=True))
    for event in sample_run_events(3):  # START, COMPLETE of one run, then the next START
        pipeline.submit("app", event)
    await settled(pipeline)
    tried = [e.event_type for e in transport.tried]
    assert tried == ["START", "COMPLETE", "COMPLETE", "START"]
    assert transport.tried[1].payload == transport.tried[2].payload
    assert sample(metrics, RESENT, transport="http", reason="unconfirmed_terminal") == 1
    assert pipeline.accounting()["http"] == {
        "offered": 3,
        "delivered": 3,
        "dropped": 0,
        "unconfirmed": 0,
        "queued": 0,
    }
    identity_holds(pipeline)


async def test_a_resent_terminal_event_without_an_answer_again_is_unconfirmed_once() -> None:
    """The resend is made once: a second request without an answer leaves the event
    unconfirmed, counted one time."""
    transport = RecordingTransport(name="http", fail="timeout")
    pipeline, _, metrics = build(transport, DeliveryPolicy(resend_terminal=True))
    for event in sample_run_events(2):
        pipeline.submit("app", event)
    await settled(pipeline)
    assert [e.event_type for e in transport.tried] == ["START", "COMPLETE", "COMPLETE"]
    assert sample(metrics, RESENT, transport="http", reason="unconfirmed_terminal") == 1
    unconfirmed = "lineage_events_unconfirmed_total"
    assert sample(metrics, unconfirmed, transport="http", reason="timeout") == 2
    identity_holds(pipeline)


async def test_a_resend_waits_for_a_collector_that_is_down() -> None:
    """A collector killed mid-request: the resend finds nothing listening, waits with the
    never-sent backoff and goes once the collector is back."""
    refused = NotSent("connect", "refused")
    broken = Unconfirmed("network", "reset")
    transport = RecordingTransport(name="http", script=[None, broken, refused, refused, None])
    pipeline, _, metrics = build(transport, DeliveryPolicy(resend_terminal=True))
    for event in sample_run_events(2):
        pipeline.submit("app", event)
    await settled(pipeline)
    assert [e.event_type for e in transport.sent] == ["START", "COMPLETE"]
    assert (
        sample(metrics, "lineage_delivery_not_sent_total", transport="http", reason="connect") == 2
    )
    assert pipeline.accounting()["http"]["delivered"] == 2
    identity_holds(pipeline)


async def test_without_the_switch_nothing_is_resent() -> None:
    """resend_unconfirmed_terminal false: an unconfirmed COMPLETE stays unconfirmed."""
    transport = RecordingTransport(name="http", script=[None, Unconfirmed("timeout", "late")])
    pipeline, _, metrics = build(transport, DeliveryPolicy(resend_terminal=False))
    for event in sample_run_events(2):
        pipeline.submit("app", event)
    await settled(pipeline)
    assert transport.attempts == 2
    assert sample(metrics, RESENT, transport="http", reason="unconfirmed_terminal") == 0
    identity_holds(pipeline)


async def test_non_terminal_events_of_an_unconfirmed_batch_stay_unconfirmed() -> None:
    """In a batch that got no answer only the terminal events go again; a START does not."""
    transport = RecordingTransport(name="http", script=[Unconfirmed("network", "cut"), None])
    metrics = Metrics(CollectorRegistry())
    pipeline = Pipeline(fake_sign, metrics, HealthTracker())
    delivery = Delivery(
        transport,
        BoundedQueue(64, 1),
        batch_size=10,
        metrics=metrics,
        health=HealthTracker(),
        policy=DeliveryPolicy(resend_terminal=True),
    )
    pipeline.add(delivery)
    for event in sample_run_events(4):  # two runs, START and COMPLETE each, one batch
        pipeline.submit("app", event)
    delivery.start()
    await settled(pipeline)
    assert [e.event_type for e in transport.sent] == ["COMPLETE", "COMPLETE"]
    assert pipeline.accounting()["http"] == {
        "offered": 4,
        "delivered": 2,
        "dropped": 0,
        "unconfirmed": 2,
        "queued": 0,
    }
    identity_holds(pipeline)
