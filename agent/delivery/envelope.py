"""The unit that flows from the signer through the queues to the transports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Fence(Protocol):
    """The lease under which an event was claimed, when several agents share one state: the
    event may leave only while this agent owns its application."""

    @property
    def lost(self) -> bool:
        """Another agent owns the application now: the event must never leave."""

    def holds(self) -> bool:
        """The lease is this agent's for a while yet (by the local clock): it may leave now."""

    def settled(self) -> None:
        """One event claimed under this lease has an outcome on every transport."""


class Ticket:
    """An event's fence, and how many of the transports it was offered to still owe it an
    outcome (the fence hears once, when the last one resolves it)."""

    __slots__ = ("fence", "remaining")

    def __init__(self, fence: Fence, transports: int) -> None:
        self.fence = fence
        self.remaining = transports
        if transports == 0:  # offered to nothing: its outcome is already known
            fence.settled()

    def resolved(self) -> None:
        self.remaining -= 1
        if self.remaining == 0:
            self.fence.settled()


@dataclass(frozen=True, slots=True)
class Envelope:
    """One signed RunEvent, serialized once; transports ship `payload` as is.

    `app_id` is the Spark application id (the in-memory source's name in tests), the key
    of the health tracker and the ledger; `digest` is the SHA-256 hex of `payload`, which the
    delivery ledger and `describe` report; `produced` is a `time.monotonic()` stamp
    taken when the event entered the pipeline, for the delivery latency histogram;
    `ticket`, with a shared state, the lease it was claimed under; `seq` its number in the
    spool (0 when it is not kept there).
    """

    payload: bytes
    run_id: str
    event_type: str
    app_id: str
    digest: str
    produced: float
    ticket: Ticket | None = None
    seq: int = 0
