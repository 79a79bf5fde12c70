"""How many connections the control socket holds, and for how long.

An allowed peer that opened ~20,000 connections and sent nothing once took every descriptor
the agent had: accept(2) failed with EMFILE and /metrics stopped answering. So:

* a connection waiting for a request line (idle) is closed after `idle_timeout` seconds, and
  an answer the peer does not read within that time closes it too;
* at most `max_connections` are open at once. One more closes the connection that has been
  idle longest, so the request that just came (an operator's `status`) is still answered; when
  none is idle (every one is busy with a request), the newcomer is answered `busy` and closed.

Either way the peer that loses its connection is told why in the protocol's own words (one
JSON line with `ok: false`) before it is closed; the descriptors the socket holds stay below
`max_connections` plus what one pass of the event loop accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Final

import structlog

log = structlog.get_logger("agent.control")

_LOG_EVERY: Final = 60.0  # seconds between two control_connection_limit lines


@dataclass(frozen=True, slots=True)
class ControlLimits:
    """The control socket's limits (fixed in the product; tests make them small)."""

    #: Seconds a connection may wait for a request, or for its answer to be read. A client
    #: of the agent sends its request as soon as it connects, so this is generous.
    idle_timeout: float = 10.0
    #: Open connections at once: far above what operators and `exec` reports need, far below
    #: the 1,024 descriptors a default soft limit gives, which event logs need more.
    max_connections: int = 64


def notice(error: str) -> bytes:
    """An `ok: false` answer line, as the protocol writes answers."""
    return json.dumps({"ok": False, "error": error}).encode() + b"\n"


class Connections:
    """The open connections of one control server: admission, idle tracking, eviction."""

    def __init__(self, limits: ControlLimits) -> None:
        self.limits = limits
        self._open: set[asyncio.StreamWriter] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}  # oldest first
        self._evicted = 0  # since the last log line
        self._refused = 0
        self._logged = -_LOG_EVERY

    @property
    def count(self) -> int:
        return len(self._open)

    def admit(self, writer: asyncio.StreamWriter) -> bool:
        """Count a new connection in, closing the longest-idle one when the limit is reached;
        False (the newcomer was answered `busy` and closed) when none was idle."""
        if len(self._open) >= self.limits.max_connections:
            if self._idle:
                oldest = next(iter(self._idle))
                self._close_now(
                    oldest,
                    f"closed: no request came, and {self.limits.max_connections} connections "
                    "were open",
                )
                self._evicted += 1
            else:
                self._refused += 1
                self._report()
                self._close_now(
                    writer,
                    f"busy: {self.limits.max_connections} requests are in progress; try again",
                )
                return False
            self._report()
        self._open.add(writer)
        return True

    def leave(self, writer: asyncio.StreamWriter) -> None:
        self._open.discard(writer)
        self._idle.pop(writer, None)

    async def read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes:
        """The next request line (b"" at the end of the stream); closes the connection and
        returns b"" when none came within the idle timeout. asyncio.LimitOverrunError when the
        line is longer than the reader's limit: what came of it is left in the reader."""
        self._idle[writer] = None
        try:
            return await asyncio.wait_for(reader.readuntil(b"\n"), self.limits.idle_timeout)
        except asyncio.IncompleteReadError as end:
            return end.partial  # the last request may lack its newline
        except TimeoutError:
            self._close_now(writer, f"closed: no request within {self.limits.idle_timeout:g}s")
            return b""
        finally:
            self._idle.pop(writer, None)

    async def send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        """Write an answer; a peer that does not read it within the idle timeout is cut off
        (ConnectionError), so an unread answer never holds a descriptor."""
        writer.write(data)
        try:
            await asyncio.wait_for(writer.drain(), self.limits.idle_timeout)
        except TimeoutError:
            writer.transport.abort()
            raise ConnectionResetError("the peer did not read its answer") from None

    async def close(self, writer: asyncio.StreamWriter) -> None:
        """Close after what was written has left, within the idle timeout; else cut it off."""
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), self.limits.idle_timeout)
        except TimeoutError:
            writer.transport.abort()
        except ConnectionError:
            pass

    def _close_now(self, writer: asyncio.StreamWriter, why: str) -> None:
        """Tell the peer why, then free the descriptor at once: nothing waits for the peer
        (the line is small and the send buffer of a connection that sent no request is
        empty, so the kernel takes it at once; if it cannot, it is dropped)."""
        self._open.discard(writer)
        self._idle.pop(writer, None)
        with contextlib.suppress(OSError, RuntimeError):
            writer.write(notice(why))
        writer.transport.abort()

    def _report(self) -> None:
        """One log line a minute at most while the limit is being hit."""
        now = time.monotonic()
        if now - self._logged < _LOG_EVERY:
            return
        self._logged = now
        log.warning(
            "control_connection_limit",
            max_connections=self.limits.max_connections,
            idle_closed=self._evicted,
            busy_refused=self._refused,
        )
        self._evicted = self._refused = 0
