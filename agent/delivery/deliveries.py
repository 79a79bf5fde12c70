"""The pipeline's deliveries over the agent's life: built from the lineage config, changed by
reloads (queues resized, transports added, swapped, or retired while they drain what they
hold), and closed at stop."""

from __future__ import annotations

import asyncio
import contextlib
import time

from agent.config.model import LineageConfig
from agent.delivery.pipeline import Pipeline
from agent.delivery.queue import BoundedQueue
from agent.delivery.retry import delivery_policy
from agent.delivery.shipping import Delivery, Ledger
from agent.delivery.transports.base import Transport
from agent.delivery.transports.factory import lanes_for
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics


class Deliveries:
    """Adds, reconfigures, retires and closes the deliveries of one pipeline."""

    def __init__(
        self, pipeline: Pipeline, metrics: Metrics, health: HealthTracker, ledger: Ledger | None
    ) -> None:
        self.pipeline = pipeline
        self._metrics = metrics
        self._health = health
        self._ledger = ledger
        self._retiring: set[asyncio.Task[None]] = set()

    def add(self, name: str, transport: Transport, lineage: LineageConfig) -> Delivery:
        """A delivery for `transport` with its own bounded queue, fed by the pipeline."""
        lanes, batch = lanes_for(lineage, name)
        delivery = Delivery(
            transport,
            BoundedQueue(lineage.queue_size, lanes),
            batch_size=batch,
            metrics=self._metrics,
            health=self._health,
            ledger=self._ledger,
            policy=delivery_policy(lineage, name),
        )
        self.pipeline.add(delivery)
        return delivery

    def to_rebuild(self, old: LineageConfig, new: LineageConfig) -> tuple[str, ...]:
        """The transports a reload builds anew: all but a file transport whose settings did
        not change (it holds its path's lock, and keeps it)."""
        running = self.pipeline.deliveries
        return tuple(
            name
            for name in new.transport
            if not (name == "file" and name in running and new.file == old.file)
        )

    def file_lock_holder(self, path: str) -> Transport | None:
        """This agent's own file transport of `path` (running, or retiring after an earlier
        reload): it holds the path's lock, which a new one shares rather than refusing itself."""
        pipeline = self.pipeline
        return next(
            (
                d.transport
                for d in [*pipeline.deliveries.values(), *pipeline.retiring]
                if d.name == "file" and getattr(d.transport, "path", None) == path
            ),
            None,
        )

    def reconfigure(self, lineage: LineageConfig, transports: dict[str, Transport]) -> None:
        """Resize the queues, add the new transports, retire the removed ones (they drain what
        they hold with the transport it was queued for); replaced ones are `swap_in`'s."""
        pipeline = self.pipeline
        removed = [n for n in pipeline.deliveries if n not in lineage.transport]
        for name in lineage.transport:
            delivery = pipeline.deliveries.get(name)
            transport = transports.get(name)
            if delivery is None:
                assert transport is not None
                self.add(name, transport, lineage).start()
                continue
            delivery.queue.resize(lineage.queue_size)
            delivery.policy = delivery_policy(lineage, name)
            self._metrics.queue_capacity.labels(transport=name).set(lineage.queue_size)
        for gone in removed:
            task = asyncio.create_task(self._retire(pipeline.retire(gone), lineage.drain_timeout))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    async def swap_in(self, transports: dict[str, Transport]) -> None:
        """Replace the transports of running deliveries with the rebuilt ones."""
        for name, transport in transports.items():
            delivery = self.pipeline.deliveries[name]
            if delivery.transport is not transport:
                await delivery.swap(transport)

    async def retired(self) -> None:
        """Wait for the deliveries a reload retired to drain and close."""
        if self._retiring:
            await asyncio.wait(self._retiring)

    async def close(self) -> None:
        """Close every delivery's transport; errors are the transports' to log."""
        for delivery in self.pipeline.deliveries.values():
            with contextlib.suppress(Exception):
                await delivery.aclose()

    async def _retire(self, delivery: Delivery, seconds: float) -> None:
        try:
            await delivery.drain(time.monotonic() + seconds)
            await delivery.aclose()
        finally:
            self.pipeline.retired(delivery)
