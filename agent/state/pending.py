"""The delivery ledger's rows on their way to the state database, for both stores: recorded
in memory (recording must not wait for the disk or a server), written in batches, and kept
across a refused write, up to a bound past which the oldest are forgotten and counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

from agent.delivery.envelope import Envelope

MAX_PENDING_ROWS: Final = 100_000
WRITE_EVERY: Final = 2048  # rows gathered before `add` asks for a write


class PendingLedger:
    """Ledger rows not yet written; `lost` counts those forgotten while writes were refused.

    Rows are added on the loop; a server's store writes them from a worker thread, hence the
    lock around taking and giving back the batch."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.lost = 0
        self._lock = threading.Lock()

    def add(self, envelope: Envelope, transport: str, outcome: str, reason: str | None) -> bool:
        """Keep one row; True when enough have gathered to write them now."""
        row = (
            time.time(),
            envelope.app_id,
            envelope.run_id,
            envelope.event_type,
            envelope.digest,
            transport,
            outcome,
            reason,
        )
        with self._lock:
            self.rows.append(row)
            excess = len(self.rows) - MAX_PENDING_ROWS
            if excess > 0:  # no write for a long while: keep the newest
                del self.rows[:excess]
                self.lost += excess
        return len(self.rows) % WRITE_EVERY == 0

    def write(
        self,
        write_rows: Callable[[list[tuple[Any, ...]]], None],
        refused: tuple[type[BaseException], ...],
    ) -> None:
        """Hand every pending row to `write_rows`; on a `refused` error keep them (bounded,
        newest kept) and raise it."""
        with self._lock:
            if not self.rows:
                return
            rows, self.rows = self.rows, []
        try:
            write_rows(rows)
        except refused:
            with self._lock:
                self.rows = rows + self.rows
                excess = len(self.rows) - MAX_PENDING_ROWS
                if excess > 0:
                    del self.rows[:excess]
                    self.lost += excess
            raise
