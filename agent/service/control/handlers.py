"""What the control socket answers: one handler per command (`status`, `describe`, `job_stop`,
`exec_end`), each given the request and the peer's uid, answering a dict or raising
`ControlError` with the words the client prints. The agent is read through `AgentView` (the
daemon implements it) and applications are acted on through the source's `ApplicationControl`;
neither class is known here. A state server that does not answer within STATE_WAIT is said so,
never waited for."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog

from agent import __version__
from agent.config.model import AgentConfig
from agent.delivery.pipeline import Pipeline
from agent.errors import ControlError
from agent.service.control.peers import user_name
from agent.source import ApplicationControl, ApplicationStatus, StoreReport, StoreStatus
from agent.state.reach import Reachable
from agent.state.store import Leases, StateStore, call
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.control")

#: How long `status` and `describe` wait for a state server before they answer without it.
STATE_WAIT = 5.0
#: ... and how long `status` waits for the leases, so that its whole answer comes within
#: STATE_WAIT: a server known not to answer (`agent.state.reach`) is not asked at all.
STATUS_STATE_WAIT = 2.0

STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL for `job stop`
MAX_STOP_GRACE = 3600.0  # the largest grace a request may ask for
MAX_STDERR_TAIL = 8192  # characters of a command's stderr a verdict keeps
_EXEC_ID = re.compile(r"[0-9a-f]{32}")
_SIGNAL = re.compile(r"SIG[A-Z0-9+-]{1,12}")

#: A command's handler: (request, peer uid) -> the answer's fields.
Handler = Callable[[dict[str, Any], int], Awaitable[dict[str, Any]]]


class AgentView(Protocol):
    """What the control socket reads of the running agent."""

    @property
    def phase(self) -> str:
        """starting | running | stopping | stopped | disabled"""

    @property
    def started(self) -> float:
        """Unix time the agent started."""

    @property
    def config(self) -> AgentConfig: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def health(self) -> HealthTracker: ...

    @property
    def pipeline(self) -> Pipeline | None: ...

    @property
    def state_db(self) -> StateStore | None: ...

    @property
    def applications(self) -> ApplicationControl | None:
        """The source's answers about applications, when it follows any."""


