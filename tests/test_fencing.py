"""Events claimed under a lease (a state several agents share) leave only while the lease
is this agent's: the delivery side's fence, with the source's real `Term`."""

from __future__ import annotations

import asyncio
import time

from agent.state.store import Term
from agent.testing import RecordingTransport, sample_run_events
from tests.test_pipeline import build, identity_holds, sample
from tests.waits import until

DROPPED = "lineage_events_dropped_by_reason_total"


def term(seconds_left: float, *, lost: bool = False) -> Term:
    """A lease with `seconds_left` before its margin of 1 s."""
    held = Term("d/app-1", 7, time.monotonic() + 1.0 + seconds_left, 1.0)
    held.lost = lost
    return held


async def test_events_of_a_lost_lease_are_dropped_and_never_sent() -> None:
    """Another agent owns the application: every transport drops its events as lease_lost,
    and the lease hears of each event once, after the last transport."""
    first, second = RecordingTransport(name="a"), RecordingTransport(name="b")
    pipeline, metrics, health = build(first, second)
    lost = term(30, lost=True)
    for delivery in pipeline.deliveries.values():
        delivery.start()
    for event in sample_run_events(3):
        pipeline.submit("app-1", event, lost)
    await until(lambda: lost.resolved == 3)
    assert first.sent == [] and second.sent == []
    assert sample(metrics, DROPPED, transport="a", reason="lease_lost") == 3
    assert sample(metrics, DROPPED, transport="b", reason="lease_lost") == 3
    assert health.get("app-1").dropped == {"lease_lost": 6}
    assert lost.resolved == 3
    identity_holds(pipeline)


async def test_a_lease_due_for_renewal_holds_its_events_until_renewed() -> None:
    """Past its margin by the local clock (a heartbeat late, or the agent was paused), a
    lease holds its events back; renewed, they leave in order, after the unfenced ones."""
    transport = RecordingTransport()
    pipeline, _, _ = build(transport)
    due = term(-0.5)
    free = list(sample_run_events(1, app="free"))
    fenced = list(sample_run_events(2))
    pipeline.deliveries["memory"].start()
    for event in fenced:
        pipeline.submit("app-1", event, due)
    for event in free:
        pipeline.submit("free", event)
    await asyncio.sleep(0.3)
    assert transport.sent == []  # one lane: what follows waits too, in order
    assert pipeline.depth("memory") == 3
    due.deadline = time.monotonic() + 30
    await until(lambda: len(transport.sent) == 3)
    assert [e.run_id for e in transport.sent] == [e["run"]["runId"] for e in fenced + free]
    assert due.resolved == 2
    identity_holds(pipeline)


async def test_a_lease_lost_while_its_events_wait_drops_them() -> None:
    """Waiting for a renewal that answers that another agent took the application: dropped."""
    transport = RecordingTransport()
    pipeline, metrics, _ = build(transport)
    due = term(-0.5)
    pipeline.deliveries["memory"].start()
    for event in sample_run_events(2):
        pipeline.submit("app-1", event, due)
    await asyncio.sleep(0.2)
    due.lost = True
    await until(lambda: sample(metrics, DROPPED, transport="memory", reason="lease_lost") == 2)
    assert transport.sent == []
    assert sample(metrics, DROPPED, transport="memory", reason="lease_lost") == 2
    identity_holds(pipeline)


async def test_events_waiting_for_a_renewal_at_the_drain_deadline_are_dropped() -> None:
    """Shutdown while a lease waits for its renewal: dropped as shutdown, counted once."""
    transport = RecordingTransport()
    pipeline, metrics, _ = build(transport)
    due = term(-0.5)
    delivery = pipeline.deliveries["memory"]
    delivery.start()
    pipeline.submit("app-1", next(iter(sample_run_events(1))), due)
    await asyncio.sleep(0.2)
    assert await delivery.drain(time.monotonic() + 0.2) == 1
    assert transport.sent == []
    assert sample(metrics, DROPPED, transport="memory", reason="shutdown") == 1
    assert due.resolved == 1
    identity_holds(pipeline)


async def test_a_lease_held_lets_events_leave_and_counts_their_outcomes() -> None:
    """A lease well within its time: no wait; each event settles once its transports are done."""
    transport = RecordingTransport()
    failing = RecordingTransport(name="failing", fail="http_4xx")
    pipeline, _, _ = build(transport, failing)
    held = term(30)
    for delivery in pipeline.deliveries.values():
        delivery.start()
    for event in sample_run_events(4):
        pipeline.submit("app-1", event, held)
    await until(lambda: held.resolved == 4)
    assert len(transport.sent) == 4
    assert held.resolved == 4
    identity_holds(pipeline)
