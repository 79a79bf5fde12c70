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

Every term with events still on their way is renewed, whether or not the source still
follows its application (finished, or given up after an error): each one's events wait for
the answer, and the first answer after an outage decides, renewed or lost, however long the
outage lasted. A finished application's lease is released only once its events all have an
outcome (else another agent taking it would leave them lost, sent by nobody): until then
the heartbeat keeps it, and releases it at the first beat after.

A round trip that gets no answer (a server stopped without closing its connections: the
kernel acknowledges, nothing answers, no socket timeout fires) is waited for a third of a
lease; the beats that fall due while it still waits start no other (no worker threads pile
up behind it), and its answer is used the moment it comes: a renewal is good from the
request's start for a lease less the margin, so an answer that came after the beat stopped
waiting still opens a window for the events if it is used at once (kept for the next beat,
an answer slower than a third of a lease would open none, and a busy server would hold
every event back for as long as it stays slow). Such a late answer is logged.

An outage of the server is everyone's: no agent renewed, so every lease may have expired by
the server's clock though its owner lives. An agent judges others gone (takes an application
another agent let expire, hears of orphans, adopts a silent agent's events) only once it has
had answers on time for a whole lease since its last round trip that failed or came late:
by then every live owner has renewed. Without that, the first agent answered after a pause
would take applications from agents whose renewal was a moment behind, and count their
events as handed over while they deliver them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Literal

import structlog

from agent.state.store import Heartbeat, Leases, Outcomes, StateStore, Term, call
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")