class Handlers:
    """The commands of the control socket over one running agent."""

    def __init__(self, agent: AgentView) -> None:
        self.agent = agent
        self.table: Mapping[str, Handler] = {
            "status": self.status,
            "describe": self.describe,
            "job_stop": self.job_stop,
            "exec_end": self.exec_end,
        }

    async def status(self, _request: dict[str, Any], _uid: int) -> dict[str, Any]:
        agent = self.agent
        registry = agent.metrics.registry
        drops: dict[str, dict[str, float]] = {}
        for family in registry.collect():
            if family.name == "lineage_events_dropped_by_reason":
                for sample in family.samples:
                    if sample.name.endswith("_total") and sample.value:
                        transport = sample.labels["transport"]
                        drops.setdefault(transport, {})[sample.labels["reason"]] = sample.value
        pipeline = agent.pipeline
        apps = agent.applications
        stores = _stores(apps)
        return {
            "state": agent.phase,
            "version": __version__,
            "pid": os.getpid(),
            "uptime_seconds": round(time.time() - agent.started, 1),
            "config": agent.config.source,
            "produced": pipeline.produced if pipeline else 0,
            "transports": [
                {
                    "name": name,
                    "depth": d.queue.depth,
                    "capacity": d.queue.capacity,
                    "delivered": d.delivered,
                    "dropped": d.dropped,
                    "dropped_by_reason": drops.get(name, {}),
                    "unconfirmed": d.unconfirmed,
                    "last_error": d.last_error,
                    "last_error_time": d.last_error_time,
                }
                for name, d in (pipeline.snapshot() if pipeline else ())
            ],
            "applications": [
                {
                    "app_id": app.app_id,
                    "log": app.log,
                    "complete": app.complete,
                    "summary": app.summary,
                }
                for app in (apps.applications() if apps else ())
            ],
            **({"stores": [dataclasses.asdict(s) for s in stores]} if stores else {}),
            **(await self.leases()),
        }

    async def leases(self) -> dict[str, Any]:
        """With a state several agents share: this agent's id and who owns what, from the
        database (so any agent tells the same)."""
        state = self.agent.state_db
        if not isinstance(state, Leases):
            return {}
        reach = state.reach.now() if isinstance(state, Reachable) else None
        found = {} if reach is None else {"state_store": dataclasses.asdict(reach)}
        if reach is not None and not reach.reachable:  # answered from memory
            since = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(reach.since or 0))
            error = f"the state database is unreachable since {since}: {reach.error}"
            return {"agent_id": state.owner, **found, "leases_error": error}
        try:
            async with asyncio.timeout(STATUS_STATE_WAIT):
                held = await call(state, state.leases)
        except TimeoutError:
            wait = f"the state database did not answer within {STATUS_STATE_WAIT:g} s"
            return {"agent_id": state.owner, **found, "leases_error": wait}
        except state.write_errors as error:
            return {"agent_id": state.owner, **found, "leases_error": str(error)}
        return {
            "agent_id": state.owner,
            **found,
            "leases": [
                {"key": key, "owner": owner, "token": token, "seconds_left": round(left, 1)}
                for key, (owner, token, left) in sorted(held.items())
            ],
        }

    async def describe(self, request: dict[str, Any], _uid: int) -> dict[str, Any]:
        app_id = _app_id(request)
        agent = self.agent
        apps = agent.applications
        app = apps.application(app_id) if apps else None
        state = agent.state_db
        ledger: list[dict[str, Any]] = []
        emitted: list[dict[str, str]] = []
        stop = None
        if state is not None:
            try:
                async with asyncio.timeout(STATE_WAIT):
                    ledger, emitted, stop = await self.stored(state, app_id, app)
            except TimeoutError:
                raise ControlError(_no_answer()) from None
            except state.write_errors as error:
                raise ControlError(f"the state database did not answer: {error}") from None
        if app is None and not emitted and not ledger:
            raise ControlError(f"unknown application {app_id}: this agent has not seen it")
        # The store its log is on, if any: how fresh the view of it is.
        store = [s for s in _stores(apps) if app and app.log.startswith(f"{s.directory}/")]
        return {
            "app_id": app_id,
            "tracked": app is not None,
            "summary": app.summary if app else None,
            "emitted": emitted,
            "deliveries": ledger,
            "health": agent.health.get(app_id).as_dict(),
            "stop": stop,
            **({"store": dataclasses.asdict(store[0])} if store else {}),
        }

    @staticmethod
    async def stored(
        state: StateStore, app_id: str, app: ApplicationStatus | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, str]], tuple[str, str] | None]:
        """An application's ledger, emitted events and stop request, from the database."""
        ledger = await call(state, state.ledger_for, app_id)
        key = app.key if app else await call(state, state.app_key_for, app_id)
        emitted = []
        if key is not None:
            emitted = [
                {"run_id": r, "job_name": j, "event_type": t, "event_time": e}
                for r, j, t, e in await call(state, state.emitted_for, key)
            ]
        return ledger, emitted, await call(state, state.stop_request, app_id)

    async def exec_end(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        """How a command run by `lineage-agent exec` ended: kept in the state database until
        its applications end (see `agent.spark.follow.verdicts`)."""
        exec_id = _exec_id(request)
        status, signame, tail = _exit_status(request)
        state = self.agent.state_db
        if state is None:
            raise ControlError(
                "no state database is open (the agent is starting, or lineage is disabled)"
            )
        who = user_name(uid)
        try:
            recorded = await call(state, state.record_verdict, exec_id, status, signame, tail, who)
        except state.write_errors as error:
            raise ControlError(f"the state database refused the verdict: {error}") from None
        apps = self.agent.applications
        app_ids = apps.verdict_arrived(exec_id) if apps else []
        log.bind(exec_id=exec_id, status=status, signal=signame, requested_by=who).info(
            "exec_verdict", applications=app_ids, recorded=recorded
        )
        return {"exec_id": exec_id, "recorded": recorded, "applications": app_ids}

    async def job_stop(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        app_id = _app_id(request)
        reason = str(request.get("reason") or "stopped with lineage-agent job stop")
        grace = _grace(request.get("grace", STOP_GRACE))
        apps = self.agent.applications
        if apps is None:
            raise ControlError(f"application {app_id} is not running on this node")
        outcome = await apps.stop_application(
            app_id,
            reason=reason,
            requested_by=user_name(uid),
            grace=grace,
        )
        return {**dataclasses.asdict(outcome), "pids": list(outcome.pids)}


def _stores(apps: ApplicationControl | None) -> list[StoreStatus]:
    """The followed directories on stores, when the source follows any."""
    return list(apps.stores()) if isinstance(apps, StoreReport) else []


def _exec_id(request: dict[str, Any]) -> str:
    exec_id = request.get("exec_id")
    if not isinstance(exec_id, str) or not _EXEC_ID.fullmatch(exec_id):
        raise ControlError("exec_id: expected the 32 hex digits `lineage-agent exec` made")
    return exec_id


def _exit_status(request: dict[str, Any]) -> tuple[int, str | None, str]:
    """(status, signal name, stderr tail) of an `exec_end` request, checked."""
    status, signame = request.get("status"), request.get("signal")
    if not isinstance(status, int) or isinstance(status, bool) or not 0 <= status <= 255:
        raise ControlError(f"status: expected an exit status from 0 to 255, got {status!r}")
    if signame is not None and not (isinstance(signame, str) and _SIGNAL.fullmatch(signame)):
        raise ControlError(f"signal: expected a signal name such as SIGTERM, got {signame!r}")
    tail = request.get("stderr_tail", "")
    if not isinstance(tail, str):
        raise ControlError("stderr_tail: expected text")
    return status, signame, tail[-MAX_STDERR_TAIL:]


def _grace(value: object) -> float:
    """A request's grace: a finite number of seconds from 0 to MAX_STOP_GRACE."""
    seconds = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else -1
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_STOP_GRACE):
        raise ControlError(f"grace: expected seconds from 0 to {MAX_STOP_GRACE:g}, got {value!r}")
    return seconds


def _app_id(request: dict[str, Any]) -> str:
    app_id = request.get("app_id")
    if not isinstance(app_id, str) or not app_id:
        raise ControlError("an application id is required")
    return app_id


def _no_answer() -> str:
    return f"the state database did not answer within {STATE_WAIT:g} s"
