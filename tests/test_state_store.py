"""The state seam: the Spark side holds its work on whatever error the store names refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.spark.follow.claims import Claims
from agent.spark.follow.verdicts import lookup
from agent.state.db import StateDB
from agent.state.store import StateStore
from agent.testing import sample_run_events


class Refused(Exception):
    """A refusal that is not SQLite's, as a server database raises it."""


class RefusingStore(StateDB):
    """A SQLite store whose writes raise a non-SQLite refusal: a server database's outage
    cannot be made on a SQLite file, and the seam must not assume SQLite's error type."""

    write_errors = (Refused,)

    def claim(self, app_key: str, events: Any, *, token: int | None = None) -> list[Any]:
        raise Refused("server closed the connection")

    def verdict(self, exec_id: str) -> tuple[int, str | None, str, str] | None:
        raise Refused("server closed the connection")


def test_claims_hold_events_on_the_stores_own_refusal(tmp_path: Path) -> None:
    """A refusal of the store's own error type holds the events instead of failing the source."""
    store: StateStore = RefusingStore(tmp_path)
    claims = Claims(store)
    assert asyncio.run(claims.claim("app", list(sample_run_events(1)))) is None
    assert claims.refused
    assert lookup(store)("exec-1") is None
    store.close()
