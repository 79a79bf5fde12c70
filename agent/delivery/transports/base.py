"""The transport seam.

A transport raises one of `agent.errors.TransportFailure`'s kinds for a batch that was not
delivered, and the kind says what became of it: `DeliveryError` (dropped: refused or failed
for good), `NotStored` (the collector said it did not store it: the pipeline tries again,
then drops it), `NotSent` (provably never left: the pipeline keeps it queued and sends it
again) or `Unconfirmed` (left, no answer: not sent again, but for the pipeline's one resend
of a run's terminal event). Its `reason` becomes the `reason` label of the matching counter.
Transports never retry and never block past their timeout plus, once a request's body left,
the late-answer wait (HTTP's `late_answer_wait`); policy (retrying what never left or was not
stored, counting, health, ledger) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.delivery.envelope import Envelope


class Transport(Protocol):
    """Where signed events go."""

    name: str

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Deliver the batch in order or raise a TransportFailure. Never retries, never
        blocks past its timeout plus its late-answer wait; a batch that may have reached the
        destination is not resent."""

    async def aclose(self) -> None:
        """Release connections and files; idempotent."""
