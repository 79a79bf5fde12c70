"""What became of one transport's events: counted, recorded, and forgotten by the spool.

Each event a transport was offered ends delivered, dropped (with a reason) or unconfirmed, or
is still queued (or kept in the spool at a stop); `Outcomes` keeps those counts (the
`accounting` identity is built from them), the metrics, the health incidents of the event's
application, the rows of the delivery ledger (`Ledger`: the state database) and the spool's
record of what is still owed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import structlog

from agent.delivery.envelope import Envelope
from agent.delivery.spool import Spool
from agent.telemetry.health import HealthTracker, Incident
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.pipeline")


class Ledger(Protocol):
    """Remembers the outcome of every event per transport (the state database)."""

    def record(
        self, envelope: Envelope, transport: str, outcome: str, reason: str | None
    ) -> None: ...


class Outcomes:
    """The counts and records of one transport's events (a `Delivery` is one)."""

    def __init__(
        self,
        name: str,
        metrics: Metrics,
        health: HealthTracker,
        ledger: Ledger | None,
        spool: Spool | None,
    ) -> None:
        self.name = name
        self._metrics = metrics
        self._health = health
        self._ledger = ledger
        self._spool = spool
        self._keeping = False  # stopping: what never left stays in the spool
        self._delivered = metrics.delivered.labels(transport=name)
        self._latency = metrics.latency.labels(transport=name)
        self.last_error: str | None = None
        self.last_error_time: float | None = None
        self.delivered = 0
        self.dropped = 0
        self.unconfirmed = 0
        self.dropped_at_shutdown = 0
        self.kept = 0  # never left, kept in the spool at the stop

    def _leave(self, batch: Sequence[Envelope], detail: str) -> None:
        """Events that never left, at the stop: kept in the spool, or dropped."""
        if self._keeping:
            self.kept += len(batch)
        else:
            self.drop(batch, "shutdown", detail)

    def _succeed(self, batch: Sequence[Envelope]) -> None:
        now = time.monotonic()
        self._delivered.inc(len(batch))
        self.delivered += len(batch)
        for envelope in batch:
            self._latency.observe(now - envelope.produced)
            if envelope.ticket is not None:
                envelope.ticket.resolved()
        if self._ledger is not None:
            for envelope in batch:
                self._ledger.record(envelope, self.name, "delivered", None)
        self._resolved(batch)
        if self.last_error is not None:
            log.info("transport_recovered", transport=self.name, after=self.last_error)
            self.last_error = None

    def _failing(self, reason: str, detail: str, events: int) -> None:
        """One log line per change of what goes wrong, not one per batch."""
        if self.last_error != reason:
            log.warning(
                "transport_failing",
                transport=self.name,
                reason=reason,
                detail=detail,
                events=events,
            )
        self.last_error = reason
        self.last_error_time = time.time()

    def unconfirm(self, batch: Sequence[Envelope], reason: str, detail: str) -> None:
        """Count and record events whose request left without an answer: never resent."""
        self._metrics.unconfirmed.labels(transport=self.name, reason=reason).inc(len(batch))
        self.unconfirmed += len(batch)
        self._record(batch, "unconfirmed", reason, detail)

    def drop(self, batch: Sequence[Envelope], reason: str, detail: str) -> None:
        """Count, record and forget events that will never reach this transport."""
        self._metrics.drop(self.name, reason, len(batch))
        self.dropped += len(batch)
        if reason == "shutdown":
            self.dropped_at_shutdown += len(batch)
        self._record(batch, "dropped", reason, detail)

    def _record(self, batch: Sequence[Envelope], outcome: str, reason: str, detail: str) -> None:
        """Health incidents and ledger rows of events that were not delivered."""
        now = time.time()
        for envelope in batch:
            if envelope.ticket is not None:
                envelope.ticket.resolved()
            self._health.record(
                envelope.app_id,
                Incident(
                    now, reason, self.name, envelope.event_type, envelope.run_id, detail, outcome
                ),
            )
            if self._ledger is not None:
                self._ledger.record(envelope, self.name, outcome, reason)
        self._resolved(batch)

    def _resolved(self, batch: Sequence[Envelope]) -> None:
        """The spool forgets events with an outcome here."""
        if self._spool is not None:
            self._spool.resolved(self.name, [e.seq for e in batch if e.seq])
