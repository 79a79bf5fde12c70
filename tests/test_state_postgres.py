"""State in a real PostgreSQL: schema and migration, credentials that never show, a server
restart survived, leases and fenced writes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.config.redact import redact_url
from agent.errors import StateError
from agent.state.db import LogPosition
from agent.state.pgschema import SCHEMA_VERSION
from agent.state.postgres import LeaseLost, PostgresState
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
    """An agent whose lease expired and was taken cannot claim nor move the position."""
    a = PostgresState(state_url, owner="a", lease_seconds=1.0)
    b = PostgresState(state_url, owner="b", lease_seconds=30.0)
    events = list(sample_run_events(2))
    token = a.acquire("d/app-1")
    assert token is not None
    assert a.claim("d/app-1", events[:1], token=token) == events[:1]
    time.sleep(1.2)  # paused past its lease
    with pytest.raises(LeaseLost):
        a.claim("d/app-1", events, token=token)  # expired: refused even before a takeover
    taken = b.acquire("d/app-1")
    assert taken == token + 1
    with pytest.raises(LeaseLost):
        a.save_position(LogPosition("d/app-1", "/l", None, None, 10, False), token=token)
    assert isinstance(LeaseLost("x"), a.write_errors)
    assert b.claim("d/app-1", events, token=taken) == events[1:]
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
