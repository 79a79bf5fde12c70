"""The delivery ledger's rows on their way to the state database, for both stores: recorded
in memory (recording must not wait for the disk or a server), written in batches, and kept
across a refused write, up to a bound past which the oldest are forgotten and counted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from agent.delivery.envelope import Envelope

MAX_PENDING_ROWS: Final = 100_000
WRITE_EVERY: Final = 2048  # rows gathered before `add` asks for a write


class PendingLedger:
    """Ledger rows not yet written; `lost` counts those forgotten while writes were refused."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.lost = 0

    def add(self, envelope: Envelope, transport: str, outcome: str, reason: str | None) -> bool:
        """Keep one row; True when enough have gathered to write them now."""
        self.rows.append(
            (
                time.time(),
                envelope.app_id,
                envelope.run_id,
                envelope.event_type,
                envelope.digest,
                transport,
                outcome,
                reason,
            )
        )
        return len(self.rows) % WRITE_EVERY == 0

    def write(
        self,
        write_rows: Callable[[list[tuple[Any, ...]]], None],
        refused: tuple[type[BaseException], ...],
    ) -> None:
        """Hand every pending row to `write_rows`; on a `refused` error keep them (bounded,
        newest kept) and raise it."""
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        try:
            write_rows(rows)
        except refused:
            self.rows = rows + self.rows
            excess = len(self.rows) - MAX_PENDING_ROWS
            if excess > 0:
                del self.rows[:excess]
                self.lost += excess
            raise
