"""The heartbeat through a state server's outage, in process, over a fake server: a term the
source no longer follows keeps being renewed while its events are on their way (and its
lease kept), and a round trip that gets no answer neither stalls the heartbeat nor piles
up worker threads; its answer decides once it comes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping

import psycopg
from prometheus_client import CollectorRegistry

from agent.spark.follow.leasing import Leasing
from agent.state.store import Heartbeat, Term
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
        self.taken: set[str] = set()
        self.calls: list[dict[str, int]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.released: list[str] = []
        self.lock = threading.Lock()

    def heartbeat(
        self, held: Mapping[str, int], written: Mapping[tuple[str, int], int]
    ) -> Heartbeat:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self.answer.wait(30)
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
