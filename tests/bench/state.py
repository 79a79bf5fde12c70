"""State: claims per second and failover time, PostgreSQL (`state_url`) against SQLite
(`state_dir`), in the same run.

Claims: each claim is one transaction marking an application's START and COMPLETE as emitted
(what the source does per batch), over fresh run ids, on a throwaway local PostgreSQL
(tests/pg.py, fsync off as in the tests) and on a SQLite state directory on the same disk.
With PostgreSQL each claim is fenced by the application's lease and counted in its term, as
the agent claims (the leases are taken before the clock starts).

Failover: the time from an owner's death (SIGKILL of a child process holding the state) to
another agent's first successful write for its application. With PostgreSQL the other agent
polls for the lease every 50 ms and gets it once the dead owner's lease (`state_lease`)
expires; with SQLite the only failover is another agent on the same state directory, which
may open it as soon as the dead one's lock is released.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from agent.state.db import LogPosition
from agent.state.store import Leases, StateStore
from tests.bench.harness import Context, Figure, Result, median


@dataclass(frozen=True)
class Params:
    claims: int = 2000  # transactions, each claiming two events
    rounds: int = 3
    lease: float = 2.0
    failovers: int = 3


FULL = Params()
SMOKE = Params(claims=50, rounds=1, lease=1.0, failovers=1)

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from agent.state.{module} import {cls}
    state = {make}
    {take}
    print("ready", flush=True)
    time.sleep(600)
    """
)


def _claims_per_second(state: StateStore, claims: int, app: str) -> float:
    """Claims per second, each a transaction of one run's START and COMPLETE (fresh ids)."""
    from agent.testing import sample_run_events

    events = list(sample_run_events(2 * claims, app=app))  # START, COMPLETE of each run
    keys = [f"d/{app}-{i}" for i in range(0, len(events) - 1, 2)]
    tokens = {key: state.acquire(key) for key in keys} if isinstance(state, Leases) else {}
    began = time.perf_counter()
    for i, key in zip(range(0, len(events) - 1, 2), keys, strict=True):
        state.claim(key, events[i : i + 2], token=tokens.get(key))
    return claims / (time.perf_counter() - began)


def _holder(code: str, env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError(f"state holder did not start: exit {proc.wait()}")
    return proc


def _failover_pg(url: str, lease: float, env: dict[str, str]) -> float:
    from agent.state.postgres import PostgresState

    key = f"d/app-{time.monotonic_ns()}"
    code = _HOLDER.format(
        module="postgres",
        cls="PostgresState",
        make=f"PostgresState({url!r}, owner='dead', lease_seconds={lease})",
        take=f"assert state.acquire({key!r}) is not None",
    )
    holder = _holder(code, env)
    other = PostgresState(url, owner="other", lease_seconds=lease)
    try:
        holder.kill()
        holder.wait()
        died = time.monotonic()
        deadline = died + lease * 10
        while time.monotonic() < deadline:
            token = other.acquire(key)
            if token is not None:
                other.save_position(_position(key), token=token)
                return time.monotonic() - died
            time.sleep(0.05)
        raise RuntimeError("the lease was never taken over")
    finally:
        other.close()


def _failover_sqlite(directory: Path, env: dict[str, str]) -> float:
    from agent.errors import StateError
    from agent.state.db import StateDB

    code = _HOLDER.format(module="db", cls="StateDB", make=f"StateDB({str(directory)!r})", take="")
    holder = _holder(code, env)
    holder.kill()
    holder.wait()
    died = time.monotonic()
    deadline = died + 30
    while time.monotonic() < deadline:
        try:
            state = StateDB(directory)
        except StateError:
            time.sleep(0.05)
            continue
        state.save_position(_position("d/app"))
        state.close()
        return time.monotonic() - died
    raise RuntimeError("the state directory was never released")


def _position(key: str) -> LogPosition:
    return LogPosition(key, "/logs/" + key, None, None, 100, False)


def run(context: Context) -> Result:
    from agent.state.db import StateDB
    from agent.state.postgres import PostgresState
    from tests.pg import running_postgres
    from tests.pg_plugin import fresh_database, url_of

    params = SMOKE if context.smoke else FULL
    result = Result("state", "python -m tests.bench state")
    root = Path(__file__).resolve().parents[2]
    with running_postgres() as server, tempfile.TemporaryDirectory(dir=context.work) as work:
        env = {**os.environ, "PGPASSWORD": server.password, "PYTHONPATH": str(root)}
        os.environ["PGPASSWORD"] = server.password
        url = url_of(server, fresh_database(server))
        result.setup = {
            "claims": params.claims,
            "events_per_claim": 2,
            "rounds": params.rounds,
            "lease_seconds": params.lease,
            "postgres": server.psql("SHOW server_version"),
        }
        pg_rates, sqlite_rates = [], []
        for n in range(params.rounds):
            pg = PostgresState(url, owner="bench")
            pg_rates.append(_claims_per_second(pg, params.claims, f"bench-{n}"))
            pg.close()
            sqlite = StateDB(Path(work) / f"claims-{n}")
            sqlite_rates.append(_claims_per_second(sqlite, params.claims, f"bench-{n}"))
            sqlite.close()
        result.add(
            Figure(
                "claims_per_second",
                median(pg_rates),
                "claims/s",
                "SQLite state_dir",
                median(sqlite_rates),
                None,
                {"postgres_rounds": pg_rates, "sqlite_rounds": sqlite_rates},
            )
        )
        pg_failovers = [_failover_pg(url, params.lease, env) for _ in range(params.failovers)]
        sqlite_failovers = [
            _failover_sqlite(Path(work) / "failover", env) for _ in range(params.failovers)
        ]
        result.add(
            Figure(
                "failover_seconds",
                median(pg_failovers),
                "s",
                "SQLite: another agent on the same state directory",
                median(sqlite_failovers),
                None,
                {"postgres_runs": pg_failovers, "sqlite_runs": sqlite_failovers},
            )
        )
        os.environ.pop("PGPASSWORD", None)
    return result
