"""SQLite state in the state directory: log positions, emitted run events, stop requests, the
verdicts of `lineage-agent exec` and the delivery ledger ("what ran, what moved, was it delivered").

Errors:
    StateError: the database cannot be opened, is corrupt, or another agent holds the state
    directory. The message names the file and what to do; the daemon refuses to start.

A lost database: where the lock file (never removed) shows that an agent used the state
directory before, a database holding none of the agent's tables (no file, a file truncated
to nothing, one that something else made) is the agent's database lost, not a first start:
`recreated` is set, and the source takes the event logs completed before it as handled
rather than emitting every run again. Without the lock file it is a first start.

Durability rule: an event is marked as emitted (committed) before it is handed to the
pipeline, so a crash can lose an event (at-most-once) but never send it twice.

The delivery ledger is written in batches. When the database refuses a batch (locked by
another process, disk full) the rows are kept and written with the next batch; past
`MAX_PENDING_ROWS` the oldest are forgotten and counted in `ledger_rows_lost`. Recording an
outcome never raises: delivery must not depend on the audit trail.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.delivery.envelope import Envelope
from agent.errors import StateError
from agent.fsutil import identity_change, take_lock
from agent.state.pending import LedgerKeeper, LedgerStatements, PendingLedger, ledger_entries
from agent.state.sqlschema import SCHEMA, SCHEMA_VERSION, TABLES

#: Seconds a verdict of `lineage-agent exec` is kept: far longer than any application waits.
VERDICTS_KEPT = 30 * 86400.0
_LEDGER = LedgerStatements.marked("?")
#: What stood at the path of a lost database: no file, an empty file (SQLite reads it as an
#: empty database), or a database without the agent's tables.
LostAs = Literal["no file", "an empty file", "a database without the agent's tables"]


def _found_at(path: Path) -> LostAs:
    """What is at the database's path before it is opened, were it lost."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return "no file"
    except OSError:
        return "a database without the agent's tables"  # opening it tells more
    return "an empty file" if size == 0 else "a database without the agent's tables"


@dataclass(frozen=True, slots=True)
class LogPosition:
    key: str
    path: str
    dev: int | None
    ino: int | None
    bytes_read: int
    finished: bool

    def row(self) -> tuple[Any, ...]:
        """The position as a row of `logs`, stamped with the time now."""
        return (
            self.key,
            self.path,
            self.dev,
            self.ino,
            self.bytes_read,
            self.finished,
            time.time(),
        )


def event_key(event: dict[str, Any]) -> str:
    """START, END (any terminal type) or RUNNING@time: what makes an event unique in a run."""
    kind = event.get("eventType", "")
    if kind == "RUNNING":
        return f"RUNNING@{event.get('eventTime', '')}"
    return "START" if kind == "START" else "END"


