"""The state seam: what the daemon, the Spark source and the control socket need from the
agent's state, whichever database keeps it (SQLite in the state directory, `agent.state.db`;
PostgreSQL at `state_url`, `agent.state.postgres`).

Contract shared by every implementation:

* `claim` is the durability point: an event is recorded as emitted (committed) before it is
  handed to the pipeline, so a crash can lose an event (at-most-once) but never send it twice.
* Writes that the database refuses (locked, disk full, server gone) raise one of
  `write_errors`; the caller holds its events and offers them again later. Nothing else
  escapes a write.
* Recording a ledger outcome never raises; `flush` writes the batch and raises one of
  `write_errors` when refused, keeping the rows (bounded, `ledger_rows_lost` counts the rest).
* A local store (`remote` false: SQLite) is used from the event-loop thread only, every call
  short; a server's (`remote`: PostgreSQL) calls are round trips that may wait seconds on a
  restarting server, so the loop makes them in a worker thread (`call`), and the store
  serializes them itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar, runtime_checkable

from agent.delivery.envelope import Envelope

# The records stay in `db` beside the SQLite schema they mirror (moving them would churn it).
from agent.state.db import LogPosition, LostAs


class LeaseLost(Exception):
    """A fenced write for an application whose lease this agent no longer holds."""


class StateStore(Protocol):
    """Claims of emitted events, log positions, stop requests, verdicts and the ledger."""

    @property
    def remote(self) -> bool:
        """Calls are round trips to a server: the event loop makes them through `call`."""

    @property
    def path(self) -> Path | str:
        """Where the state is, for log lines: a file, or a database URL without its secret."""

    @property
    def write_errors(self) -> tuple[type[Exception], ...]:
        """What a refused write raises: the caller holds its work and tries again later."""

    @property
    def recreated(self) -> bool:
        """The database was lost since an agent last used it (not a first start)."""

    @property
    def lost_as(self) -> LostAs | None:
        """What stood where the lost database was, for the log line."""

    @property
    def opened_ns(self) -> int:
        """When the state was opened (ns since the epoch): logs completed before it are old."""

    @property
    def ledger_rows_lost(self) -> int:
        """Ledger rows forgotten while the database refused them."""

    def close(self) -> None:
        """Write what the ledger still holds if the database lets us, then release it."""

    def file_change(self) -> str | None:
        """ "removed" or "replaced" when the state's file no longer is the one opened."""

    def claim(
        self, app_key: str, events: Sequence[dict[str, Any]], *, token: int | None = None
    ) -> list[dict[str, Any]]:
        """Mark events as emitted and return those that were not emitted before, in order.
        With the `token` of a lease (`Leases`), LeaseLost unless it is still this agent's."""

    def emitted_for(self, app_key: str) -> list[tuple[str, str, str, str]]:
        """(run id, job name, event type, event time) of an application, in time order."""

    def app_key_for(self, app_id: str) -> str | None:
        """The log key under which an application's events were claimed, if any."""

    def position(self, key: str) -> LogPosition | None:
        """How far a log was read, if it was."""

    def save_position(self, position: LogPosition, *, token: int | None = None) -> None:
        """Remember how far a log was read (and whether it is finished); fenced as `claim`."""

    def finished_keys(self) -> set[str]:
        """Keys of the logs read to their end with every terminal event emitted."""

    def resume_point(self, directory: str) -> str | None:
        """The name after which the listing of a directory on a store starts, if one was kept."""

    def save_resume_point(self, directory: str, after: str) -> None:
        """Keep the name after which the next listing of `directory` starts."""

    def record_stop(self, app_id: str, reason: str, requested_by: str) -> None:
        """Remember that an application was asked to stop."""

    def stop_requests(self) -> dict[str, tuple[str, str]]:
        """Every recorded stop: application id -> (reason, requested by)."""

    def stop_request(self, app_id: str) -> tuple[str, str] | None:
        """(reason, requested by) of an application's stop, if one was recorded."""

    def record_verdict(
        self, exec_id: str, status: int, signal: str | None, stderr_tail: str, requested_by: str
    ) -> bool:
        """Keep how a run of `lineage-agent exec` ended; False when it was recorded already."""

    def verdict(self, exec_id: str) -> tuple[int, str | None, str, str] | None:
        """(status, signal, stderr tail, requested by) of that run of `exec`, if it ended."""

    def record(self, envelope: Envelope, transport: str, outcome: str, reason: str | None) -> None:
        """Ledger entry for one event and transport; written in batches by `flush`."""

    def flush(self) -> None:
        """Write the pending ledger rows; on a refusal keep them (bounded) and raise."""

    def ledger_for(self, app_id: str) -> list[dict[str, Any]]:
        """The ledger rows of an application, oldest first."""


