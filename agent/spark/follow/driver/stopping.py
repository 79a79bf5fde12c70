"""Which process `job stop` signals, and what it says when it cannot tell or may not.

A driver on this node is found by the log it holds open when the agent may read the
driver's /proc/PID/fd (the same user, or root). Under the shipped unit Spark runs as another
user: the driver is then the one SparkSubmit JVM of the log's owner that started just before
the application's submission time (both from /proc and the log, readable by every user);
two candidates are refused rather than guessed. Signalling another user's process needs
CAP_KILL. Drivers in a cluster (YARN, Kubernetes, a standalone master's cluster mode) are
stopped through their cluster manager, which the message names with the command or page to
use (the agent kills nothing through a manager: that needs the manager's own authority).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Sequence
from typing import Final

from agent.errors import ControlError
from agent.spark.follow.driver import manager, procfs, rest
from agent.spark.follow.driver.alive import owner
from agent.spark.follow.driver.facts import DriverFacts
from agent.spark.follow.driver.manager import ManagerSettings

#: A SparkSubmit JVM sets spark.app.submitTime within seconds of its start; /proc's start
#: time is exact to the clock tick, the boot time it counts from to the second.
BEFORE_SUBMIT_MS: Final = 15_000
AFTER_SUBMIT_MS: Final = 2_000
HELP: Final = "see docs/operations/commands.md, 'Stopping a job'"

_ELSEWHERE: Final = {
    "yarn": "stop it with `yarn application -kill {app}`",
    "kubernetes": "stop it with `spark-submit --kill` or by deleting its driver pod",
    "standalone": "stop it with the (kill) link beside it on its master's web UI{ui}, or "
    "for a cluster-mode driver with `spark-class org.apache.spark.deploy.Client kill "
    "MASTER_URL DRIVER_ID`",
}


def driver_pids(
    facts: DriverFacts,
    paths: Sequence[str],
    app_id: str,
    *,
    managers: ManagerSettings = manager.DEFAULTS,
) -> tuple[int, ...]:
    """The driver process(es) of the application whose log is at `paths` (blocking);
    ControlError saying why when there is none the agent can name."""
    held = procfs.holders(paths)
    if held.pids:
        return held.pids
    if facts.host is not None and not rest.is_local(facts.host):
        raise ControlError(
            f"application {app_id}: its driver runs on {facts.host}, not on this node; "
            + _elsewhere(facts, app_id, managers)
        )
    uid = owner(paths)
    if uid is None:
        raise ControlError(f"application {app_id}: its event log is gone")
    if facts.submit_time_ms is None:
        raise ControlError(
            f"application {app_id}: no process the agent may inspect holds its event log, "
            "and the log has no submission time to match its driver by; stop it as the "
            f"driver's user (uid {uid}) on this node ({HELP})"
        )
    submitted = facts.submit_time_ms
    candidates = sorted(
        pid
        for pid, started in procfs.spark_drivers(uid)
        if submitted - BEFORE_SUBMIT_MS <= started <= submitted + AFTER_SUBMIT_MS
    )
    if len(candidates) == 1:
        return (candidates[0],)
    if not candidates:
        raise ControlError(
            f"application {app_id}: no SparkSubmit process of uid {uid} on this node started "
            "when it was submitted (it runs elsewhere, in a JVM not started by spark-submit, "
            f"or is hidden from the agent by ProtectProc=); {_elsewhere(facts, app_id, managers)}"
        )
    otherwise = through_manager(facts, app_id, managers)
    raise ControlError(
        f"application {app_id}: SparkSubmit processes {', '.join(map(str, candidates))} of "
        f"uid {uid} all started when it was submitted; the agent does not guess which to "
        "stop: stop it from its driver's node as its user"
        + (f", or {otherwise}" if otherwise else "")
    )


def signal_all(pids: Iterable[int], signum: int, *, otherwise: str = "") -> None:
    """Signal every process; one that is gone already is skipped. ControlError when the
    agent may not signal one (another user's driver, no CAP_KILL), ending with `otherwise`
    (what else stops it) when given."""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue
        except PermissionError:
            raise ControlError(
                f"cannot signal driver pid {pid}: it belongs to another user and the agent "
                f"(uid {os.geteuid()}) lacks CAP_KILL ({HELP})"
                + (f"; without it, {otherwise}" if otherwise else "")
            ) from None


def terminate(pids: Iterable[int], *, otherwise: str = "") -> None:
    """SIGTERM: Spark's shutdown hook then writes ApplicationEnd."""
    signal_all(pids, signal.SIGTERM, otherwise=otherwise)


def through_manager(
    facts: DriverFacts, app_id: str, managers: ManagerSettings = manager.DEFAULTS
) -> str:
    """How the application's cluster manager stops it ("" for local mode or no manager): for
    a driver on this node that the agent may not signal."""
    if facts.deploy_mode not in _ELSEWHERE:
        return ""
    return _elsewhere(facts, app_id, managers)


def _elsewhere(facts: DriverFacts, app_id: str, managers: ManagerSettings) -> str:
    hint = _ELSEWHERE.get(facts.deploy_mode)
    if hint is None:
        return f"stop it on its driver's node ({HELP})"
    masters = (
        manager.endpoints(facts.manager, managers) if facts.deploy_mode == "standalone" else []
    )
    ui = f" (http://{masters[0].shown}/)" if masters else ""
    return hint.format(app=app_id, ui=ui)
