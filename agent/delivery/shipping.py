"""One transport's delivery: its queue moved into the transport, a batch per lane at a time,
and the accounting of every event it was offered (delivered, dropped, unconfirmed, queued).

A batch that provably never left (`NotSent`: no connection, no TLS session) is no attempt:
it stays at the head of its lane and goes again after a capped, jittered backoff, so a
collector that restarts or is briefly unreachable loses nothing the queue can hold. A batch
the collector answered it did not store (`NotStored`) is tried again in place, and a run's
terminal event left unconfirmed is sent once more, as its `DeliveryPolicy` says
(`agent.delivery.retry`). A lane
sends its next batch only after the previous one is resolved, and a run always maps to the
same lane: a run's later event never leaves while an earlier one is in flight or waiting.

With a state several agents share, an event claimed under a lease (`Fence`) leaves only
while that lease is this agent's by the local clock: a batch waits while the lease is due
for renewal, and its events are dropped (`lease_lost`) once another agent owns the
application, so an agent paused past its lease never sends an old START after the new
owner's COMPLETE.

What becomes of the events is counted and recorded by `agent.delivery.outcomes`. With a
spool (`agent.delivery.spool`) every batch is marked in flight there before it may leave, and
its outcome resolves it there.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Final

import structlog

from agent.delivery.envelope import Envelope
from agent.delivery.outcomes import Ledger, Outcomes
from agent.delivery.queue import BoundedQueue
from agent.delivery.retry import DeliveryPolicy, Tries
from agent.delivery.spool import Spool
from agent.delivery.transports.base import Transport
from agent.errors import DeliveryError, NotSent, NotStored, Unconfirmed
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.pipeline")

#: Waits between attempts of a batch that never left: the first, then doubling up to the
#: cap, each drawn between half and all of it so that lanes and agents do not knock in step.
RETRY_FIRST: Final = 0.2
RETRY_CAP: Final = 5.0
#: How often a batch whose lease is due for renewal looks again whether it may leave.
FENCE_WAIT: Final = 0.1


class Delivery(Outcomes):
    """Moves one transport's queue into the transport, a batch per lane at a time."""

    def __init__(
        self,
        transport: Transport,
        queue: BoundedQueue,
        *,
        batch_size: int,
        metrics: Metrics,
        health: HealthTracker,
        ledger: Ledger | None = None,
        spool: Spool | None = None,
        policy: DeliveryPolicy | None = None,
    ) -> None:
        self.name = transport.name
        self.policy = policy or DeliveryPolicy()  # a reload may replace it
        self.transport = transport
        self.queue = queue
        self.batch_size = batch_size
        Outcomes.__init__(self, self.name, metrics, health, ledger, spool)
        self._offered = metrics.offered.labels(transport=self.name)
        metrics.register_transport(self.name, queue.capacity)
        metrics.queue_depth.labels(transport=self.name).set_function(lambda: queue.depth)
        self._in_flight: dict[int, int] = {}
        self._idle: dict[int, asyncio.Event] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._not_sent = metrics.not_sent
        for status in self.policy.statuses:
            metrics.retries.labels(transport=self.name, status=str(status))
        self.offered = 0

    def start(self) -> None:
        self._workers = [
            asyncio.create_task(self._work(lane), name=f"deliver-{self.name}-{lane}")
            for lane in range(self.queue.lanes)
        ]

    def offer(self, envelope: Envelope, refusal: tuple[str, str] | None = None) -> None:
        """Queue the event, or drop it at once: refused by the caller, or the queue is full."""
        self.offered += 1
        self._offered.inc()
        if refusal is not None:
            self.drop([envelope], *refusal)
        elif not self.queue.offer(envelope):
            self.drop([envelope], "queue_full", f"queue full ({self.queue.capacity} events)")

    def has_room(self) -> bool:
        """Whether `offer` would queue an event now (rather than drop it as queue_full)."""
        return self.queue.has_room()

    def restore(self, envelope: Envelope, *, in_flight: bool) -> None:
        """Take back an event an earlier run left in the spool: one that never left is queued
        again; one that was in flight when that run was killed is unconfirmed."""
        self.offered += 1
        self._offered.inc()
        if in_flight:
            self.unconfirm([envelope], "interrupted", "in flight when the agent was stopped")
            return
        self._metrics.restored.labels(transport=self.name).inc()
        if not self.queue.offer(envelope):
            self.drop([envelope], "queue_full", f"queue full ({self.queue.capacity} events)")

    async def swap(self, transport: Transport) -> None:
        """Use `transport` for every batch from now on; close the old one once idle."""
        old, self.transport = self.transport, transport
        if old is transport:
            return
        key = id(old)
        if self._in_flight.get(key):
            await self._idle.setdefault(key, asyncio.Event()).wait()
        await old.aclose()

    async def drain(self, deadline: float, *, keep: bool = False) -> int:
        """Stop intake, deliver what is queued until `deadline` (monotonic), then drop the
        rest, or with `keep` and a spool leave what never left there for the next start.

        Returns how many events were dropped as left over.
        """
        self._keeping = keep and self._spool is not None
        self.queue.close()
        remaining = deadline - time.monotonic()
        if self._workers:
            _, pending = await asyncio.wait(self._workers, timeout=max(remaining, 0))
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        left = self.queue.take_all_waiting()
        if left:
            self._leave(left, "still queued at the drain deadline")
        return self.dropped_at_shutdown

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def _work(self, lane: int) -> None:
        while True:
            batch = await self.queue.take(lane, self.batch_size)
            if not batch:
                return
            try:
                await self._deliver(batch)
            finally:
                self.queue.resolved(lane, len(batch))

    async def _deliver(self, batch: Sequence[Envelope]) -> None:
        """Resolve one batch: delivered, dropped or unconfirmed; tried again, in place, for
        as long as it provably never left or its retries last (until the drain deadline
        cancels the wait), a terminal event without an answer once more."""
        wait = RETRY_FIRST
        tries: Tries | None = None  # made at the first answer "not stored" or "no answer"
        while True:
            batch = await self._fenced(batch)
            if not batch:
                return
            transport = self.transport  # a reload may have swapped it since the last attempt
            key = id(transport)
            self._in_flight[key] = self._in_flight.get(key, 0) + 1
            spool = self._spool
            spooled = [e.seq for e in batch if e.seq] if spool is not None else []
            try:
                if spool is not None and spooled:
                    await spool.sending(self.name, spooled)
                await transport.send(batch)
            except NotSent as error:
                if spool is not None and spooled:
                    spool.not_sent(self.name, spooled)
                self._failing(error.reason, error.detail, len(batch))
                self._not_sent.labels(transport=self.name, reason=error.reason).inc()
                pause = wait * random.uniform(0.5, 1.0)
                wait = min(wait * 2, RETRY_CAP)
            except NotStored as error:
                self._failing(error.reason, error.detail, len(batch))
                tries = tries or Tries(self.policy)
                retry_in = self._not_stored(batch, error, tries)
                if retry_in is None:
                    return
                if spool is not None and spooled:  # the collector says it has none of it
                    spool.not_sent(self.name, spooled)
                pause = retry_in
            except Unconfirmed as error:
                self._failing(error.reason, error.detail, len(batch))
                tries = tries or Tries(self.policy)
                batch = self._unconfirmed(batch, error, tries)
                if not batch:
                    return
                pause = 0.0
            except DeliveryError as error:
                self._failing(error.reason, error.detail, len(batch))
                self.drop(batch, error.reason, error.detail)
                return
            except asyncio.CancelledError:
                self.unconfirm(batch, "shutdown", "in flight at the drain deadline")
                raise
            except Exception as error:  # a transport bug must not stop delivery
                log.exception("transport_error", transport=self.name)
                self._failing("internal", f"{type(error).__name__}: {error}", len(batch))
                self.drop(batch, "internal", f"{type(error).__name__}: {error}")
                return
            else:
                self._succeed(batch)
                return
            finally:
                self._in_flight[key] -= 1
                if not self._in_flight[key]:
                    del self._in_flight[key]
                    idle = self._idle.pop(key, None)
                    if idle is not None:
                        idle.set()
            if pause:
                await self._pause(batch, pause)

    async def _pause(self, batch: Sequence[Envelope], seconds: float) -> None:
        """Wait before a batch that was not sent or not stored goes again; at the drain
        deadline it stays in the spool (or is dropped without one)."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self._leave(batch, "not stored yet: the drain deadline came first")
            raise

    def _not_stored(
        self, batch: Sequence[Envelope], error: NotStored, tries: Tries
    ) -> float | None:
        """Seconds to wait before a batch the collector did not store goes again; None when
        it was dropped, its attempts spent."""
        pause = tries.not_stored(error)
        if pause is None:
            self.drop(batch, error.reason, f"{error.detail} (attempt {tries.retried + 1})")
        else:
            self._metrics.retries.labels(transport=self.name, status=str(error.status)).inc()
        return pause

    def _unconfirmed(
        self, batch: Sequence[Envelope], error: Unconfirmed, tries: Tries
    ) -> Sequence[Envelope]:
        """Count the events of a batch left without an answer; return those to send once
        more, in place: its terminal events, the first time, if the policy says so."""
        again = tries.resend(batch)
        kept = {id(envelope) for envelope in again}
        rest = [envelope for envelope in batch if id(envelope) not in kept]
        if rest:
            self.unconfirm(rest, error.reason, error.detail)
        if again:
            self._metrics.resent.labels(transport=self.name, reason="unconfirmed_terminal").inc(
                len(again)
            )
            for envelope in again:
                log.warning(
                    "terminal_event_resent",
                    transport=self.name,
                    app_id=envelope.app_id,
                    run_id=envelope.run_id,
                    event_type=envelope.event_type,
                    digest=envelope.digest,
                    after=error.reason,
                )
        return again

    async def _fenced(self, batch: Sequence[Envelope]) -> Sequence[Envelope]:
        """The events of `batch` that may leave now: those claimed under a lease another
        agent took are dropped; while one's lease waits for its renewal, all wait."""
        while True:
            lost = [e for e in batch if e.ticket is not None and e.ticket.fence.lost]
            if lost:
                self.drop(lost, "lease_lost", "another agent took the application before it left")
                batch = [e for e in batch if e.ticket is None or not e.ticket.fence.lost]
            if all(e.ticket is None or e.ticket.fence.holds() for e in batch):
                return batch
            try:
                await asyncio.sleep(FENCE_WAIT)
            except asyncio.CancelledError:
                self._leave(batch, "never sent: its lease awaited renewal")
                raise
