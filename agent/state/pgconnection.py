"""One connection to the PostgreSQL state server, shared by every call of the store.

Threads: every call is a round trip (`remote`), made by the event loop in a worker thread;
one lock serializes them on the one connection (`serialized`), so a transaction is never
interleaved with another call's statements. A connection that broke is dropped and made
again on the next call; connecting and each statement give up after `TIMEOUT` seconds.

Credentials: libpq's own (PGPASSWORD, PGPASSFILE, ~/.pgpass, PG* variables) or the file named
by `state_password_file`; `scrub` keeps our password out of any message shown.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

import psycopg

from agent.errors import StateError
from agent.state.reach import Reachability

#: Connecting and each statement give up after this many seconds.
TIMEOUT = 5

P = ParamSpec("P")
R = TypeVar("R")


def serialized(method: Callable[P, R]) -> Callable[P, R]:
    """One call at a time on the connection, whichever thread makes it."""

    @functools.wraps(method)
    def one_at_a_time(*args: P.args, **kwargs: P.kwargs) -> R:
        store: PgConnection = args[0]  # type: ignore[assignment]
        with store._lock:
            reach = store.reach
            reach.begin()
            try:
                result = method(*args, **kwargs)
            except (psycopg.OperationalError, psycopg.InterfaceError) as error:
                reach.failed(store.scrub(str(error)).strip())
                raise
            except BaseException:
                reach.done()
                raise
            conn = store._conn
            if conn is not None and not conn.closed and not conn.broken:
                reach.succeeded()  # its connection stands (not a flush with nothing to write)
            else:
                reach.done()
            return result

    return one_at_a_time


class PgConnection:
    """The store's one connection, reconnected on the next call after it broke."""

    def __init__(self, url: str, *, owner: str, password_file: str | None) -> None:
        self._url = url
        self.owner = owner
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

    def scrub(self, text: str) -> str:
        """`text` (a server's or libpq's message) with any password of ours replaced."""
        secrets = [self._password]
        with contextlib.suppress(ValueError):
            secrets.append(urlsplit(self._url).password)
        for secret in secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

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

    def _one(self, query: str, params: Sequence[Any]) -> Any:
        """The first row of a one-statement query on the connection, or None."""
        return self._connection().execute(query, params).fetchone()
