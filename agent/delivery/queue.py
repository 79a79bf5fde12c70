"""Bounded, drop-newest, at-most-once queue of envelopes for one transport.

The queue is split into lanes so that several requests can be in flight while the events
of one run still leave in order: a run (or the key `lane_key` gives, for Kafka the record key
shared by an application and its steps) always hashes to the same lane, and a lane hands out
its next batch only after the previous one was resolved. Capacity counts every event the
queue has accepted and not yet resolved (waiting or in flight), so `depth <= capacity`
holds at all times and "produced = delivered + dropped + unconfirmed + depth" is exact.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from agent.delivery.envelope import Envelope


class BoundedQueue:
    """Per-transport queue; `offer` never blocks and refuses the newest event when full."""

    def __init__(
        self, capacity: int, lanes: int = 1, lane_key: Callable[[Envelope], str] | None = None
    ) -> None:
        if capacity < 0 or lanes < 1:
            raise ValueError(f"capacity must be >= 0 and lanes >= 1, got {capacity}, {lanes}")
        self.capacity = capacity
        self._lane_key = lane_key
        self._lanes: list[deque[Envelope]] = [deque() for _ in range(lanes)]
        self._ready = [asyncio.Event() for _ in range(lanes)]
        self._in_flight = [0] * lanes
        self._depth = 0
        self._closed = False

    @property
    def lanes(self) -> int:
        return len(self._lanes)

    @property
    def depth(self) -> int:
        """Events accepted and not yet resolved (waiting plus in flight)."""
        return self._depth

    def has_room(self) -> bool:
        """Whether `offer` would accept an event now."""
        return not self._closed and self._depth < self.capacity

    def offer(self, envelope: Envelope) -> bool:
        """Accept the event, or return False at once when the queue is full or closed."""
        if self._closed or self._depth >= self.capacity:
            return False
        key = envelope.run_id if self._lane_key is None else self._lane_key(envelope)
        lane = hash(key) % len(self._lanes)
        self._lanes[lane].append(envelope)
        self._depth += 1
        self._ready[lane].set()
        return True

    async def take(self, lane: int, max_items: int) -> list[Envelope]:
        """Wait for events on `lane` and hand out up to `max_items` of them, oldest first.

        Returns an empty list once the queue is closed and the lane is empty. The caller
        must call `resolved(lane, n)` with the batch size when it is delivered or dropped.
        """
        items = self._lanes[lane]
        while not items:
            if self._closed:
                return []
            self._ready[lane].clear()
            await self._ready[lane].wait()
        batch = [items.popleft() for _ in range(min(max_items, len(items)))]
        self._in_flight[lane] += len(batch)
        return batch

    def resolved(self, lane: int, count: int) -> None:
        """A batch taken from `lane` left the queue for good (delivered or dropped)."""
        self._in_flight[lane] -= count
        self._depth -= count

    def close(self) -> None:
        """Refuse new events; waiting takers return once their lane is empty."""
        self._closed = True
        for ready in self._ready:
            ready.set()

    def take_all_waiting(self) -> list[Envelope]:
        """Remove every event not yet handed out (for shutdown accounting)."""
        left: list[Envelope] = []
        for items in self._lanes:
            left.extend(items)
            items.clear()
        self._depth -= len(left)
        return left

    def resize(self, capacity: int) -> None:
        """Change the capacity; events already accepted stay (offers wait until below it)."""
        self.capacity = capacity

    def empty(self) -> bool:
        return self._depth == 0