#: A heartbeat's round trip still waiting for its answer: (the call, the terms it renews,
#: the terms the source no longer held then, when it started (monotonic), the outcomes it
#: records).
Pending = tuple["asyncio.Future[Heartbeat]", list[Term], "Idents", float, Outcomes]
#: Terms by (key, token).
Idents = frozenset[tuple[str, int]]


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
        self._beating = False  # the heartbeat runs: it keeps what `release` defers
        self._deferred: dict[tuple[str, int], Term] = {}  # released once their events are
        # The round trip still waiting for its answer, with what its beat needs to use it.
        self._call: Pending | None = None
        # From when (monotonic) this agent judges others gone; None until a round trip is
        # answered on time after one that failed or came late (see the module's docstring).
        self._judging_from: float | None = 0.0

    @property
    def owner(self) -> str:
        return self.leases.owner

    @property
    def judging(self) -> bool:
        """Whether this agent may judge other agents gone (see the module's docstring)."""
        return self._judging_from is not None and time.monotonic() >= self._judging_from

    def take_orphaned(self) -> bool:
        """Whether a heartbeat named an orphan since the last call (a listing is due)."""
        orphaned, self.orphaned = self.orphaned, False
        return orphaned

    async def take(self, key: str) -> Term | Literal[False]:
        """A new lease on a log, as its term; False when another agent holds it, another
        agent finished it, or the database refused (the next listing tries again)."""
        since = time.monotonic()  # before the request: the local deadline is never late
        try:
            token = await call(self.state, self.leases.acquire, key, steal=self.judging)
            if token is None:
                return False
            position = await call(self.state, self.state.position, key)
        except self.state.write_errors:
            self.orphaned = True  # list again at the next pass, not at the next rescan
            self._judging_from = None
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
        """Give an application up (finished, or this agent stops): another may take it.
        While the heartbeat runs and events claimed under it are on their way, the lease is
        kept instead (renewed with them) and released by the first beat after they all have
        an outcome."""
        if self._beating and not term.lost and term.resolved < term.claimed:
            self._deferred[(term.key, term.token)] = term
            return
        with contextlib.suppress(*self.state.write_errors):
            await call(self.state, self.leases.release, term.key, term.token)

    async def run(self, held: Callable[[], list[Term]], stop: asyncio.Event) -> None:
        """Beat every third of a lease until `stop`."""
        self._beating = True
        try:
            while not stop.is_set():
                try:
                    await self.beat(held())
                except Exception as error:  # a bug must not let every lease run out unsaid
                    log.error("heartbeat_failed", error=repr(error), exc_info=error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.seconds / 3)
        finally:
            self._beating = False

    async def beat(self, held: list[Term]) -> None:
        """One heartbeat for the leases `held` and every term whose events are still on
        their way (see the module's docstring)."""
        if self._call is not None:
            return  # the last round trip still waits for its answer: no second one
        await self._release_deferred()  # those a late answer made ready
        now = time.monotonic()
        written = {
            (term.key, term.token): term.resolved - term.written
            for term in self.terms.values()
            if term.resolved > term.written
        }
        keys = {term.key: term for term in held}
        for term in self.terms.values():
            if not term.lost and term.resolved < term.claimed and term.key not in keys:
                keys[term.key] = term  # not followed any more, its events on their way
        renewing = list(keys.values())
        # Terms the source let go of before this beat: once all their outcomes are recorded
        # they are forgotten. Not one taken while the round trip waits: the source holds it,
        # though `held` cannot say so (it would be forgotten, and never renewed after).
        let_go = frozenset(ident for ident, term in self.terms.items() if term not in held)
        future = asyncio.ensure_future(
            call(
                self.state,
                self.leases.heartbeat,
                {term.key: term.token for term in renewing},
                written,
                judge=self.judging,
            )
        )
        try:
            beat = await asyncio.wait_for(asyncio.shield(future), self.seconds / 3)
        except TimeoutError:
            # No answer yet (a slow server, or one stopped without closing): the events
            # wait, and the answer is used the moment it comes.
            self._call = (future, renewing, let_go, now, written)
            future.add_done_callback(self._answered_late)
            self._judging_from = None
            return
        except self.state.write_errors:
            # Not renewed: the events wait (`Term.holds`), claims are fenced, and a lease
            # taken meanwhile is found lost at the next answer.
            self._judging_from = None
            return
        if self._judging_from is None:
            self._judging_from = time.monotonic() + self.seconds
        self._use(beat, renewing, let_go, now, written)
        await self._release_deferred()

    def _answered_late(self, future: asyncio.Future[Heartbeat]) -> None:
        """Use a round trip's answer that came after its beat stopped waiting."""
        if self._call is None or self._call[0] is not future:
            return
        _, renewing, let_go, since, written = self._call
        self._call = None
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            took = time.monotonic() - since
            log.warning(
                "heartbeat_late",
                seconds=round(took, 3),
                lease_seconds=self.seconds,
                detail="the state server answered a lease renewal after a third of a lease: "
                "events leave only while the renewed lease has a third of it left",
            )
            try:
                self._use(future.result(), renewing, let_go, since, written)
            except Exception as bug:  # in a callback: said here, not by the loop's handler
                log.error("heartbeat_failed", error=repr(bug), exc_info=bug)
        elif not isinstance(error, self.state.write_errors):  # refused: nothing written
            log.error("heartbeat_failed", error=repr(error), exc_info=error)

    async def _release_deferred(self) -> None:
        """Give up the finished applications whose events all have an outcome now."""
        ready = []
        for ident, term in list(self._deferred.items()):
            if term.lost or term.resolved >= term.claimed:
                del self._deferred[ident]
                if not term.lost:
                    ready.append(term)
        if ready:  # the server just answered; still, never wait on it past a beat
            releases = asyncio.gather(*(self.release(term) for term in ready))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(releases), self.seconds / 3)

    def _use(
        self, beat: Heartbeat, renewing: list[Term], let_go: Idents, now: float, written: Outcomes
    ) -> None:
        """What one heartbeat's answer says: leases renewed or lost, outcomes recorded,
        events handed over, orphans and stops."""
        for ident, count in written.items():
            if ident in self.terms:
                self.terms[ident].written += count
        for term in renewing:
            if term.key in beat.held:
                term.deadline = max(term.deadline, now + self.seconds)
            else:
                term.lost = True
        for ident, term in list(self.terms.items()):
            if term.done and (term.lost or ident in let_go):
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
        if news or self.orphaned or any(term.lost for term in renewing):
            self._wake()
