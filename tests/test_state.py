"""The state: emitted-event claims, positions, stop requests, the delivery ledger, in SQLite
and (the tests taking `open_store`) in PostgreSQL too."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.delivery.envelope import Envelope
from agent.errors import StateError
from agent.state.db import LogPosition, StateDB
from agent.state.postgres import PostgresState
from agent.state.sqlschema import SCHEMA_VERSION
from agent.state.store import StateStore
from agent.testing import sample_run_events

Opener = Callable[..., StateStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens the same state again and again: a SQLite state directory or a PostgreSQL
    database (a fresh one per test, the session's server)."""
    if request.param == "sqlite":
        return lambda **options: StateDB(tmp_path, **options)
    url = request.getfixturevalue("state_url")
    return lambda **options: PostgresState(url, owner="agent-1", **options)


def test_claim_returns_each_event_once_across_reopen(open_store: Opener) -> None:
    """An event claimed once is never claimed again, also after the database is reopened."""
    events = list(sample_run_events(4))
    db = open_store()
    assert db.claim("app", events[:3]) == events[:3]
    db.close()
    db = open_store()
    assert db.claim("app", events) == [events[3]]
    assert [row[2] for row in db.emitted_for("app")] == ["START", "COMPLETE", "START", "COMPLETE"]
    db.close()


def test_second_agent_on_state_dir_refused(tmp_path: Path) -> None:
    """Two agents cannot share one state directory."""
    db = StateDB(tmp_path)
    with pytest.raises(StateError) as error:
        StateDB(tmp_path)
    assert str(error.value) == (
        f"{tmp_path}: another lineage-agent is using this state directory "
        f"(lock {tmp_path / 'state.lock'} is held)"
    )
    db.close()


