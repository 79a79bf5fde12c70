"""The heartbeat through a state server's outage, in process, over a fake server: a term the
source no longer follows keeps being renewed while its events are on their way (and its
lease kept), and a round trip that gets no answer neither stalls the heartbeat nor piles
up worker threads; its answer decides once it comes, and a slow answer still opens a window
for the events."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
from prometheus_client import CollectorRegistry

from agent.spark.follow.leasing import Leasing
from agent.state.store import Heartbeat, Outcomes, Term, Tokens
from agent.telemetry.metrics import Metrics
from tests.waits import until

LEASE = 0.6


class FakeServer:
    """Leases that `heartbeat` renews (keys in `taken` are another agent's); `answer`
    cleared makes every round trip wait, as a stopped server does."""

    remote = True
    write_errors: tuple[type[Exception], ...] = (psycopg.Error,)
    owner = "a"
    lease_seconds = LEASE

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.answer.set()
        self.delay = 0.0  # seconds every answer takes (a busy server)
        self.refuse = False  # every round trip fails at once (a stopped server)
        self.judged: list[bool] = []  # `judge` of each round trip
        self.taken: set[str] = set()
        self.calls: list[dict[str, int]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.released: list[str] = []
        self.lock = threading.Lock()

    def heartbeat(self, held: Tokens, written: Outcomes, *, judge: bool = True) -> Heartbeat:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self.answer.wait(30)
            time.sleep(self.delay)
            if self.refuse:
                raise psycopg.OperationalError("connection refused")
            self.judged.append(judge)
            self.calls.append(dict(held))
            return Heartbeat(frozenset(held.keys() - self.taken), frozenset(), ())
        finally:
            with self.lock:
                self.in_flight -= 1

    def release(self, key: str, token: int) -> None:
        self.released.append(key)


def leasing(server: FakeServer) -> Leasing:
    return Leasing(
        server,  # type: ignore[arg-type]
        server,  # type: ignore[arg-type]
        Metrics(CollectorRegistry()),
        wanted=lambda key: False,
        wake=lambda: None,
    )


def term(key: str, claimed: int) -> Term:
    made = Term(key, 1, time.monotonic() + LEASE, LEASE / 3)
    made.claimed = claimed
    return made


async def test_a_finished_applications_term_is_renewed_until_its_events_have_an_outcome() -> None:
    server = FakeServer()
    leases = leasing(server)
    finished = term("finished", claimed=2)
    leases.terms[("finished", 1)] = finished
    stop = asyncio.Event()
    beats = asyncio.create_task(leases.run(list, stop))  # the source follows nothing
    await asyncio.sleep(0)  # the heartbeat runs
    try:
        await leases.release(finished)  # the source let go: its events are still queued
        assert server.released == []  # kept, not given to another agent under them
        # Beats, not a guessed time: renewed twice and holding (a term not renewed lapses
        # after one lease and never holds again).
        await until(lambda: server.calls.count({"finished": 1}) >= 2 and finished.holds())
        assert not finished.lost
        finished.resolved = 2  # both delivered: the next beat gives the lease up
        await until(lambda: server.released == ["finished"])
        count = len(server.calls)
        await until(lambda: len(server.calls) >= count + 2)  # two more beats
        assert all("finished" not in held for held in server.calls[count:])
    finally:
        stop.set()
        await beats


async def test_a_term_taken_meanwhile_is_found_lost_even_when_not_followed() -> None:
    server = FakeServer()
    leases = leasing(server)
    given_up = term("gone", claimed=1)
    leases.terms[("gone", 1)] = given_up
    server.taken.add("gone")
    await leases.beat([])
    assert given_up.lost


async def test_a_round_trip_without_answer_neither_stalls_the_heartbeat_nor_piles_up() -> None:
    server = FakeServer()
    leases = leasing(server)
    held = term("held", claimed=1)
    leases.terms[("held", 1)] = held
    server.answer.clear()  # the server stops answering
    stop = asyncio.Event()
    beats = asyncio.create_task(leases.run(lambda: [held], stop))
    try:
        await asyncio.sleep(LEASE * 10)  # ten leases without an answer
        await asyncio.wait_for(leases.beat([held]), LEASE)  # a beat ends, bounded
        assert server.most_in_flight == 1  # one round trip waits, no other piles up
        assert not held.holds() and not held.lost  # undecided: its events wait
        server.answer.set()  # the server answers again
        began = time.monotonic()
        while not held.holds():
            # Bounded by the hang it guards against (no decision ever), with the margin a
            # busy machine needs: fifty leases.
            assert time.monotonic() - began < LEASE * 50, "no decision after the outage"
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        server.answer.set()
        await beats
    assert not held.lost


async def test_answers_slower_than_a_third_of_a_lease_still_let_the_events_leave() -> None:
    """Every answer takes half a lease: each one, used as it comes, renews the lease from its
    request's start, so the events get a window (kept for the next beat, none would)."""
    server = FakeServer()
    server.delay = LEASE / 2  # past the beat's wait (a third), inside the lease less the margin
    leases = leasing(server)
    held = term("held", claimed=1)
    leases.terms[("held", 1)] = held
    stop = asyncio.Event()
    beats = asyncio.create_task(leases.run(lambda: [held], stop))
    try:
        await asyncio.sleep(LEASE)  # the first deadline, from the take, is past
        await until(held.holds, LEASE * 50)  # a window within fifty leases
    finally:
        stop.set()
        await beats
    assert not held.lost


async def test_a_term_taken_while_a_round_trip_waits_is_renewed_after_its_answer() -> None:
    """A lease taken while the heartbeat waits for an answer (after a pause of the server)
    has no events yet, and the beat's view of what the source holds predates it: it is kept
    and renewed once the source let it go with events on their way (forgotten, they would
    wait forever)."""
    server = FakeServer()
    leases = leasing(server)
    server.answer.clear()  # the server pauses
    held: list[Term] = []
    stop = asyncio.Event()
    beats = asyncio.create_task(leases.run(lambda: list(held), stop))
    try:
        await until(lambda: server.in_flight == 1)  # a round trip waits
        await asyncio.sleep(LEASE)  # past the beat's wait: its answer will come late
        taken = leases.terms[("new", 1)] = term("new", claimed=0)  # as `take` records it
        held.append(taken)
        server.answer.set()  # the server resumes: the late answer is used
        await until(lambda: len(server.calls) >= 2)  # the next beat: the late answer was used
        assert ("new", 1) in leases.terms
        taken.claimed = 1  # the source claims an event, finishes and lets go
        held.clear()
        await until(lambda: {"new": 1} in server.calls and taken.holds())
        assert not taken.lost
    finally:
        stop.set()
        server.answer.set()
        await beats


async def test_after_an_outage_others_are_judged_gone_only_a_lease_after_answers_came_back() -> (
    None
):
    """A refused round trip stops this agent judging others gone (taking their expired
    leases, orphans, adoption); it judges again one lease after the first answer on time."""
    server = FakeServer()
    leases = leasing(server)
    await leases.beat([])
    assert leases.judging and server.judged == [True]
    server.refuse = True  # the server stops
    await leases.beat([])
    assert not leases.judging
    server.refuse = False  # back: answered on time, but the others may not have renewed yet
    await leases.beat([])
    assert not leases.judging and server.judged[-1] is False
    await until(lambda: leases.judging)  # a lease later
    await leases.beat([])
    assert server.judged[-1] is True
