"""Ending the runs of applications whose driver is gone, and waiting for a stopped one.

Whether a driver is alive is `driver.alive`'s business (every signal the agent may read,
also as another user than Spark); a stale in-progress log whose driver shows no sign of
life ends FAIL, one stopped with `job stop` ends ABORT. `job stop` signals the driver
(`driver.stopping`): SIGTERM (Spark's shutdown hook writes ApplicationEnd), SIGKILL when it
outlives the grace period.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import structlog

from agent.spark.follow.driver import alive, manager, stopping
from agent.spark.follow.driver.manager import ManagerSettings
from agent.spark.follow.driver.outbound import Guard
from agent.spark.follow.followed import Followed

log = structlog.get_logger("agent.spark")

StopLookup = Callable[[str], tuple[str, str] | None]
Event = dict[str, Any]
STOPPED_GRACE: Final = 2.0  # seconds without growth after `job stop` before runs end ABORT


#: Why a driver whose log is on a store is taken as lost once the log is stale.
REMOTE_REASON: Final = alive.REMOTE_REASON


async def look(
    app: Followed, managers: ManagerSettings = manager.DEFAULTS, guard: Guard | None = None
) -> alive.Liveness:
    """Every sign of life of the application's driver, off the event loop. A log on a store
    has its driver on another node: its /proc and ports here say nothing about it, so only its
    UI and its cluster manager are asked (and the log itself tells: staleness, appstatus)."""
    answer = await asyncio.to_thread(
        alive.check,
        app.log.driver,
        app.live_paths(),
        # Before ApplicationStart (a standalone or YARN driver may wait long for executors
        # first), the id the log's name carries, so the driver and its manager can be asked.
        app.log.app_id,
        ui_port=app.ui_port,
        managers=managers,
        remote=app.remote,
        guard=guard,
    )
    app.ui_port = answer.ui_port
    return answer


async def wait_gone(pids: Iterable[int], seconds: float) -> bool:
    """Wait until every process has exited (pidfd readability), at most `seconds`."""
    loop = asyncio.get_running_loop()
    waits: list[asyncio.Future[None]] = []
    fds: list[int] = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        fds.append(fd)
        done: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _resolve, done)
        waits.append(done)
    try:
        if waits:
            await asyncio.wait(waits, timeout=seconds)
        return all(w.done() for w in waits)
    finally:
        for fd in fds:
            loop.remove_reader(fd)
            os.close(fd)


async def end_driver(pids: Sequence[int], grace: float) -> str:
    """After SIGTERM: wait up to `grace` seconds, then SIGKILL; the last signal it needed."""
    if await wait_gone(pids, grace):
        return "SIGTERM"
    stopping.signal_all(pids, signal.SIGKILL)
    await wait_gone(pids, 5.0)
    return "SIGKILL"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def close_dead(
    apps: Iterable[Followed],
    *,
    stale_after: float,
    stops: StopLookup,
    on_lost: Callable[[], object] = lambda: None,
    managers: ManagerSettings = manager.DEFAULTS,
    guard: Guard | None = None,
) -> list[tuple[Followed, list[Event]]]:
    """End the runs of applications whose driver is gone: ABORT after a `job stop` once the
    log stopped growing (a stop recorded before a restart: as soon as no driver is alive),
    FAIL when an in-progress log is stale and no driver is alive (`on_lost` is called then,
    once per application: the metric the alert on lost drivers reads). `guard` bounds the
    requests of the looks (`driver.outbound`)."""
    ended: list[tuple[Followed, list[Event]]] = []
    now = time.monotonic()
    for app in apps:
        complete = app.log.reader.complete
        if app.stop_pending is not None and not app.closed and not complete:
            if now - max(app.stop_pending, app.last_growth) >= STOPPED_GRACE:
                ended.append((app, _close_stopped(app, stops)))
            continue
        translator = app.log.translator
        if not app.closed and not complete and translator.stop_requested:
            # A stop recorded before a restart: it ended the driver, so no stale_after wait.
            if now - app.last_growth < STOPPED_GRACE:
                continue
            if (await look(app, managers, guard)).alive:
                app.last_growth = now  # still going down: look again after STOPPED_GRACE
                continue
            ended.append((app, _close_stopped(app, stops)))
            continue
        if app.closed or complete or now - app.last_growth < stale_after:
            continue
        answer = await look(app, managers, guard)
        if answer.alive:
            app.last_growth = now  # check again after another stale_after
            if app.alive_signal != answer.reason:  # an idle driver is news once per signal
                app.alive_signal = answer.reason
                log.info(
                    "driver_idle_alive",
                    log=app.log.ref.path,
                    app_id=translator.app_id,
                    signal=answer.reason,
                )
            continue
        app.closed = True
        events = app.log.end(
            cause="driver_lost",
            message=f"the driver is gone: the event log has not grown for {stale_after:g}s, "
            + answer.reason,
        )
        on_lost()
        log.warning(
            "driver_lost", log=app.log.ref.path, app_id=translator.app_id, runs_ended=len(events)
        )
        ended.append((app, events))
    return ended


def _close_stopped(app: Followed, stops: StopLookup) -> list[Event]:
    """The driver was stopped from outside and wrote no ApplicationEnd: end runs ABORT."""
    app.closed = True
    request = stops(app.app_id)
    reason = request[0] if request else "stopped from outside"
    events = app.log.end(cause="stopped", message=f"stopped with lineage-agent job stop: {reason}")
    log.info(
        "application_stopped",
        log=app.log.ref.path,
        app_id=app.log.translator.app_id,
        runs_ended=len(events),
    )
    return events
