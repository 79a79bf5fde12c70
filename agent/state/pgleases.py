"""The leases by which one agent at a time owns an application in a shared PostgreSQL state,
and the terms that account for the events claimed under each lease.

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

from typing import Any

import psycopg

from agent.state.pgconnection import PgConnection, serialized
from agent.state.pgschema import ADOPT, HEARTBEAT, ORPHANS, PRUNE, RECENT_STOPS, RENEW
from agent.state.store import Heartbeat, LeaseLost, Outcomes, Tokens


class PgLeases(PgConnection):
    """Leases, fencing and terms over the store's connection."""

    lease_seconds: float

    @serialized
    def acquire(self, app_key: str, *, steal: bool = True) -> int | None:
        """Own an application for `lease_seconds` (renewed when already ours): its fencing
        token, or None while another agent holds an unexpired lease on it (and, without
        `steal`, while another agent's lease on it exists at all, expired or not)."""
        with self._transaction() as conn:
            row = conn.execute(
                "INSERT INTO leases AS l VALUES (%s, %s, 1, now() + make_interval(secs => %s)) "
                "ON CONFLICT (app_key) DO UPDATE SET owner = excluded.owner, "
                "token = CASE WHEN l.owner = excluded.owner AND l.expires > now() "
                "THEN l.token ELSE l.token + 1 END, expires = excluded.expires "
                "WHERE l.owner = excluded.owner OR (l.expires <= now() AND %s) RETURNING token",
                (app_key, self.owner, self.lease_seconds, steal),
            ).fetchone()
            if row is not None:  # a new token is a new term; a renewal keeps its own
                conn.execute(
                    "INSERT INTO terms (app_key, token, owner) VALUES (%s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (app_key, row[0], self.owner),
                )
        return None if row is None else int(row[0])

    @serialized
    def release(self, app_key: str, token: int) -> None:
        """Give an application up (finished): another agent may take it at once."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE leases SET expires = now() WHERE app_key = %s AND owner = %s "
                "AND token = %s",
                (app_key, self.owner, token),
            )

    @serialized
    def heartbeat(self, held: Tokens, written: Outcomes, *, judge: bool = True) -> Heartbeat:
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
            orphans: frozenset[str] = frozenset()
            adopted: tuple[tuple[str, int, str, int], ...] = ()
            if judge:
                orphans = frozenset(row[0] for row in conn.execute(ORPHANS))
                adopted = tuple(
                    (row[0], int(row[1]), row[2], int(row[3]))
                    for row in conn.execute(ADOPT, params)
                )
            for statement in PRUNE:
                conn.execute(statement)
            stops = {row[0]: (row[1], row[2]) for row in conn.execute(RECENT_STOPS)}
        return Heartbeat(renewed, orphans, adopted, stops)

    @serialized
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
