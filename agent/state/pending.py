"""The delivery ledger's rows on their way to the state database, for both stores: recorded
in memory (recording must not wait for the disk or a server), written in batches, and kept
across a refused write, up to a bound past which the oldest are forgotten and counted; and the
ledger's statements, the same in both stores but for the parameter marker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent.delivery.envelope import Envelope

MAX_PENDING_ROWS: Final = 100_000
WRITE_EVERY: Final = 2048  # rows gathered before `add` asks for a write
#: The columns of a ledger entry as `ledger_for` answers them.
LEDGER_COLUMNS: Final = ("time", "run_id", "event_type", "digest", "transport", "outcome", "reason")


@dataclass(frozen=True, slots=True)
class LedgerStatements:
    """The ledger's statements with a store's parameter marker (`?` or `%s`)."""

    insert: str  # one row as `PendingLedger` keeps it
    prune: str  # forget the oldest rows past a number of rows kept
    select: str  # an application's entries, oldest first

    @classmethod
    def marked(cls, mark: str) -> LedgerStatements:
        return cls(
            "INSERT INTO ledger (time, execution, run_id, event_type, digest, transport, "
            f"outcome, reason) VALUES ({', '.join([mark] * 8)})",
            f"DELETE FROM ledger WHERE id <= (SELECT MAX(id) FROM ledger) - {mark}",
            f"SELECT {', '.join(LEDGER_COLUMNS)} FROM ledger WHERE execution = {mark} ORDER BY id",
        )


def ledger_entries(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows of `LedgerStatements.select` as entries keyed by `LEDGER_COLUMNS`."""
    return [dict(zip(LEDGER_COLUMNS, row, strict=True)) for row in rows]


class LedgerKeeper:
    """What both stores answer of their pending ledger rows."""

    _pending: PendingLedger

    @property
    def ledger_rows_lost(self) -> int:
        """Ledger rows forgotten while the database refused writes."""
        return self._pending.lost


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
