"""Is the Spark driver of an in-progress log still alive on this node, and stopping it.

Two independent looks, either of which proves life: a process that holds the log file open
(Spark's writer keeps the in-progress file open until it stops; needs permission to read
other processes' /proc/PID/fd, as root or the same user), and the driver UI's REST API on
loopback answering for this application id. Neither works for a driver on another node
sharing the directory over NFS; then staleness alone decides, as documented.

`job stop` signals the processes that hold the log open: SIGTERM (Spark's shutdown hook
writes ApplicationEnd), SIGKILL when they outlive the grace period.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import httpx
import structlog

from agent.errors import ControlError
from agent.spark.followed import Followed

log = structlog.get_logger("agent.spark")

StopLookup = Callable[[str], tuple[str, str] | None]
Event = dict[str, Any]
STOPPED_GRACE: Final = 2.0  # seconds without growth after `job stop` before runs end ABORT


def pids_holding(paths: Iterable[str]) -> list[int]:
    """Other processes with one of `paths` open (this agent reads them too, so it is left
    out); the ones we may not inspect are skipped."""
    wanted = {os.path.realpath(p) for p in paths}
    holders: list[int] = []
    me = str(os.getpid())
    try:
        entries = os.listdir("/proc")
    except OSError:
        return holders
    for entry in entries:
        if not entry.isdigit() or entry == me:
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target in wanted or target.removesuffix(" (deleted)") in wanted:
                holders.append(int(entry))
                break
    return holders


def ui_alive(ui_port: int | None, app_id: str | None, timeout: float = 1.0) -> bool:
    """The driver UI on loopback knows this application (blocking; call from a thread)."""
    if not ui_port or not app_id:
        return False
    url = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app_id}"
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    try:
        return bool(response.json().get("id") == app_id)
    except ValueError:
        return False


def driver_alive(paths: Iterable[str], ui_port: int | None, app_id: str | None) -> bool:
    return bool(pids_holding(paths)) or ui_alive(ui_port, app_id)


def signal_all(pids: Iterable[int], signum: int) -> None:
    """Signal every process; one that is gone already is skipped. ControlError when the
    agent may not signal one (another user's driver, no CAP_KILL)."""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue
        except PermissionError:
            raise ControlError(
                f"cannot signal driver pid {pid}: it belongs to another user and the agent "
                "lacks CAP_KILL (see README, 'Stopping a job')"
            ) from None


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
    signal_all(pids, signal.SIGKILL)
    await wait_gone(pids, 5.0)
    return "SIGKILL"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def close_dead(
    apps: Iterable[Followed], *, stale_after: float, stops: StopLookup
) -> list[tuple[Followed, list[Event]]]:
    """End the runs of applications whose driver is gone: ABORT after a `job stop` once the
    log stopped growing (a stop recorded before a restart: as soon as no driver is alive),
    FAIL when an in-progress log is stale and no driver is alive."""
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
            if await asyncio.to_thread(
                driver_alive, app.log.reader.ref.paths, app.log.ui_port, translator.app_id
            ):
                app.last_growth = now  # still going down: look again after STOPPED_GRACE
                continue
            ended.append((app, _close_stopped(app, stops)))
            continue
        if app.closed or complete or now - app.last_growth < stale_after:
            continue
        alive = await asyncio.to_thread(
            driver_alive, app.log.reader.ref.paths, app.log.ui_port, translator.app_id
        )
        if alive:
            app.last_growth = now  # check again after another stale_after
            continue
        app.closed = True
        events = app.log.end(
            cause="driver_lost",
            message=f"the driver is gone: the event log has not grown for {stale_after:g}s, "
            "no process holds it open and the driver UI does not answer",
        )
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
