"""This agent's side of a state several agents share (PostgreSQL): its leases on
applications, their terms, and the heartbeat that keeps them.

The heartbeat is a task of its own, so that nothing the source's pass waits for (a large
log, a driver's UI that answers slowly) can let a lease run out. Every third of a lease one
round trip (in a worker thread, as every call to the server) renews all of them, records how
many events of each term got an outcome, and reads back what other agents did: applications
whose owner is gone, stops they recorded, and the events of agents that fell silent without
an outcome, which this agent adopts and counts.

The heartbeat only marks: a lease it finds taken is `Term.lost` (its events stop leaving at
once), orphans and stops wake the source, which lets go of lost applications, lists the
orphans' directories and applies the stops in its own pass, where no worker thread is
reading or translating the same log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Literal

import structlog

from agent.state.store import Leases, StateStore, Term, call
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")


class Leasing:
    """Leases, terms and heartbeats of one agent over one shared state."""

    def __init__(
        self,
        state: StateStore,
        leases: Leases,
        metrics: Metrics,
        *,
        wanted: Callable[[str], bool],
        wake: Callable[[], None],
    ) -> None:
        self.state = state
        self.leases = leases
        self.metrics = metrics
        self._wanted = wanted  # an orphan this agent would take (its directory, not followed)
        self._wake = wake
        self.seconds = leases.lease_seconds
        # Terms of leases taken since this agent started whose outcomes are not all recorded.
        self.terms: dict[tuple[str, int], Term] = {}
        self.orphaned = False  # an application whose owner is gone waits to be listed
        self.stops: Mapping[str, tuple[str, str]] = {}  # stops of the last hour, latest beat

    @property
    def owner(self) -> str:
        return self.leases.owner

    def take_orphaned(self) -> bool:
        """Whether a heartbeat named an orphan since the last call (a listing is due)."""
        orphaned, self.orphaned = self.orphaned, False
        return orphaned

    async def take(self, key: str) -> Term | Literal[False]:
        """A new lease on a log, as its term; False when another agent holds it, another
        agent finished it, or the database refused (the next listing tries again)."""
        since = time.monotonic()  # before the request: the local deadline is never late
        try:
            token = await call(self.state, self.leases.acquire, key)
            if token is None:
                return False
            position = await call(self.state, self.state.position, key)
        except self.state.write_errors:
            return False
        if position is not None and position.finished:  # another agent finished it
            with contextlib.suppress(*self.state.write_errors):
                await call(self.state, self.leases.release, key, token)
            return False
        log.info("lease_taken", key=key, owner=self.owner, token=token)
        term = Term(key, token, since + self.seconds, self.seconds / 3)
        self.terms[(key, token)] = term
        return term

    async def release(self, term: Term) -> None:
        """Give an application up (finished, or this agent stops): another may take it."""
        with contextlib.suppress(*self.state.write_errors):
            await call(self.state, self.leases.release, term.key, term.token)

    async def run(self, held: Callable[[], list[Term]], stop: asyncio.Event) -> None:
        """Beat every third of a lease until `stop`."""
        while not stop.is_set():
            try:
                await self.beat(held())
            except Exception as error:  # a bug must not let every lease run out unsaid
                log.error("heartbeat_failed", error=repr(error), exc_info=error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.seconds / 3)

    async def beat(self, held: list[Term]) -> None:
        """One heartbeat for the leases `held` (see the module's docstring)."""
        now = time.monotonic()
        written = {
            (term.key, term.token): term.resolved - term.written
            for term in self.terms.values()
            if term.resolved > term.written
        }
        try:
            beat = await call(
                self.state,
                self.leases.heartbeat,
                {term.key: term.token for term in held},
                written,
            )
        except self.state.write_errors:
            # Not renewed: the events wait (`Term.holds`), claims are fenced, and a lease
            # taken meanwhile is found lost at the next answer.
            return
        for ident, count in written.items():
            self.terms[ident].written += count
        for term in held:
            if term.key in beat.held:
                term.deadline = now + self.seconds
            else:
                term.lost = True
        for ident, term in list(self.terms.items()):
            if term.done and (term.lost or term not in held):
                del self.terms[ident]
        for key, token, owner, events in beat.adopted:
            self.metrics.handed_over.inc(events)
            log.warning(
                "events_handed_over",
                key=key,
                token=token,
                owner=owner,
                events=events,
                detail="an agent fell silent with events whose outcome it never recorded: "
                "the collector may have them; counted here, never sent again",
            )
        news = beat.stops.keys() - self.stops.keys()
        self.stops = beat.stops
        if any(self._wanted(key) for key in beat.orphans):
            self.orphaned = True
        if news or self.orphaned or any(term.lost for term in held):
            self._wake()
