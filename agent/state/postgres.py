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

Threads: every call is a round trip (`remote`), made by the event loop in a worker thread;
one lock serializes them on the one connection, so a transaction is never interleaved with
another call's statements.

Credentials: libpq's own (PGPASSWORD, PGPASSFILE, ~/.pgpass, PG* variables) or the file named
by `state_password_file`; a URL is only ever shown through `redact_url`.

Schema: created and migrated by the agent at start, one transaction under an advisory lock
(agents starting together migrate once); `lineage_agent_schema` holds the version. A database
of a newer agent is refused rather than written with an older schema.

Leases and fencing: `acquire` gives an application to this agent when nobody holds it or its
holder's lease expired, and raises the lease's `token` by one at every change of owner.
`claim` and `save_position` with a lease check in the same transaction (the lease row locked
`FOR UPDATE`) that this agent still holds that token; an agent paused past its lease
(SIGSTOP) and resumed cannot write for an application another agent took. A lease that
expired with nobody taking it still carries this agent's token, and nobody else can have
claimed meanwhile: its writes go on, so a database outage longer than a lease does not move
every application. Whatever it claimed before the pause is claimed for every agent: the
`emitted` primary key makes a second emission of the same event impossible across agents.

Terms: every token is a row of `terms` counting the events claimed under it (in the claim's
statement) and those that got an outcome (added by the owner's `heartbeat`). An agent silent
for a lease's length leaves terms with events of unknown outcome: the first other agent to
beat adopts them and counts them (`lineage_events_handed_over_total`), so every claimed event
is accounted for by some agent: claimed = resolved + adopted, term by term.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

import psycopg

from agent.config.redact import redact_url
from agent.delivery.envelope import Envelope
from agent.errors import StateError
from agent.state.db import VERDICTS_KEPT, LogPosition, LostAs, event_key
from agent.state.pending import PendingLedger
from agent.state.pgschema import (
    ADOPT,
    CLAIM,
    HEARTBEAT,
    MIGRATIONS,
    ORPHANS,
    PRUNE,
    RECENT_STOPS,
    RENEW,
    SCHEMA_VERSION,
)
from agent.state.reach import Reachability
from agent.state.store import Heartbeat, LeaseLost

#: Connecting and each statement give up after this many seconds.
TIMEOUT = 5
#: Key of the advisory lock held while the schema is created or migrated.
_MIGRATION_LOCK = 0x4C494E45  # "LINE"

P = ParamSpec("P")
R = TypeVar("R")


def _serialized(method: Callable[P, R]) -> Callable[P, R]:
    """One call at a time on the connection, whichever thread makes it."""

    @functools.wraps(method)
    def serialized(*args: P.args, **kwargs: P.kwargs) -> R:
        with args[0]._lock:  # type: ignore[attr-defined]
            reach: Reachability = args[0].reach  # type: ignore[attr-defined]
            reach.begin()
            try:
                result = method(*args, **kwargs)
            except (psycopg.OperationalError, psycopg.InterfaceError) as error:
                reach.failed(args[0].scrub(str(error)).strip())  # type: ignore[attr-defined]
                raise
            except BaseException:
                reach.done()
                raise
            conn = args[0]._conn  # type: ignore[attr-defined]
            if conn is not None and not conn.closed and not conn.broken:
                reach.succeeded()  # its connection stands (not a flush with nothing to write)
            else:
                reach.done()
            return result

    return serialized


class PostgresState:
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
        self._url = url
        self.path = redact_url(url) or ""
        self.owner = owner
        self.lease_seconds = lease_seconds
        self._ledger_rows = ledger_rows
        self._pending = PendingLedger()
        # A server database is not lost with a file: a first start and a lost one look alike.
        self.recreated = False
        self.lost_as: LostAs | None = None
        self.opened_ns = time.time_ns()
        self._password: str | None = None
        if password_file is not None:
            try:
                self._password = Path(password_file).read_text().strip()
            except OSError as error:
                raise StateError(
                    f"state_password_file: {password_file}: cannot read: {error.strerror}"
                ) from error
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        # Whether the server answers, as the calls found it: read from memory by `status`
        # and /healthz, which never wait on a server that does not answer.
        self.reach = Reachability()
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

    def scrub(self, text: str) -> str:
        """`text` (a server's or libpq's message) with any password of ours replaced."""
        secrets = [self._password]
        with contextlib.suppress(ValueError):
            secrets.append(urlsplit(self._url).password)
        for secret in secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    # -- connection and schema ---------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._drop()
        extra: dict[str, Any] = {"password": self._password} if self._password else {}
        conn = psycopg.connect(
            self._url,
            autocommit=True,
            connect_timeout=TIMEOUT,
            application_name=f"lineage-agent {self.owner}",
            # A server that stops answering without closing: statement_timeout runs on the
            # server, so the socket itself gives up after TIMEOUT (unacknowledged data) or
            # after a few unanswered keepalives, instead of TCP's hours.
            tcp_user_timeout=TIMEOUT * 1000,
            keepalives=1,
            keepalives_idle=TIMEOUT,
            keepalives_interval=1,
            keepalives_count=3,
            **extra,
        )
        conn.execute(f"SET statement_timeout = {TIMEOUT * 1000}")
        self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        conn = self._connection()
        with conn.transaction():
            yield conn

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

    @_serialized
    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._drop()

    # -- leases ------------------------------------------------------------------------------

    @_serialized
    def acquire(self, app_key: str) -> int | None:
        """Own an application for `lease_seconds` (renewed when already ours): its fencing
        token, or None while another agent holds an unexpired lease on it."""
        with self._transaction() as conn:
            row = conn.execute(
                "INSERT INTO leases AS l VALUES (%s, %s, 1, now() + make_interval(secs => %s)) "
                "ON CONFLICT (app_key) DO UPDATE SET owner = excluded.owner, "
                "token = CASE WHEN l.owner = excluded.owner AND l.expires > now() "
                "THEN l.token ELSE l.token + 1 END, expires = excluded.expires "
                "WHERE l.owner = excluded.owner OR l.expires <= now() RETURNING token",
                (app_key, self.owner, self.lease_seconds),
            ).fetchone()
            if row is not None:  # a new token is a new term; a renewal keeps its own
                conn.execute(
                    "INSERT INTO terms (app_key, token, owner) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (app_key, row[0], self.owner),
                )
        return None if row is None else int(row[0])

    @_serialized
    def release(self, app_key: str, token: int) -> None:
        """Give an application up (finished): another agent may take it at once."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE leases SET expires = now() WHERE app_key = %s AND owner = %s "
                "AND token = %s",
                (app_key, self.owner, token),
            )

    @_serialized
    def heartbeat(
        self, held: Mapping[str, int], written: Mapping[tuple[str, int], int]
    ) -> Heartbeat:
        """Renew the leases `held`, record `written`, and report (see `Leases.heartbeat`)."""
        params = {
            "owner": self.owner,
            "lease": self.lease_seconds,
            "keys": list(held),
            "tokens": list(held.values()),
            "w_keys": [key for key, _ in written],
            "w_tokens": [token for _, token in written],
            "w_counts": list(written.values()),
        }
        with self._transaction() as conn:
            for statement in HEARTBEAT:
                conn.execute(statement, params)
            renewed = frozenset(row[0] for row in conn.execute(RENEW, params))
            orphans = frozenset(row[0] for row in conn.execute(ORPHANS))
            adopted = tuple(
                (row[0], int(row[1]), row[2], int(row[3])) for row in conn.execute(ADOPT, params)
            )
            for statement in PRUNE:
                conn.execute(statement)
            stops = {row[0]: (row[1], row[2]) for row in conn.execute(RECENT_STOPS)}
        return Heartbeat(renewed, orphans, adopted, stops)

    @_serialized
    def leases(self) -> dict[str, tuple[str, int, float]]:
        """Every unexpired lease: application key -> (owner, token, seconds left)."""
        rows = self._connection().execute(
            "SELECT app_key, owner, token, EXTRACT(EPOCH FROM expires - now()) FROM leases "
            "WHERE expires > now()"
        )
        return {row[0]: (row[1], int(row[2]), float(row[3])) for row in rows}

    def _fence(self, conn: psycopg.Connection[Any], app_key: str, token: int) -> None:
        row = conn.execute(
            "SELECT 1 FROM leases WHERE app_key = %s AND owner = %s AND token = %s FOR UPDATE",
            (app_key, self.owner, token),
        ).fetchone()
        if row is None:
            raise LeaseLost(f"lease on {app_key} lost (token {token})")

    # -- emitted run events ------------------------------------------------------------------

    @_serialized
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

    @_serialized
    def emitted_for(self, app_key: str) -> list[tuple[str, str, str, str]]:
        rows = self._connection().execute(
            "SELECT run_id, job_name, event_type, event_time FROM emitted "
            "WHERE app_key = %s ORDER BY event_time",
            (app_key,),
        )
        return [(row[0], row[1], row[2], row[3]) for row in rows]

    @_serialized
    def app_key_for(self, app_id: str) -> str | None:
        row = (
            self._connection()
            .execute(
                "SELECT app_key FROM emitted WHERE app_key = %s OR app_key LIKE %s LIMIT 1",
                (app_id, "%/" + app_id.lower()),
            )
            .fetchone()
        )
        return str(row[0]) if row else None

    # -- positions ---------------------------------------------------------------------------

    @_serialized
    def position(self, key: str) -> LogPosition | None:
        row = (
            self._connection()
            .execute(
                "SELECT key, path, dev, ino, bytes_read, finished FROM logs WHERE key = %s",
                (key,),
            )
            .fetchone()
        )
        if row is None:
            return None
        return LogPosition(row[0], row[1], row[2], row[3], row[4], bool(row[5]))

    @_serialized
    def save_position(self, position: LogPosition, *, token: int | None = None) -> None:
        with self._transaction() as conn:
            if token is not None:
                self._fence(conn, position.key, token)
            conn.execute(
                "INSERT INTO logs VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO "
                "UPDATE SET path = excluded.path, dev = excluded.dev, ino = excluded.ino, "
                "bytes_read = excluded.bytes_read, finished = excluded.finished, "
                "updated = excluded.updated",
                (
                    position.key,
                    position.path,
                    position.dev,
                    position.ino,
                    position.bytes_read,
                    position.finished,
                    time.time(),
                ),
            )

    @_serialized
    def finished_keys(self) -> set[str]:
        rows = self._connection().execute("SELECT key FROM logs WHERE finished")
        return {row[0] for row in rows}

    # -- stop requests -----------------------------------------------------------------------

    @_serialized
    def record_stop(self, app_id: str, reason: str, requested_by: str) -> None:
        self._connection().execute(
            "INSERT INTO stops VALUES (%s, %s, %s, %s) ON CONFLICT (app_id) DO UPDATE SET "
            "reason = excluded.reason, requested_by = excluded.requested_by, "
            "time = excluded.time",
            (app_id, reason, requested_by, time.time()),
        )

    @_serialized
    def stop_requests(self) -> dict[str, tuple[str, str]]:
        rows = self._connection().execute("SELECT app_id, reason, requested_by FROM stops")
        return {row[0]: (row[1], row[2]) for row in rows}

    @_serialized
    def stop_request(self, app_id: str) -> tuple[str, str] | None:
        row = (
            self._connection()
            .execute("SELECT reason, requested_by FROM stops WHERE app_id = %s", (app_id,))
            .fetchone()
        )
        return (row[0], row[1]) if row else None

    # -- verdicts of `lineage-agent exec` ------------------------------------------------------

    @_serialized
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

    @_serialized
    def verdict(self, exec_id: str) -> tuple[int, str | None, str, str] | None:
        row = (
            self._connection()
            .execute(
                "SELECT status, signal, stderr_tail, requested_by FROM verdicts WHERE exec_id = %s",
                (exec_id,),
            )
            .fetchone()
        )
        return (int(row[0]), row[1], str(row[2]), str(row[3])) if row else None

    # -- delivery ledger ---------------------------------------------------------------------

    def record(self, envelope: Envelope, transport: str, outcome: str, reason: str | None) -> None:
        # Kept in memory only: recording is on the loop, and the daemon's `flush` (in a
        # worker thread, each second) writes the rows.
        self._pending.add(envelope, transport, outcome, reason)

    @_serialized
    def flush(self) -> None:
        self._pending.write(self._write_ledger, (psycopg.Error,))

    @property
    def ledger_rows_lost(self) -> int:
        return self._pending.lost

    def _write_ledger(self, rows: list[tuple[Any, ...]]) -> None:
        with self._transaction() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO ledger (time, execution, run_id, event_type, digest, "
                "transport, outcome, reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
            cursor.execute(
                "DELETE FROM ledger WHERE id <= (SELECT MAX(id) FROM ledger) - %s",
                (self._ledger_rows,),
            )

    @_serialized
    def ledger_for(self, app_id: str) -> list[dict[str, Any]]:
        with contextlib.suppress(psycopg.Error):
            self.flush()
        columns = ("time", "run_id", "event_type", "digest", "transport", "outcome", "reason")
        rows = self._connection().execute(
            f"SELECT {', '.join(columns)} FROM ledger WHERE execution = %s ORDER BY id",
            (app_id,),
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]