def test_corrupt_database_is_a_clear_error(tmp_path: Path) -> None:
    """A corrupt database file is refused with its path and what to do, never silently reset."""
    (tmp_path / "state.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    with pytest.raises(StateError) as error:
        StateDB(tmp_path)
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'state.sqlite3'}: state database is unusable (")
    assert message.endswith(
        "move the file aside and start again (runs already emitted may then be emitted again)"
    )
    assert (tmp_path / "state.sqlite3").read_bytes().startswith(b"SQLite format 3")


def lose(state_dir: Path, how: str) -> None:
    """Lose the database of a state directory an agent used: removed, truncated to 0 bytes,
    or replaced by a SQLite file without the agent's tables (its -wal and -shm gone too)."""
    path = state_dir / "state.sqlite3"
    for stale in state_dir.glob("state.sqlite3-*"):
        stale.unlink()
    if how == "truncated":
        os.truncate(path, 0)
        return
    path.unlink()
    if how == "schemaless":
        with contextlib.closing(sqlite3.connect(path)) as other:
            other.execute("CREATE TABLE notes (text TEXT)")
            other.commit()


@pytest.mark.parametrize(
    ("how", "found"),
    [
        ("removed", "no file"),
        ("truncated", "an empty file"),
        ("schemaless", "a database without the agent's tables"),
    ],
)
def test_a_database_without_the_agents_tables_is_a_lost_one(
    tmp_path: Path, how: str, found: str
) -> None:
    """Where the lock file shows the directory was used, a database removed, truncated to 0
    bytes or without any of the agent's tables is recreated as lost, and says what it found;
    one with them is not."""
    db = StateDB(tmp_path)
    db.claim("app", list(sample_run_events(1)))
    db.close()
    db = StateDB(tmp_path)
    assert (db.recreated, db.lost_as) == (False, None)
    db.close()
    lose(tmp_path, how)
    db = StateDB(tmp_path)
    assert (db.recreated, db.lost_as) == (True, found)
    assert db.claim("app", list(sample_run_events(1)))  # the agent's tables are there now
    db.close()
    db = StateDB(tmp_path)
    assert (db.recreated, db.lost_as) == (False, None)
    db.close()


@pytest.mark.parametrize("how", ["truncated", "schemaless"])
def test_a_database_without_the_agents_tables_at_a_first_start_is_no_loss(
    tmp_path: Path, how: str
) -> None:
    """Without the lock file an empty or foreign database is a first start, as no database is."""
    (tmp_path / "state.sqlite3").write_bytes(b"")
    lose(tmp_path, how)
    db = StateDB(tmp_path)
    assert (db.recreated, db.lost_as) == (False, None)
    db.close()


def test_positions_and_stops_round_trip(open_store: Opener) -> None:
    """Positions and stop requests survive a reopen."""
    db = open_store()
    db.save_position(LogPosition("d/app-1", "/logs/app-1.zstd", 1, 2, 300, True))
    db.record_stop("app-1", "maintenance", "uid 0")
    db.close()
    db = open_store()
    assert db.position("d/app-1") == LogPosition("d/app-1", "/logs/app-1.zstd", 1, 2, 300, True)
    assert db.finished_keys() == {"d/app-1"}
    assert db.stop_request("app-1") == ("maintenance", "uid 0")
    assert db.stop_request("app-2") is None
    db.close()


def test_resume_points_round_trip(open_store: Opener) -> None:
    """Each store directory's resume point survives a reopen; a new one replaces it."""
    db = open_store()
    assert db.resume_point("s3a://b/logs") is None
    db.save_resume_point("s3a://b/logs", "app-20260101000000-0001")
    db.save_resume_point("s3a://b/logs", "eventlog_v2_app-20260101000000-0002/")
    db.save_resume_point("s3a://b/other", "local-1")
    db.close()
    db = open_store()
    assert db.resume_point("s3a://b/logs") == "eventlog_v2_app-20260101000000-0002/"
    assert db.resume_point("s3a://b/other") == "local-1"
    db.close()


def test_a_first_schema_gets_the_resume_points_in_place(tmp_path: Path) -> None:
    """A database of schema version 1 (no resume points) gets their table at the next start,
    its positions kept, and records the version it now has."""
    StateDB(tmp_path).close()
    with contextlib.closing(sqlite3.connect(tmp_path / "state.sqlite3")) as first:
        first.execute("DROP TABLE resume_points")
        first.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        first.execute("INSERT INTO logs VALUES ('d/app-1', '/l', NULL, NULL, 5, 1, 0)")
        first.commit()
    db = StateDB(tmp_path)
    assert db.finished_keys() == {"d/app-1"} and not db.recreated
    db.save_resume_point("s3a://b/logs", "local-1")
    assert db.resume_point("s3a://b/logs") == "local-1"
    db.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "state.sqlite3")) as again:
        version = again.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)


def test_ledger_records_outcomes_and_stays_bounded(open_store: Opener) -> None:
    """The ledger keeps each outcome with its digest, and forgets the oldest past its bound."""
    db = open_store(ledger_rows=5)
    for i in range(8):
        envelope = Envelope(b"{}", f"run-{i}", "START", "app-1", f"digest-{i}", 0.0)
        db.record(
            envelope, "http", "unconfirmed" if i % 2 else "delivered", "timeout" if i % 2 else None
        )
    rows = db.ledger_for("app-1")
    assert [row["digest"] for row in rows] == [f"digest-{i}" for i in range(3, 8)]
    assert rows[0]["outcome"] == "unconfirmed" and rows[0]["reason"] == "timeout"
    db.close()


def test_verdicts_keep_the_first_across_reopen(open_store: Opener) -> None:
    """A verdict of `exec` survives a reopen; a repeat does not replace it."""
    db = open_store()
    assert db.verdict("exec-1") is None
    assert db.record_verdict("exec-1", 3, "SIGQUIT", "tail", "uid 1000")
    assert not db.record_verdict("exec-1", 0, None, "", "uid 1000")
    db.close()
    db = open_store()
    assert db.verdict("exec-1") == (3, "SIGQUIT", "tail", "uid 1000")
    assert db.app_key_for("app-1") is None
    db.close()