P = ParamSpec("P")
T = TypeVar("T")


async def call(state: StateStore, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """One call of the state's from the event loop: in place for a local file (SQLite's
    connection serves the loop's thread only), in a worker thread for a server, so that a
    slow or restarting one never stalls metrics, control or delivery."""
    if state.remote:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return fn(*args, **kwargs)


class Term:
    """This agent's lease on one application as the events claimed under it see it (the
    delivery side's `Fence`): whether they may leave, and how many have an outcome.

    `deadline` (monotonic) is the lease's end by the local clock, taken before the request
    that renewed it, so never later than the server's; events leave only while a `margin`
    of it remains, so one that started to leave is on its way before another agent can own
    the application.
    """

    __slots__ = ("claimed", "deadline", "key", "lost", "margin", "resolved", "token", "written")

    def __init__(self, key: str, token: int, deadline: float, margin: float) -> None:
        self.key = key
        self.token = token
        self.deadline = deadline
        self.margin = margin
        self.lost = False  # another agent owns the application: nothing more leaves
        self.claimed = 0  # events claimed under this lease and handed to the pipeline
        self.resolved = 0  # of those, with an outcome on every transport
        self.written = 0  # of those, recorded in the shared state

    def holds(self) -> bool:
        return not self.lost and time.monotonic() < self.deadline - self.margin

    def settled(self) -> None:
        self.resolved += 1

    @property
    def done(self) -> bool:
        """Every event claimed under it has its outcome recorded in the shared state."""
        return self.written == self.claimed


#: The leases a heartbeat renews: application key -> the token this agent holds.
Tokens = Mapping[str, int]
#: Events that got an outcome since the last heartbeat: (key, token) of their term -> count.
Outcomes = Mapping[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """What one renewal of this agent's leases found in the shared state."""

    held: frozenset[str]  # keys whose leases (with the tokens given) were renewed
    orphans: frozenset[str]  # unfinished logs whose lease expired or was given up
    # (key, token, owner, events) of leases of agents gone silent whose events had no
    # recorded outcome: taken over by this agent, which counts them (`handed_over`).
    adopted: tuple[tuple[str, int, str, int], ...]
    stops: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # the recent ones


@runtime_checkable
class Leases(Protocol):
    """A state several agents share: each application owned by one agent at a time.

    `acquire` gives this agent an application (or renews its lease) and returns the lease's
    fencing token, None while another agent holds it. A claim or position write given that
    token raises LeaseLost once another agent took the application (its token moved on),
    checked by the database in the same transaction as the write.

    Each token is a term: the events claimed under it are counted in the database, and the
    agent adds those that got an outcome (`heartbeat`). When an agent falls silent for a
    lease's length, another adopts its terms' events that have none, and counts them.
    """

    owner: str
    lease_seconds: float

    def acquire(self, app_key: str, *, steal: bool = True) -> int | None:
        """Own an application (see above); without `steal`, only a new one or one of this
        agent's own, never one whose lease another agent let expire."""

    def release(self, app_key: str, token: int) -> None: ...

    def heartbeat(self, held: Tokens, written: Outcomes, *, judge: bool = True) -> Heartbeat:
        """Renew the leases `held`, add `written` to their terms, say this agent is alive,
        and report the stops; with `judge`, also the orphaned applications and the silent
        agents' unsettled events (adopted)."""

    def leases(self) -> dict[str, tuple[str, int, float]]:
        """Every unexpired lease: application key -> (owner, token, seconds left)."""
