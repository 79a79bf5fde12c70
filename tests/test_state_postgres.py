"""State in a real PostgreSQL: schema and migration, credentials that never show, a server
restart survived, leases and fenced writes, heartbeats, terms and their adoption, calls from
several threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from agent.config.redact import redact_url
from agent.errors import StateError
from agent.state.db import LogPosition
from agent.state.pgschema import MIGRATIONS, SCHEMA_VERSION
from agent.state.postgres import PostgresState
from agent.state.store import LeaseLost
from agent.testing import sample_run_events
from tests.pg import Postgres
from tests.pg_plugin import fresh_database, url_of


def test_schema_is_created_once_with_its_version(state_url: str, postgres_server: Postgres) -> None:
    """The agent creates its tables and records the schema version; a second agent keeps them."""
    first = PostgresState(state_url, owner="a")
    first.claim("app", list(sample_run_events(1)))
    second = PostgresState(state_url, owner="b")
    database = state_url.rsplit("/", 1)[1]
    assert postgres_server.psql("SELECT version FROM lineage_agent_schema", database) == str(
        SCHEMA_VERSION
    )
    assert second.claim("app", list(sample_run_events(1))) == []
    first.close()
    second.close()


def test_a_newer_schema_is_refused(state_url: str, postgres_server: Postgres) -> None:
    """A database a newer agent migrated is refused, not written with an older schema."""
    PostgresState(state_url, owner="a").close()
    database = state_url.rsplit("/", 1)[1]
    postgres_server.psql("UPDATE lineage_agent_schema SET version = 99", database)
    with pytest.raises(StateError) as error:
        PostgresState(state_url, owner="a")
    assert str(error.value) == (
        f"{state_url}: state database has schema version 99, newer than this agent's "
        f"{SCHEMA_VERSION}; run the newer agent"
    )


def test_password_from_a_file_and_never_in_a_message(
    postgres_server: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The password comes from `state_password_file`; a refusal names the URL without it."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    url = url_of(postgres_server, fresh_database(postgres_server))
    secret = tmp_path / "pw"
    secret.write_text(postgres_server.password + "\n")
    PostgresState(url, owner="a", password_file=str(secret)).close()
    secret.write_text("wrong-password-xyz\n")
    with pytest.raises(StateError) as error:
        PostgresState(url, owner="a", password_file=str(secret))
    assert str(error.value).startswith(f"{url}: state database is unusable (")
    assert "password authentication failed" in str(error.value)
    assert "wrong-password-xyz" not in str(error.value)
    inline = url.replace("@", ":wrong-password-xyz@")
    with pytest.raises(StateError) as error:
        PostgresState(inline, owner="a")
    assert "wrong-password-xyz" not in str(error.value)
    assert str(error.value).startswith(f"{url.replace('@', ':***@')}: state database")


def test_redact_url_hides_every_password() -> None:
    """Passwords in the user part and in the query are replaced, the rest is kept."""
    assert redact_url("postgresql://u:s3cret@h:5432/d?password=x&sslmode=require") == (
        "postgresql://u:***@h:5432/d?password=***&sslmode=require"
    )
    assert redact_url("postgresql://u@h/d") == "postgresql://u@h/d"


def test_a_server_restart_refuses_then_reconnects(
    state_url: str, postgres_server: Postgres
) -> None:
    """While the connection is gone a call raises a write error; the next one connects again."""
    state = PostgresState(state_url, owner="a")
    events = list(sample_run_events(2))
    database = state_url.rsplit("/", 1)[1]
    postgres_server.psql(
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'"
        " AND pid <> pg_backend_pid()"
    )
    with pytest.raises(state.write_errors):
        state.claim("app", events[:2])
    assert state.claim("app", events) == events
    state.close()


def test_a_lease_is_one_agents_until_it_expires(state_url: str) -> None:
    """Another agent cannot take a held application; after expiry it can, with a new token."""
    a = PostgresState(state_url, owner="a", lease_seconds=1.0)
    b = PostgresState(state_url, owner="b", lease_seconds=1.0)
    token = a.acquire("d/app-1")
    assert token == 1
    assert b.acquire("d/app-1") is None
    assert a.acquire("d/app-1") == token  # renewed, same token
    assert a.leases()["d/app-1"][:2] == ("a", 1)
    deadline = time.monotonic() + 10
    taken = None
    while taken is None and time.monotonic() < deadline:
        time.sleep(0.2)
        taken = b.acquire("d/app-1")
    assert taken == 2
    a.close()
    b.close()


def test_a_fenced_write_after_the_lease_was_lost_is_refused(state_url: str) -> None:
    """An agent whose lease expired and was taken cannot claim nor move the position; one
    whose lease expired with nobody taking it still can (nobody else could claim)."""
    a = PostgresState(state_url, owner="a", lease_seconds=1.0)
    b = PostgresState(state_url, owner="b", lease_seconds=30.0)
    events = list(sample_run_events(3))
    token = a.acquire("d/app-1")
    assert token is not None
    assert a.claim("d/app-1", events[:1], token=token) == events[:1]
    time.sleep(1.2)  # paused past its lease
    assert a.claim("d/app-1", events[:2], token=token) == events[1:2]  # expired, not taken
    assert b.acquire("d/app-1") is None  # that claim renewed the expired lease
    time.sleep(1.2)  # paused past it again
    taken = b.acquire("d/app-1")
    assert taken == token + 1
    with pytest.raises(LeaseLost):
        a.claim("d/app-1", events, token=token)
    with pytest.raises(LeaseLost):
        a.save_position(LogPosition("d/app-1", "/l", None, None, 10, False), token=token)
    # Not a refusal to wait out: the application is let go.
    assert not isinstance(LeaseLost("x"), a.write_errors)
    assert b.claim("d/app-1", events, token=taken) == events[2:]
    assert b.claim("d/app-1", events, token=taken) == []  # all claimed, the lease still held
    other = list(sample_run_events(2, app="other"))
    assert b.claim("d/app-2", [*other, *other]) == other  # a repeat in a batch counts once
    a.close()
    b.close()


def test_unreachable_server_is_a_clear_error() -> None:
    """No server at the URL: the agent refuses to start, naming the URL."""
    with pytest.raises(StateError) as error:
        PostgresState("postgresql://u:pw@127.0.0.1:1/d", owner="a")
    assert str(error.value).startswith("postgresql://u:***@127.0.0.1:1/d: state database is")


def older_schema(state_url: str, version: int, *rows: str) -> None:
    """The database as an agent of schema `version` left it, holding `rows` (statements)."""
    with psycopg.connect(state_url, autocommit=True) as older:  # as the agent's user
        for step in MIGRATIONS[:version]:
            older.execute(step)
        older.execute("CREATE TABLE lineage_agent_schema (version INTEGER)")
        older.execute("INSERT INTO lineage_agent_schema VALUES (%s)", (version,))
        for row in rows:
            older.execute(row)


def test_a_first_schema_is_migrated_in_place(state_url: str, postgres_server: Postgres) -> None:
    """A database of the first schema (no terms) is migrated at start, its claims kept."""
    database = state_url.rsplit("/", 1)[1]
    older_schema(
        state_url, 1, "INSERT INTO emitted VALUES ('r', 'START', 'd/app-1', 'j', 'START', 't')"
    )
    state = PostgresState(state_url, owner="a")
    assert postgres_server.psql("SELECT version FROM lineage_agent_schema", database) == str(
        SCHEMA_VERSION
    )
    assert state.emitted_for("d/app-1") == [("r", "j", "START", "t")]
    assert state.acquire("d/app-1") == 1
    assert postgres_server.psql("SELECT count(*) FROM terms", database) == "1"
    state.close()


def test_a_second_schema_gets_the_resume_points_in_place(
    state_url: str, postgres_server: Postgres
) -> None:
    """A database of schema version 2 (no resume points) is migrated at start, its
    positions kept, and keeps resume points from then on."""
    database = state_url.rsplit("/", 1)[1]
    older_schema(state_url, 2, "INSERT INTO logs VALUES ('d/app-1', '/l', NULL, NULL, 5, TRUE, 0)")
    state = PostgresState(state_url, owner="a")
    assert postgres_server.psql("SELECT version FROM lineage_agent_schema", database) == str(
        SCHEMA_VERSION
    )
    assert state.finished_keys() == {"d/app-1"}
    state.save_resume_point("s3a://b/logs", "local-1")
    assert state.resume_point("s3a://b/logs") == "local-1"
    state.close()


def test_one_heartbeat_renews_every_lease_and_names_those_lost(state_url: str) -> None:
    """A heartbeat renews the leases still held (one statement for all of them) and leaves
    out one another agent took; it names logs whose owner is gone, and the stops."""
    a = PostgresState(state_url, owner="a", lease_seconds=1.0)
    b = PostgresState(state_url, owner="b", lease_seconds=1.0)
    tokens = {key: a.acquire(key) for key in ("d/app-1", "d/app-2", "d/app-3")}
    held = {key: token for key, token in tokens.items() if token is not None}
    assert len(held) == 3
    time.sleep(1.2)  # expired: app-3 is taken by b meanwhile
    assert b.acquire("d/app-3") == 2
    a.save_position(LogPosition("d/app-2", "/l", None, None, 5, True))  # finished
    b.record_stop("app-1", "maintenance", "uid 0 (root)")
    b.record_stop("app-0", "long ago", "uid 0 (root)")
    with psycopg.connect(state_url, autocommit=True) as conn:  # as if two hours old
        conn.execute("UPDATE stops SET time = time - 7200 WHERE app_id = 'app-0'")
    beat = a.heartbeat(held, {})
    assert beat.held == {"d/app-1", "d/app-2"}  # expired, nobody took them: still a's
    # The recent stops only: an agent that starts reads them all.
    assert beat.stops == {"app-1": ("maintenance", "uid 0 (root)")}
    assert set(a.stop_requests()) == {"app-0", "app-1"}
    assert beat.orphans == frozenset()
    assert a.leases()["d/app-1"][:2] == ("a", 1)
    time.sleep(1.2)
    assert b.heartbeat({}, {}).orphans == {"d/app-1", "d/app-3"}  # app-2 is finished
    a.close()
    b.close()


def test_an_agent_that_does_not_judge_takes_no_expired_lease_and_hears_no_orphan(
    state_url: str,
) -> None:
    """Not judging (the server was just away from it): another agent's expired lease is not
    taken, no orphan is named and nothing adopted; a new application or its own still is."""
    a = PostgresState(state_url, owner="a", lease_seconds=1.0)
    b = PostgresState(state_url, owner="b", lease_seconds=1.0)
    token = a.acquire("d/app-1")
    assert token is not None
    assert len(a.claim("d/app-1", list(sample_run_events(2)), token=token)) == 2
    time.sleep(1.3)  # a's lease expires, a looks silent
    assert b.acquire("d/app-1", steal=False) is None
    beat = b.heartbeat({}, {}, judge=False)
    assert (beat.orphans, beat.adopted) == (frozenset(), ())
    assert b.acquire("d/app-2", steal=False) == 1  # nobody's yet
    assert a.heartbeat({"d/app-1": token}, {}).held == {"d/app-1"}  # a renews in time
    assert a.acquire("d/app-1", steal=False) == token
    assert b.acquire("d/app-1") is None  # held again
    a.close()
    b.close()


def test_a_silent_agents_unsettled_events_are_adopted_once(
    state_url: str, postgres_server: Postgres
) -> None:
    """Events an agent claimed and never recorded an outcome for are adopted, once, by the
    first other agent to beat after it fell silent; a live agent's are left alone."""
    database = state_url.rsplit("/", 1)[1]
    a = PostgresState(state_url, owner="a", lease_seconds=1.0)
    b = PostgresState(state_url, owner="b", lease_seconds=1.0)
    c = PostgresState(state_url, owner="c", lease_seconds=1.0)
    token = a.acquire("d/app-1")
    assert token is not None
    events = list(sample_run_events(3))
    assert len(a.claim("d/app-1", events, token=token)) == 3
    a.heartbeat({"d/app-1": token}, {("d/app-1", token): 1})  # one event has its outcome
    assert postgres_server.psql("SELECT claimed, resolved FROM terms", database) == "3|1"
    assert b.heartbeat({}, {}).adopted == ()  # a is alive and holds its lease
    time.sleep(1.3)  # a falls silent past its lease
    assert b.heartbeat({}, {}).adopted == (("d/app-1", token, "a", 2),)
    assert c.heartbeat({}, {}).adopted == ()  # adopted once
    # The adopted term is gone; a woken agent's late outcome changes nothing.
    assert postgres_server.psql("SELECT count(*) FROM terms", database) == "0"
    a.heartbeat({}, {("d/app-1", token): 2})
    assert b.heartbeat({}, {}).adopted == ()
    for state in (a, b, c):
        state.close()


