"""State in PostgreSQL (`state_url: postgresql://…`), through psycopg 3: the same claims,
positions, stop requests, verdicts and ledger as `agent.state.db`, shared by several agents
over one log store, plus the leases by which one agent at a time owns an application.

Errors:
    StateError: the server cannot be reached or refuses the schema at start. The message
    names the URL without its password; the daemon refuses to start.
    psycopg.Error (`write_errors`): a call refused later (server restarting, connection
    lost): the caller holds its work; the next call connects again.
    LeaseLost (`agent.state.store`): a fenced write for an application whose lease this
    agent no longer holds.

Connection, threads and credentials: `agent.state.pgconnection`; leases, fencing and terms:
`agent.state.pgleases`.

Schema: created and migrated by the agent at start, one transaction under an advisory lock
(agents starting together migrate once); `lineage_agent_schema` holds the version. A database
of a newer agent is refused rather than written with an older schema.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from agent.config.redact import redact_url
from agent.delivery.envelope import Envelope
from agent.errors import StateError
from agent.state.db import VERDICTS_KEPT, LogPosition, LostAs, event_key
from agent.state.pending import LedgerKeeper, LedgerStatements, PendingLedger, ledger_entries
from agent.state.pgconnection import PgConnection, serialized
from agent.state.pgleases import PgLeases
from agent.state.pgschema import CLAIM, MIGRATIONS, SCHEMA_VERSION
from agent.state.store import LeaseLost

#: Key of the advisory lock held while the schema is created or migrated.
_MIGRATION_LOCK = 0x4C494E45  # "LINE"
_LEDGER = LedgerStatements.marked("%s")


class PostgresState(PgLeases, LedgerKeeper):
    """One connection to the server, reconnected on the next call after it broke; calls
    from any thread, one at a time."""

    write_errors: tuple[type[Exception], ...] = (psycopg.Error,)
    remote = True

    def __init__(
        self,
        url: str,
        *,
        owner: str,
        password_file: str | None = None,
        lease_seconds: float = 30.0,
        ledger_rows: int = 1_000_000,
    ) -> None:
        self.path = redact_url(url) or ""
        self.lease_seconds = lease_seconds
        self._ledger_rows = ledger_rows
        self._pending = PendingLedger()
        # A server database is not lost with a file: a first start and a lost one look alike.
        self.recreated = False
        self.lost_as: LostAs | None = None
        self.opened_ns = time.time_ns()
        PgConnection.__init__(self, url, owner=owner, password_file=password_file)
        try:
            self._migrate()
        except psycopg.Error as error:
            self._drop()
            raise StateError(
                f"{self.path}: state database is unusable ({self.scrub(str(error))})"
            ) from None
        except BaseException:
            self._drop()
            raise

    # -- schema ------------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS lineage_agent_schema (version INTEGER)")
            row = conn.execute("SELECT version FROM lineage_agent_schema").fetchone()
            version = 0 if row is None else int(row[0])
            if version > SCHEMA_VERSION:
                raise StateError(
                    f"{self.path}: state database has schema version {version}, newer than "
                    f"this agent's {SCHEMA_VERSION}; run the newer agent"
                )
            for step in MIGRATIONS[version:]:
                conn.execute(step)
            if row is None:
                conn.execute("INSERT INTO lineage_agent_schema VALUES (%s)", (SCHEMA_VERSION,))
            elif version < SCHEMA_VERSION:
                conn.execute("UPDATE lineage_agent_schema SET version = %s", (SCHEMA_VERSION,))

    def file_change(self) -> str | None:  # on the event loop: never waits for the lock
        return None  # no file of ours to be removed or replaced

    @serialized
    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._drop()

    # -- emitted run events ------------------------------------------------------------------

    @serialized
    def claim(
        self, app_key: str, events: Sequence[dict[str, Any]], *, token: int | None = None
    ) -> list[dict[str, Any]]:
        if not events:
            return []
        keys = [(event["run"]["runId"], event_key(event)) for event in events]
        # One statement, one round trip, atomic on its own: the lease check (the row locked)
        # and the inserts. The `fence` row in the answer says the lease was held.
        rows = (
            self._connection()
            .execute(
                CLAIM,
                {
                    "app_key": app_key,
                    "owner": self.owner,
                    "token": token,
                    "fenced": token is not None,
                    "lease": self.lease_seconds,
                    "runs": [run for run, _ in keys],
                    "keys": [key for _, key in keys],
                    "jobs": [event["job"]["name"] for event in events],
                    "types": [event["eventType"] for event in events],
                    "times": [event["eventTime"] for event in events],
                },
            )
            .fetchall()
        )
        if token is not None and ("fence", None) not in rows:
            raise LeaseLost(f"lease on {app_key} lost (token {token})")
        inserted = set(rows)
        fresh = []
        for event, key in zip(events, keys, strict=True):
            if key in inserted:  # the first of two equal events in one batch is the one
                inserted.discard(key)
                fresh.append(event)
        return fresh

    @serialized
    def emitted_for(self, app_key: str) -> list[tuple[str, str, str, str]]:
        rows = self._connection().execute(
            "SELECT run_id, job_name, event_type, event_time FROM emitted "
            "WHERE app_key = %s ORDER BY event_time",
            (app_key,),
        )
        return [(row[0], row[1], row[2], row[3]) for row in rows]

    @serialized
    def app_key_for(self, app_id: str) -> str | None:
        row = self._one(
            "SELECT app_key FROM emitted WHERE app_key = %s OR app_key LIKE %s LIMIT 1",
            (app_id, "%/" + app_id.lower()),
        )
        return str(row[0]) if row else None

    # -- positions ---------------------------------------------------------------------------

    @serialized
    def position(self, key: str) -> LogPosition | None:
        row = self._one(
            "SELECT key, path, dev, ino, bytes_read, finished FROM logs WHERE key = %s", (key,)
        )
        if row is None:
            return None
        return LogPosition(row[0], row[1], row[2], row[3], row[4], bool(row[5]))

    @serialized
    def save_position(self, position: LogPosition, *, token: int | None = None) -> None:
        with self._transaction() as conn:
            if token is not None:
                self._fence(conn, position.key, token)
            conn.execute(
                "INSERT INTO logs VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO "
                "UPDATE SET path = excluded.path, dev = excluded.dev, ino = excluded.ino, "
                "bytes_read = excluded.bytes_read, finished = excluded.finished, "
                "updated = excluded.updated",
                position.row(),
            )

    @serialized
    def finished_keys(self) -> set[str]:
        rows = self._connection().execute("SELECT key FROM logs WHERE finished")
        return {row[0] for row in rows}

    # -- resume points of store listings -----------------------------------------------------

    @serialized
    def resume_point(self, directory: str) -> str | None:
        row = (
            self._connection()
            .execute("SELECT after FROM resume_points WHERE directory = %s", (directory,))
            .fetchone()
        )
        return None if row is None else str(row[0])

    @serialized
    def save_resume_point(self, directory: str, after: str) -> None:
        self._connection().execute(
            "INSERT INTO resume_points VALUES (%s, %s, EXTRACT(EPOCH FROM now())) "
            "ON CONFLICT (directory) DO UPDATE SET after = excluded.after, "
            "updated = excluded.updated",
            (directory, after),
        )

    # -- stop requests -----------------------------------------------------------------------

    @serialized
    def record_stop(self, app_id: str, reason: str, requested_by: str) -> None:
        self._connection().execute(
            "INSERT INTO stops VALUES (%s, %s, %s, %s) ON CONFLICT (app_id) DO UPDATE SET "
            "reason = excluded.reason, requested_by = excluded.requested_by, "
            "time = excluded.time",
            (app_id, reason, requested_by, time.time()),
        )

    @serialized
    def stop_requests(self) -> dict[str, tuple[str, str]]:
        rows = self._connection().execute("SELECT app_id, reason, requested_by FROM stops")
        return {row[0]: (row[1], row[2]) for row in rows}

    @serialized
    def stop_request(self, app_id: str) -> tuple[str, str] | None:
        row = self._one("SELECT reason, requested_by FROM stops WHERE app_id = %s", (app_id,))
        return (row[0], row[1]) if row else None

    # -- verdicts of `lineage-agent exec` ------------------------------------------------------

    @serialized
    def record_verdict(
        self, exec_id: str, status: int, signal: str | None, stderr_tail: str, requested_by: str
    ) -> bool:
        now = time.time()
        with self._transaction() as conn:
            conn.execute("DELETE FROM verdicts WHERE time < %s", (now - VERDICTS_KEPT,))
            cursor = conn.execute(
                "INSERT INTO verdicts VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (exec_id, status, signal, stderr_tail, requested_by, now),
            )
        return bool(cursor.rowcount)

    @serialized
    def verdict(self, exec_id: str) -> tuple[int, str | None, str, str] | None:
        row = self._one(
            "SELECT status, signal, stderr_tail, requested_by FROM verdicts WHERE exec_id = %s",
            (exec_id,),
        )
        return (int(row[0]), row[1], str(row[2]), str(row[3])) if row else None

    # -- delivery ledger ---------------------------------------------------------------------

    def record(self, envelope: Envelope, transport: str, outcome: str, reason: str | None) -> None:
        # Kept in memory only: recording is on the loop, and the daemon's `flush` (in a
        # worker thread, each second) writes the rows.
        self._pending.add(envelope, transport, outcome, reason)

    @serialized
    def flush(self) -> None:
        self._pending.write(self._write_ledger, (psycopg.Error,))

    def _write_ledger(self, rows: list[tuple[Any, ...]]) -> None:
        with self._transaction() as conn, conn.cursor() as cursor:
            cursor.executemany(_LEDGER.insert, rows)
            cursor.execute(_LEDGER.prune, (self._ledger_rows,))

    @serialized
    def ledger_for(self, app_id: str) -> list[dict[str, Any]]:
        with contextlib.suppress(psycopg.Error):
            self.flush()
        return ledger_entries(self._connection().execute(_LEDGER.select, (app_id,)))
