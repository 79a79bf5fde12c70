"""The bounded queue: drop-newest, never blocking, ordered per run."""

from __future__ import annotations

import asyncio

from agent.delivery.envelope import Envelope
from agent.delivery.queue import BoundedQueue


def env(run: str, n: int) -> Envelope:
    return Envelope(f"{run}:{n}".encode(), run, "START", "app", str(n), 0.0)


def test_offer_refuses_newest_when_full() -> None:
    """A full queue refuses the newest event and keeps the ones it had."""
    queue = BoundedQueue(3)
    results = [queue.offer(env("r", i)) for i in range(5)]
    assert results == [True, True, True, False, False]
    assert queue.depth == 3
    assert [e.payload for e in queue.take_all_waiting()] == [b"r:0", b"r:1", b"r:2"]
    assert queue.depth == 0


def test_zero_capacity_refuses_everything() -> None:
    """queue_size 0 accepts nothing."""
    queue = BoundedQueue(0)
    assert not queue.offer(env("r", 0))
    assert queue.depth == 0


async def test_in_flight_counts_toward_capacity() -> None:
    """Events handed out stay in the depth until resolved, so depth never exceeds capacity."""
    queue = BoundedQueue(2)
    queue.offer(env("r", 0))
    queue.offer(env("r", 1))
    batch = await queue.take(0, 10)
    assert len(batch) == 2
    assert not queue.offer(env("r", 2))
    queue.resolved(0, 2)
    assert queue.depth == 0
    assert queue.offer(env("r", 3))


async def test_run_stays_on_one_lane_in_order() -> None:
    """All events of a run land in the same lane, oldest first."""
    queue = BoundedQueue(100, lanes=4)
    for i in range(10):
        queue.offer(env("run-a", i))
    lane = hash("run-a") % 4
    batch = await queue.take(lane, 100)
    assert [e.payload for e in batch] == [f"run-a:{i}".encode() for i in range(10)]


async def test_take_waits_then_close_releases() -> None:
    """A waiting taker wakes on an offer, and returns empty once closed and drained."""
    queue = BoundedQueue(10)
    taker = asyncio.create_task(queue.take(0, 5))
    await asyncio.sleep(0.01)
    assert not taker.done()
    queue.offer(env("r", 0))
    assert [e.payload for e in await taker] == [b"r:0"]
    queue.resolved(0, 1)
    second = asyncio.create_task(queue.take(0, 5))
    await asyncio.sleep(0.01)
    queue.close()
    assert await second == []
    assert not queue.offer(env("r", 1))
