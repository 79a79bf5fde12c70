"""Pump RunEvents through the signer into one bounded queue per transport; the drop policy.

Flow: `submit` (the source's sink) signs and serializes an event once, then offers the same
Envelope to every transport's queue. A `Delivery` per transport takes batches from its queue
and hands them to the transport. Every event ends in exactly one of: delivered, dropped (with
a reason, counted in `lineage_events_dropped_total`, recorded in the health tracker),
unconfirmed (the request left and no answer came: the collector may have it), or still
queued, per transport; nothing that may have reached a collector is sent twice, but for one
switchable, counted, byte-identical resend of a run's terminal event left without an answer.

Each transport's `Delivery` (`agent.delivery.shipping`) resolves its events: what never left
is sent again, what the collector did not store is retried (`agent.delivery.retry`), what may
have arrived is not; events claimed under a lease leave only while it is this agent's.

With a spool (`agent.delivery.spool`), an event is kept on disk for the transports whose
queues take it before it is queued, and `restore` hands what an earlier run left unsent back
to each transport ahead of anything new: per transport, offered = produced + restored.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import structlog

from agent.delivery.envelope import Envelope, Fence, Ticket
from agent.delivery.shaping import Shape
from agent.delivery.shipping import Delivery
from agent.delivery.spool import Recovered, Spool
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.pipeline")


class Pipeline:
    """The sink sources feed: sign once, fan out to every transport's queue, never block."""

    def __init__(
        self,
        sign: Callable[[Mapping[str, Any]], bytes],
        metrics: Metrics,
        health: HealthTracker,
        spool: Spool | None = None,
    ) -> None:
        self._sign = sign
        self._shape: Shape | None = None
        self.spool = spool
        self._metrics = metrics
        self._health = health
        # Replaced, never changed in place: the metrics thread (gauges, /healthz) iterates
        # whatever mapping or tuple it was handed while a reload swaps in new ones.
        self._deliveries: Mapping[str, Delivery] = MappingProxyType({})
        # Removed by a reload: still draining, then folded into `_retired` by name, so that
        # `accounting` covers every event any incarnation of a transport was offered.
        self._retiring: tuple[Delivery, ...] = ()
        self._retired: dict[str, dict[str, int]] = {}
        self._emitted: dict[str, Any] = {}
        self.accepting = True
        self.produced = 0
        if spool is not None:
            metrics.spool_capacity.set(spool.max_bytes)
            metrics.spool_bytes.set_function(lambda: spool.size)

    @property
    def deliveries(self) -> Mapping[str, Delivery]:
        """The transports events fan out to, by name (a read-only snapshot)."""
        return self._deliveries

    @property
    def retiring(self) -> tuple[Delivery, ...]:
        """Transports a reload removed that are still draining."""
        return self._retiring

    def snapshot(self) -> tuple[tuple[str, Delivery], ...]:
        """(name, delivery) pairs; safe to iterate from any thread."""
        return tuple(self._deliveries.items())

    def set_signer(self, sign: Callable[[Mapping[str, Any]], bytes]) -> None:
        self._sign = sign

    def set_shape(self, shape: Shape | None) -> None:
        """The client's filters and tags (`shaping`), applied before signing."""
        self._shape = shape

    def submit(self, app_id: str, event: Mapping[str, Any], fence: Fence | None = None) -> None:
        """Sign and queue one RunEvent for every transport (claimed under `fence`'s lease,
        with a shared state). Never blocks, never raises."""
        if self._shape is not None:
            shaped = self._shape(event)
            if shaped is None:  # filtered out, as the client's emit() drops it: never sent
                return
            event = shaped
        event_type = str(event.get("eventType", "OTHER"))
        counter = self._emitted.get(event_type)
        if counter is None:
            counter = self._emitted[event_type] = self._metrics.emitted.labels(event_type)
        counter.inc()
        self.produced += 1
        produced = time.monotonic()
        try:
            run_id = str(event["run"]["runId"])
        except (KeyError, TypeError):
            run_id = ""
        deliveries = tuple(self.deliveries.values())
        ticket = None if fence is None else Ticket(fence, len(deliveries))
        try:
            payload = self._sign(event)
        except Exception as error:
            log.error("event_unsignable", app_id=app_id, error=str(error))
            envelope = Envelope(b"", run_id, event_type, app_id, "", produced, ticket)
            for delivery in deliveries:
                delivery.offer(envelope, ("invalid", str(error)))
            return
        refusal = None if self.accepting else ("shutdown", "submitted after intake stopped")
        seq = 0
        spool = self.spool
        if spool is not None and refusal is None:
            taking = [d.name for d in deliveries if d.has_room()]
            if taking and not spool.room(len(payload)):
                refusal = (
                    "spool_full",
                    f"the spool holds {spool.size} bytes of its {spool.max_bytes}",
                )
            elif taking:
                seq = spool.append(run_id, event_type, app_id, payload, taking)
        envelope = Envelope(
            payload,
            run_id,
            event_type,
            app_id,
            hashlib.sha256(payload).hexdigest(),
            produced,
            ticket,
            seq,
        )
        for delivery in deliveries:
            delivery.offer(envelope, refusal)

    def restore(self, recovered: Recovered) -> dict[str, int]:
        """Hand what an earlier run left in the spool to each transport, ahead of anything
        new: unsent events are queued again, in-flight ones counted unconfirmed; those of a
        transport no longer configured are dropped. Returns the unsent events per transport."""
        assert self.spool is not None
        now = time.monotonic()
        restored: dict[str, int] = {}
        for in_flight, found in ((True, recovered.in_flight), (False, recovered.waiting)):
            for name, events in found.items():
                delivery = self._deliveries.get(name)
                for event in events:
                    envelope = Envelope(
                        event.payload,
                        event.run_id,
                        event.event_type,
                        event.app_id,
                        hashlib.sha256(event.payload).hexdigest(),
                        now,
                        None,
                        event.seq,
                    )
                    if delivery is not None:
                        delivery.restore(envelope, in_flight=in_flight)
                    else:
                        self._metrics.drop(name, "transport_removed", 1)
                        self.spool.resolved(name, [event.seq])
                if not in_flight:
                    restored[name] = len(events)
        return restored

    def add(self, delivery: Delivery) -> None:
        self._deliveries = MappingProxyType({**self._deliveries, delivery.name: delivery})
        # The gauge covers a retiring incarnation of the same transport too.
        gauge = self._metrics.queue_depth.labels(transport=delivery.name)
        gauge.set_function(lambda: self.depth(delivery.name))

    def depth(self, name: str) -> int:
        """Events of transport `name` accepted and not yet resolved, all incarnations."""
        return sum(
            d.queue.depth for d in (*self._retiring, *self._deliveries.values()) if d.name == name
        )

    def retire(self, name: str) -> Delivery:
        """Take a transport out of the fan-out; it stays in the accounting while it drains."""
        remaining = dict(self._deliveries)
        delivery = remaining.pop(name)
        self._deliveries = MappingProxyType(remaining)
        self._retiring = (*self._retiring, delivery)
        return delivery

    def retired(self, delivery: Delivery) -> None:
        """A retiring delivery drained and closed: keep only its totals."""
        self._retiring = tuple(d for d in self._retiring if d is not delivery)
        totals = self._retired.setdefault(
            delivery.name, {"offered": 0, "delivered": 0, "dropped": 0, "unconfirmed": 0}
        )
        totals["offered"] += delivery.offered
        totals["delivered"] += delivery.delivered
        totals["dropped"] += delivery.dropped
        totals["unconfirmed"] += delivery.unconfirmed

    def accounting(self) -> dict[str, dict[str, int]]:
        """Per transport name, over all its incarnations (reloads may remove and add it):
        offered = delivered + dropped + unconfirmed + queued, at every instant.

        `offered` equals `produced` (plus what `restore` handed back) for every transport
        configured since the start; `queued` includes what a stop kept in the spool.
        """
        result: dict[str, dict[str, int]] = {}
        for name, totals in self._retired.items():
            result[name] = {**totals, "queued": 0}
        for delivery in (*self._retiring, *self._deliveries.values()):
            numbers = result.setdefault(
                delivery.name,
                {"offered": 0, "delivered": 0, "dropped": 0, "unconfirmed": 0, "queued": 0},
            )
            numbers["offered"] += delivery.offered
            numbers["delivered"] += delivery.delivered
            numbers["dropped"] += delivery.dropped
            numbers["unconfirmed"] += delivery.unconfirmed
            numbers["queued"] += delivery.queue.depth + delivery.kept
        return result
