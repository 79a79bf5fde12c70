"""`lineage-agent replay --send`: a replay's events through the configured transports.

Sending goes through the daemon's `Pipeline` and one `Delivery` per configured transport, so
drops are decided and counted the same way. One difference: replay waits for room in a queue
instead of dropping what it produces faster than a transport takes it; the daemon must never
hold a Spark application back, a replay has none to hold back. No spool: what is not sent when
the replay ends is reported, and the replay can be run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from agent.commands.replay import Progress, Replayer, StrPath, resolve
from agent.commands.replay_report import AppResult, DeliveryResult, ReplayReport
from agent.delivery.queue import BoundedQueue

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from agent.config.model import AgentConfig
    from agent.delivery.signing import Signer


async def replay_send(
    paths: Iterable[StrPath],
    *,
    config: AgentConfig,
    namespace: str,
    signer: Signer,
    output_dir: StrPath | None = None,
    progress: Progress | None = None,
) -> ReplayReport:
    """`replay`, then every event through `config`'s transports, as the daemon sends them.

    Waits until every queue is empty (each request is bounded by its transport's timeout),
    then closes the transports. Raises ReplayError as `replay` does, StartError when a
    transport cannot start.
    """
    from prometheus_client import CollectorRegistry

    from agent.delivery.pipeline import Pipeline
    from agent.delivery.retry import delivery_policy
    from agent.delivery.shaping import shaping
    from agent.delivery.shipping import Delivery
    from agent.delivery.transports.factory import build_transports, lanes_for
    from agent.telemetry.health import HealthTracker
    from agent.telemetry.metrics import Metrics

    lineage = config.lineage
    replayer = Replayer(
        resolve(paths),
        namespace=namespace,
        signer=signer,
        output_dir=output_dir,
        spark=config.spark,
        progress=progress,
    )
    metrics, health = Metrics(CollectorRegistry()), HealthTracker()
    transports = await build_transports(lineage, metrics=metrics)
    # The pipeline signs each event again, as in the daemon: Ed25519 is deterministic, so it
    # ships the bytes the report's digests name (at about 0.1 ms an event).
    pipeline = Pipeline(signer.sign_event, metrics, health)
    pipeline.set_shape(shaping(lineage))
    queues: list[_PacedQueue] = []
    for name, transport in transports.items():
        lanes, batch = lanes_for(lineage, name)
        queues.append(_PacedQueue(lineage.queue_size, lanes))
        policy = delivery_policy(lineage, name)
        pipeline.add(
            Delivery(
                transport,
                queues[-1],
                batch_size=batch,
                metrics=metrics,
                health=health,
                policy=policy,
            )
        )
    for delivery in pipeline.deliveries.values():
        delivery.start()
    apps: list[AppResult] = []
    try:
        for ref in replayer.refs:
            # In a thread: a long log must not stall the loop the requests are timed on.
            app, events = await asyncio.to_thread(replayer.one, ref)
            apps.append(app)
            for event in events:
                for queue in queues:
                    await queue.wait_below(queue.capacity)
                pipeline.submit(app.app_id, event)
        for queue in queues:
            await queue.wait_below(1)
    finally:
        deadline = time.monotonic() + lineage.drain_timeout
        await asyncio.gather(*(d.drain(deadline) for d in pipeline.deliveries.values()))
        for delivery in pipeline.deliveries.values():
            with contextlib.suppress(Exception):
                await delivery.aclose()
    results = tuple(
        DeliveryResult(
            d.name,
            d.offered,
            d.delivered,
            d.dropped,
            _drops(metrics.registry, d.name),
            d.unconfirmed,
        )
        for d in pipeline.deliveries.values()
    )
    return ReplayReport(tuple(apps), results)


def _drops(registry: CollectorRegistry, transport: str) -> dict[str, int]:
    from agent.errors import DROP_REASONS

    labels = {"transport": transport}
    counts = {
        reason: registry.get_sample_value(
            "lineage_events_dropped_by_reason_total", labels | {"reason": reason}
        )
        for reason in DROP_REASONS
    }
    return {reason: int(count) for reason, count in counts.items() if count}


class _PacedQueue(BoundedQueue):
    """The daemon's queue plus a wake-up whenever events leave it."""

    def __init__(self, capacity: int, lanes: int) -> None:
        super().__init__(capacity, lanes)
        self._left = asyncio.Event()

    def resolved(self, lane: int, count: int) -> None:
        super().resolved(lane, count)
        self._left.set()

    async def wait_below(self, limit: int) -> None:
        """Return once fewer than `limit` events are queued; at once when `limit` <= 0 (a
        zero-capacity queue drops every event, as configured)."""
        while 0 < limit <= self.depth:
            self._left.clear()
            await self._left.wait()
