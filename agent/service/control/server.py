"""The control socket behind `lineage-agent status`, `describe APP_ID`, `job stop APP_ID` and
`exec` (which reports how the command it ran ended: `exec_end`).

The server reads the running agent through `AgentView` (the daemon implements it) and acts on
applications through the source's `ApplicationControl`; it knows neither class.

Protocol: a unix stream socket (mode 0660, in the runtime directory); the client sends one
JSON object per line ({"command": "status"} ...) and reads one JSON object back per line.
Answers have `ok: true` or `ok: false` with an `error` text. The peer's uid comes from
SO_PEERCRED: only root, the agent's own user and members of the socket's group are served,
whatever the file mode says, and `job stop` and `exec_end` record that uid as who asked.
A request line longer than MAX_REQUEST bytes is answered `request too large`; how many
connections are held and for how long is `connections.ControlLimits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import grp
import json
import math
import os
import pwd
import re
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from agent import __version__
from agent.config.model import AgentConfig
from agent.delivery.pipeline import Pipeline
from agent.errors import ControlError
from agent.service.control.bind import bind, identity
from agent.service.control.client import MAX_REQUEST
from agent.service.control.connections import Connections, ControlLimits
from agent.source import ApplicationControl, ApplicationStatus
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

SOCKET_MODE = 0o660
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL for `job stop`
MAX_STOP_GRACE = 3600.0  # the largest grace a request may ask for
MAX_STDERR_TAIL = 8192  # characters of a command's stderr a verdict keeps
#: How much of a too-large request line is read and thrown away after the answer, so that a
#: client still sending it gets to read the answer instead of a broken pipe.
DISCARD_LIMIT = 16 * 1024 * 1024
_EXEC_ID = re.compile(r"[0-9a-f]{32}")
_SIGNAL = re.compile(r"SIG[A-Z0-9+-]{1,12}")


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


def _json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value


def peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def user_name(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


class ControlServer:
    """Serves the daemon's state over the control socket."""

    def __init__(self, agent: AgentView, path: str, limits: ControlLimits | None = None) -> None:
        self.agent = agent
        self.path = path
        self._connections = Connections(limits or ControlLimits())
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the bound socket
        self._handlers: dict[str, Callable[[dict[str, Any], int], Awaitable[dict[str, Any]]]] = {
            "status": self._status,
            "describe": self._describe,
            "job_stop": self._job_stop,
            "exec_end": self._exec_end,
        }

    async def start(self) -> None:
        """Bind the socket. Raises StartError when another agent answers on the path (it is
        never taken over), OSError when the path cannot be bound (something else is there)."""
        sock = bind(self.path)
        try:
            self._identity = identity(self.path)
            os.chmod(self.path, SOCKET_MODE)
            # The reader's limit is the request limit: a longer line fails readline at once
            # instead of being buffered whole.
            self._server = await asyncio.start_unix_server(
                self._client, sock=sock, limit=MAX_REQUEST
            )
        except BaseException:
            sock.close()
            self._unlink_own()
            raise

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._unlink_own()

    def bound(self) -> bool:
        """Whether the path still is the socket this server bound (not removed or replaced)."""
        return self._identity is not None and identity(self.path) == self._identity

    def _unlink_own(self) -> None:
        """Remove the path only if it is still the socket this process bound: a socket another
        agent bound there since is never removed."""
        if self.bound():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self._identity = None

    def _allowed(self, uid: int) -> bool:
        if uid in (0, os.getuid()):
            return True
        try:
            group = grp.getgrgid(os.stat(self.path).st_gid)
            user = pwd.getpwuid(uid)
        except (KeyError, OSError):
            return False
        return user.pw_gid == group.gr_gid or user.pw_name in group.gr_mem

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections = self._connections
        if not connections.admit(writer):
            return  # answered `busy` and closed
        sock = writer.get_extra_info("socket")
        try:
            uid = peer_uid(sock)
            if not self._allowed(uid):
                log.warning("control_refused", peer=user_name(uid))
                # Read the request first so the refusal is its answer, not a broken pipe.
                with contextlib.suppress(asyncio.LimitOverrunError):
                    await connections.read_request(reader, writer)
                if not writer.is_closing():
                    await self._answer(writer, {"ok": False, "error": "permission denied"})
                return
            while True:
                try:
                    line = await connections.read_request(reader, writer)
                except asyncio.LimitOverrunError:  # longer than MAX_REQUEST
                    await self._answer(writer, {"ok": False, "error": "request too large"})
                    await _discard_line(reader, connections.limits.idle_timeout)
                    return
                if not line or writer.is_closing():
                    return
                await self._answer(writer, await self._dispatch(line, uid))
        except ConnectionError:
            pass
        finally:
            connections.leave(writer)
            await connections.close(writer)

    async def _dispatch(self, line: bytes, uid: int) -> dict[str, Any]:
        try:
            request = json.loads(line)
            command = request.get("command") if isinstance(request, dict) else None
            handler = self._handlers.get(command) if isinstance(command, str) else None
            if handler is None:
                raise ControlError(f"unknown command; known: {', '.join(self._handlers)}")
            return {"ok": True, **await handler(request, uid)}
        except ControlError as error:
            return {"ok": False, "error": str(error)}
        except ValueError:
            return {"ok": False, "error": "request is not JSON"}

    async def _answer(self, writer: asyncio.StreamWriter, answer: dict[str, Any]) -> None:
        await self._connections.send(writer, json.dumps(_json(answer)).encode() + b"\n")

    # -- commands ----------------------------------------------------------------------------

    async def _status(self, _request: dict[str, Any], _uid: int) -> dict[str, Any]:
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
            **(await self._leases()),
        }

    async def _leases(self) -> dict[str, Any]:
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

    async def _describe(self, request: dict[str, Any], _uid: int) -> dict[str, Any]:
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
                    ledger, emitted, stop = await self._stored(state, app_id, app)
            except TimeoutError:
                raise ControlError(_no_answer()) from None
            except state.write_errors as error:
                raise ControlError(f"the state database did not answer: {error}") from None
        if app is None and not emitted and not ledger:
            raise ControlError(f"unknown application {app_id}: this agent has not seen it")
        return {
            "app_id": app_id,
            "tracked": app is not None,
            "summary": app.summary if app else None,
            "emitted": emitted,
            "deliveries": ledger,
            "health": agent.health.get(app_id).as_dict(),
            "stop": stop,
        }

    @staticmethod
    async def _stored(
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

    async def _exec_end(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        """How a command run by `lineage-agent exec` ended: kept in the state database until
        its applications end (see `agent.spark.verdicts`)."""
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
        log.info(
            "exec_verdict",
            exec_id=exec_id,
            status=status,
            signal=signame,
            requested_by=who,
            applications=app_ids,
            recorded=recorded,
        )
        return {"exec_id": exec_id, "recorded": recorded, "applications": app_ids}

    async def _job_stop(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
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


async def _discard_line(reader: asyncio.StreamReader, seconds: float) -> None:
    """Read and drop the rest of a too-large request line: up to its newline, the end of the
    stream, DISCARD_LIMIT bytes or `seconds`, whichever comes first."""
    dropped = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while dropped < DISCARD_LIMIT:
                chunk = await reader.read(MAX_REQUEST)
                if not chunk or b"\n" in chunk:
                    return
                dropped += len(chunk)


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
