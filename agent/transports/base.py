"""The transport seam and its one error type.

Errors:
    DeliveryError: a batch did not reach its destination; `reason` is one of REASONS
    and becomes the `reason` label of the drop counters. Transports never retry and
    never block past their timeout; policy (counting, health, ledger) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from agent.envelope import Envelope

#: Every reason a transport may give. `queue_full` and `shutdown` are the pipeline's own.
REASONS: Final = (
    "http_4xx",  # the collector refused the event (400, 401, 403, 413, ...)
    "http_5xx",  # the collector failed (500, 503, ...)
    "timeout",  # no full answer within the per-request timeout
    "connect",  # refused or unreachable before anything was sent
    "network",  # reset or broken mid-request
    "tls",  # certificate did not verify
    "write_error",  # the file transport could not write (disk full, permission, size limit)
    "queue_full",  # the bounded queue was full when the event was offered
    "shutdown",  # still queued when the drain deadline passed, or its transport was removed
    "invalid",  # the event could not be serialized or signed (it is logged, never shipped)
    "internal",  # a transport raised something other than DeliveryError (a bug; logged)
)


class DeliveryError(Exception):
    """A batch was not delivered; nothing of it will be sent again."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class Transport(Protocol):
    """Where signed events go."""

    name: str

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Deliver the batch in order or raise DeliveryError. Never retries, never blocks
        past its timeout; a batch that may have reached the destination is not resent."""

    async def aclose(self) -> None:
        """Release connections and files; idempotent."""
