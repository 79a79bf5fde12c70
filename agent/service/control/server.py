"""The control socket behind `lineage-agent status`, `describe APP_ID`, `job stop APP_ID` and
`exec` (which reports how the command it ran ended: `exec_end`). The requests are answered
by `handlers`; who may ask is `peers`.

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
import json
import os
from typing import Any

import structlog

from agent.errors import ControlError
from agent.service.control.bind import bind, identity
from agent.service.control.client import MAX_REQUEST
from agent.service.control.connections import Connections, ControlLimits
from agent.service.control.handlers import AgentView, Handlers
from agent.service.control.peers import allowed, peer_uid, user_name

log = structlog.get_logger("agent.control")

SOCKET_MODE = 0o660
#: How much of a too-large request line is read and thrown away after the answer, so that a
#: client still sending it gets to read the answer instead of a broken pipe.
DISCARD_LIMIT = 16 * 1024 * 1024


def _json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value


class ControlServer:
    """Serves the daemon's state over the control socket."""

    def __init__(self, agent: AgentView, path: str, limits: ControlLimits | None = None) -> None:
        self.agent = agent
        self.path = path
        self._connections = Connections(limits or ControlLimits())
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the bound socket
        self.handlers = Handlers(agent)

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

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections = self._connections
        if not connections.admit(writer):
            return  # answered `busy` and closed
        sock = writer.get_extra_info("socket")
        try:
            uid = peer_uid(sock)
            if not allowed(uid, self.path):
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
            handler = self.handlers.table.get(command) if isinstance(command, str) else None
            if handler is None:
                raise ControlError(f"unknown command; known: {', '.join(self.handlers.table)}")
            return {"ok": True, **await handler(request, uid)}
        except ControlError as error:
            return {"ok": False, "error": str(error)}
        except ValueError:
            return {"ok": False, "error": "request is not JSON"}

    async def _answer(self, writer: asyncio.StreamWriter, answer: dict[str, Any]) -> None:
        await self._connections.send(writer, json.dumps(_json(answer)).encode() + b"\n")


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
