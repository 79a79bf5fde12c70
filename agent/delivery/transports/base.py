"""The transport seam.

A transport raises `agent.errors.DeliveryError` for a batch that did not reach its
destination; its `reason` (a `DropReason`) becomes the `reason` label of the drop counters.
Transports never retry and never block past their timeout; policy (counting, health,
ledger) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.delivery.envelope import Envelope


class Transport(Protocol):
    """Where signed events go."""

    name: str

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Deliver the batch in order or raise DeliveryError. Never retries, never blocks
        past its timeout; a batch that may have reached the destination is not resent."""

    async def aclose(self) -> None:
        """Release connections and files; idempotent."""