class StateDB(LedgerKeeper):
    """One SQLite database in WAL mode, used from the event-loop thread only."""

    #: What a refused write raises (the `StateStore` contract).
    write_errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    #: A local file: calls are made on the loop, in place.
    remote = False

    def __init__(self, state_dir: str | os.PathLike[str], *, ledger_rows: int = 1_000_000):
        self.directory = Path(state_dir)
        self.path = self.directory / "state.sqlite3"
        self._ledger_rows = ledger_rows
        self._pending = PendingLedger()
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o750)
        except OSError as error:
            raise StateError(
                f"{self.directory}: cannot create state directory: {error.strerror}"
            ) from error
        # The lock file is never removed: with it and a database holding none of the agent's
        # tables (no file, an empty one, or one something else made), the database was lost.
        used_before = (self.directory / "state.lock").exists()
        self._lock_fd = self._lock()
        self.recreated = False
        #: What stood at the database's path when it was lost, for the log line.
        self.lost_as: LostAs | None = None
        found = _found_at(self.path)
        self.opened_ns = time.time_ns()
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=0.5)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            check = self._db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            if used_before and not self._has_agent_tables():
                self.recreated, self.lost_as = True, found
            self._db.executescript(SCHEMA)
            self._db.execute(
                # A database of version 1 got the tables it lacked from SCHEMA above.
                "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value WHERE CAST(value AS INTEGER) < excluded.value",
                (str(SCHEMA_VERSION),),
            )
            info = os.stat(self.path)
            self._identity = (info.st_dev, info.st_ino)
        except sqlite3.Error as error:
            os.close(self._lock_fd)
            if getattr(error, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                # Not damaged: the other process must go, not the file.
                raise StateError(
                    f"{self.path}: state database is locked by another process ({error}); "
                    "stop that process and start the agent again"
                ) from error
            raise StateError(
                f"{self.path}: state database is unusable ({error}); stop the agent, move the "
                "file aside and start again (runs already emitted may then be emitted again)"
            ) from error

    def _has_agent_tables(self) -> bool:
        """Whether any of the tables `SCHEMA` makes is there (an older agent's are a subset)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
            f"({', '.join('?' * len(TABLES))})",
            TABLES,
        ).fetchone()
        return bool(row[0])

    def _lock(self) -> int:
        lock_path = self.directory / "state.lock"
        try:
            return take_lock(lock_path, 0o640)
        except BlockingIOError:
            raise StateError(
                f"{self.directory}: another lineage-agent is using this state directory "
                f"(lock {lock_path} is held)"
            ) from None
        except OSError as error:
            raise StateError(f"{lock_path}: cannot open: {error.strerror}") from error

    def file_change(self) -> str | None:
        """ "removed" or "replaced" when the path no longer names the open database."""
        return identity_change(self.path, self._identity)

    def close(self) -> None:
        """Write what the ledger still holds if the database lets us, then close; the
        database and the lock are released even when that last write fails."""
        try:
            self.flush()
        finally:
            self._db.close()
            os.close(self._lock_fd)

    # -- emitted run events ----------------------------------------------------------------

    def claim(
        self, app_key: str, events: Sequence[dict[str, Any]], *, token: int | None = None
    ) -> list[dict[str, Any]]:
        """Mark events as emitted and return those that were not emitted before, in order.
        A file one agent owns has no leases: there is no `token` to check."""
        _no_lease(token)
        fresh: list[dict[str, Any]] = []
        with self._transaction():
            for event in events:
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO emitted VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        event["run"]["runId"],
                        event_key(event),
                        app_key,
                        event["job"]["name"],
                        event["eventType"],
                        event["eventTime"],
                    ),
                )
                if cursor.rowcount:
                    fresh.append(event)
        return fresh

    def emitted_for(self, app_key: str) -> list[tuple[str, str, str, str]]:
        """(run id, job name, event type, event time) of an application, in time order."""
        return [
            (row[0], row[1], row[2], row[3])
            for row in self._db.execute(
                "SELECT run_id, job_name, event_type, event_time FROM emitted "
                "WHERE app_key = ? ORDER BY event_time",
                (app_key,),
            )
        ]

    def app_key_for(self, app_id: str) -> str | None:
        """The log key under which an application's events were claimed, if any."""
        row = self._db.execute(
            "SELECT app_key FROM emitted WHERE app_key = ? OR app_key LIKE ? LIMIT 1",
            (app_id, "%/" + app_id.lower()),
        ).fetchone()
        return str(row[0]) if row else None

    # -- positions -------------------------------------------------------------------------

    def position(self, key: str) -> LogPosition | None:
        row = self._db.execute(
            "SELECT key, path, dev, ino, bytes_read, finished FROM logs WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return LogPosition(row[0], row[1], row[2], row[3], row[4], bool(row[5]))

    def save_position(self, position: LogPosition, *, token: int | None = None) -> None:
        _no_lease(token)
        self._db.execute(
            "INSERT INTO logs VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
            "path = excluded.path, dev = excluded.dev, ino = excluded.ino, "
            "bytes_read = excluded.bytes_read, finished = excluded.finished, "
            "updated = excluded.updated",
            position.row(),
        )

    def finished_keys(self) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT key FROM logs WHERE finished = 1")}

    # -- resume points of store listings ---------------------------------------------------

    def resume_point(self, directory: str) -> str | None:
        row = self._db.execute(
            "SELECT after FROM resume_points WHERE directory = ?", (directory,)
        ).fetchone()
        return None if row is None else str(row[0])

    def save_resume_point(self, directory: str, after: str) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO resume_points VALUES (?, ?, ?)", (directory, after, time.time())
        )

    # -- stop requests ---------------------------------------------------------------------

    def record_stop(self, app_id: str, reason: str, requested_by: str) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO stops VALUES (?, ?, ?, ?)",
            (app_id, reason, requested_by, time.time()),
        )

    def stop_requests(self) -> dict[str, tuple[str, str]]:
        """Every recorded stop: application id -> (reason, requested by)."""
        rows = self._db.execute("SELECT app_id, reason, requested_by FROM stops")
        return {row[0]: (row[1], row[2]) for row in rows}

    def stop_request(self, app_id: str) -> tuple[str, str] | None:
        row = self._db.execute(
            "SELECT reason, requested_by FROM stops WHERE app_id = ?", (app_id,)
        ).fetchone()
        return (row[0], row[1]) if row else None

    # -- verdicts of `lineage-agent exec` ----------------------------------------------------

    def record_verdict(
        self, exec_id: str, status: int, signal: str | None, stderr_tail: str, requested_by: str
    ) -> bool:
        """Keep how a command run by `lineage-agent exec` ended until its applications end;
        False when that run's verdict was recorded already (the first one stays)."""
        now = time.time()
        with self._transaction():
            self._db.execute("DELETE FROM verdicts WHERE time < ?", (now - VERDICTS_KEPT,))
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)",
                (exec_id, status, signal, stderr_tail, requested_by, now),
            )
        return bool(cursor.rowcount)

    def verdict(self, exec_id: str) -> tuple[int, str | None, str, str] | None:
        """(status, signal, stderr tail, requested by) of that run of `exec`, if it ended."""
        row = self._db.execute(
            "SELECT status, signal, stderr_tail, requested_by FROM verdicts WHERE exec_id = ?",
            (exec_id,),
        ).fetchone()
        return (int(row[0]), row[1], str(row[2]), str(row[3])) if row else None

    # -- delivery ledger -------------------------------------------------------------------

    def record(self, envelope: Envelope, transport: str, outcome: str, reason: str | None) -> None:
        """Ledger entry for one event and transport; written in batches by `flush`."""
        if self._pending.add(envelope, transport, outcome, reason):
            # A refusal keeps the rows for the periodic flush, which reports it.
            with contextlib.suppress(sqlite3.Error):
                self.flush()

    def flush(self) -> None:
        """Write the pending ledger rows; on a refusal keep them (bounded) and raise."""
        self._pending.write(self._write_ledger, (sqlite3.Error,))

    def _write_ledger(self, rows: list[tuple[Any, ...]]) -> None:
        with self._transaction():
            self._db.executemany(_LEDGER.insert, rows)
            # Keep the ledger bounded: forget the oldest rows past the limit.
            self._db.execute(_LEDGER.prune, (self._ledger_rows,))

    def ledger_for(self, app_id: str) -> list[dict[str, Any]]:
        with contextlib.suppress(sqlite3.Error):  # refused: the rows written so far still tell
            self.flush()
        return ledger_entries(self._db.execute(_LEDGER.select, (app_id,)))

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


def _no_lease(token: int | None) -> None:
    if token is not None:  # a caller bug: tokens come from `Leases`, which SQLite is not
        raise TypeError("a SQLite state has no leases to fence a write with")


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, kind: object, *_: Iterable[object]) -> None:
        try:
            if kind is None:
                self._db.execute("COMMIT")
                return
        except sqlite3.Error:
            # A refused COMMIT (busy, disk full) may leave the transaction open; one left open
            # would make every later BEGIN fail.
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        if self._db.in_transaction:  # SQLite may have rolled back on its own already
            self._db.execute("ROLLBACK")