def test_a_settled_term_is_forgotten_after_its_lease(
    state_url: str, postgres_server: Postgres
) -> None:
    """A term whose events all have an outcome is pruned once its lease is given up."""
    database = state_url.rsplit("/", 1)[1]
    a = PostgresState(state_url, owner="a")
    token = a.acquire("d/app-1")
    assert token is not None
    a.claim("d/app-1", list(sample_run_events(2)), token=token)
    a.heartbeat({"d/app-1": token}, {("d/app-1", token): 2})
    assert postgres_server.psql("SELECT count(*) FROM terms", database) == "1"  # still held
    a.release("d/app-1", token)
    a.heartbeat({}, {})
    assert postgres_server.psql("SELECT count(*) FROM terms", database) == "0"
    a.close()


def test_calls_from_several_threads_never_interleave(state_url: str) -> None:
    """The loop's worker threads share one connection: claims, heartbeats and the ledger from
    four threads at once all succeed, and every claim is counted in its term."""
    a = PostgresState(state_url, owner="a")
    tokens = {f"d/app-{n}": a.acquire(f"d/app-{n}") for n in range(4)}
    failures: list[BaseException] = []

    def work(key: str, token: int) -> None:
        try:
            for n in range(20):
                a.claim(key, list(sample_run_events(2, app=f"{key}-{n}")), token=token)
                a.heartbeat({key: token}, {})
                a.flush()
        except BaseException as error:  # reported to the test's thread
            failures.append(error)

    threads = [
        threading.Thread(target=work, args=(key, token))
        for key, token in tokens.items()
        if token is not None
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert all(len(a.emitted_for(key)) == 40 for key in tokens)
    a.close()
