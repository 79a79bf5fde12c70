"""`postgres_server` (session fixture): one throwaway PostgreSQL (tests/pg.py) for the session,
and `state_url` (per test): a fresh database on it for the agent's state, reached with the
password from PGPASSWORD, as libpq's environment gives it.

Registered through `pytest_plugins` in tests/conftest.py; tests/pg.py stays free of pytest.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.pg import Postgres, postgres_skip_reason, running_postgres

_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    reason = postgres_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_postgres() as server:
        yield server


def fresh_database(server: Postgres) -> str:
    """A new, empty database owned by the test user; its name."""
    name = f"state_{next(_numbers)}"
    server.psql(f"CREATE DATABASE {name} OWNER {server.user}", database="postgres")
    return name


def url_of(server: Postgres, database: str) -> str:
    """The database's URL without the password (which comes from the environment)."""
    return f"postgresql://{server.user}@{server.host}:{server.port}/{database}"


@pytest.fixture
def state_url(postgres_server: Postgres, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    return url_of(postgres_server, fresh_database(postgres_server))
