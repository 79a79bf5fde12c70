"""The pipeline's deliveries over the agent's life: built from the lineage config, changed by
reloads (queues resized, transports added, swapped, or retired while they drain what they
hold), and closed at stop; and the spool that keeps what they have not sent across stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import structlog

from agent.config.model import LineageConfig
from agent.delivery.outcomes import Ledger
from agent.delivery.pipeline import Pipeline
from agent.delivery.queue import BoundedQueue
from agent.delivery.retry import delivery_policy
from agent.delivery.shipping import Delivery
from agent.delivery.spool import Recovered, Spool
from agent.delivery.transports.base import Transport
from agent.delivery.transports.factory import lane_key_for, lanes_for
from agent.errors import StartError
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.pipeline")


def open_spool(lineage: LineageConfig, state_dir: str) -> tuple[Spool | None, Recovered]:
    """The spool in `state_dir`/spool and what an earlier run left in it (None when it is
    disabled). StartError when the directory cannot be used."""
    settings = lineage.spool
    if not settings.enabled:
        return None, Recovered()
    spool = Spool(
        Path(state_dir) / "spool", int(settings.max_size_mb * 1024 * 1024), fsync=settings.fsync
    )
    try:
        return spool, spool.open()
    except OSError as error:
        raise StartError(
            f"lineage.spool: cannot use {spool.directory}: {error.strerror or error}"
        ) from error


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
            BoundedQueue(lineage.queue_size, lanes, lane_key_for(name)),
            batch_size=batch,
            metrics=self._metrics,
            health=self._health,
            ledger=self._ledger,
            spool=self.pipeline.spool,
            policy=delivery_policy(lineage, name),
        )
        self.pipeline.add(delivery)
        return delivery

    def restore(self, recovered: Recovered) -> None:
        """Hand what the spool kept from an earlier run to the deliveries, before anything new."""
        if recovered.corrupt:
            self._metrics.spool_corrupt.inc(recovered.corrupt)
            log.warning(
                "spool_records_skipped",
                stretches=recovered.corrupt,
                detail="torn or damaged records in the spool were skipped",
            )
        if not recovered.events:
            return
        restored = self.pipeline.restore(recovered)
        log.info(
            "spool_restored",
            unsent=restored,
            in_flight={name: len(e) for name, e in recovered.in_flight.items()},
            detail="unsent events go first; those in flight when the agent stopped are "
            "unconfirmed, never sent again",
        )

    async def sync(self) -> None:
        """Write the spool's held-back resolutions, and make its appends durable (with
        `lineage.spool.fsync`)."""
        spool = self.pipeline.spool
        if spool is not None:
            if spool.fsync:
                await spool.sync()
            else:
                spool.flush()

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
        if self.pipeline.spool is not None:
            self.pipeline.spool.close()

    async def _retire(self, delivery: Delivery, seconds: float) -> None:
        try:
            await delivery.drain(time.monotonic() + seconds)
            await delivery.aclose()
        finally:
            self.pipeline.retired(delivery)
