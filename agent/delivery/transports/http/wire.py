"""One HTTP/1.1 connection: h11's state machine over an asyncio stream pair, sending one request
and reading its whole answer, with `Expect: 100-continue` when asked. Knows nothing of pools,
targets or what a failure means for the batch (`pool`, `policy`)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Final

import h11

_READ_SIZE: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class ExpectRule:
    """When a POST says `Expect: 100-continue`: where the round trip it costs buys something.

    The handshake proves a request the collector never read was not sent (the connection
    ends before the body left: `BodyNotSent`). That is worth a round trip on a connection the
    collector has not answered on yet, on one that sat idle long enough for the collector to
    be closing it (an idle timeout, a restart), and for a body so large (a batch) that losing
    it unconfirmed would cost many events and the round trip is small beside sending it. On a
    connection the collector answered on a moment ago it would cost a round trip per request
    (one event per POST: about a quarter of the throughput) and buy almost nothing.
    """

    idle: float = 1.0  # seconds a kept-alive connection sat unused
    body: int = 64 * 1024  # bytes of the request's body

    def wants(self, connection: Connection | None, size: int, now: float) -> bool:
        """Whether the request of `size` bytes over `connection` (None: a new one) asks."""
        return connection is None or size >= self.body or now - connection.idle_since >= self.idle


#: The agent's rule.
EXPECT: Final = ExpectRule()
#: The handshake on every request (the rule before it was limited; for measurements).
EXPECT_ALWAYS: Final = ExpectRule(idle=0.0, body=0)


class Connection:
    """One keep-alive connection: a stream pair and its HTTP/1.1 state machine."""

    __slots__ = ("body_sent", "idle_since", "reader", "wire", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.wire = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.body_sent = False  # of the request under way: before it, nothing was received

    def open(self) -> bool:
        """Whether both directions are still open: a server that closed an idle connection
        has left EOF in the reader by now."""
        return not self.reader.at_eof() and not self.writer.is_closing()

    async def exchange(
        self,
        request: h11.Request,
        body: bytes,
        continue_wait: float | None,
        timer: asyncio.Timeout | None = None,
        later: float = 0.0,
    ) -> tuple[h11.Response, bool]:
        """Send one request and read its whole answer: (the answer's head, whether the
        collector answered `100 Continue` in time). With `continue_wait` the head goes
        first and the body only after `100 Continue`, or after `continue_wait` seconds
        without one; `BodyNotSent` when the connection ends before the body left. Once the
        body leaves, `timer` (the request's timeout) is put off by `later` seconds."""
        wire = self.wire
        continued = False
        self.body_sent = False
        if continue_wait is None:
            self.body_sent = True
            _put_off(timer, later)
            self.writer.write(
                wire.send(request) + wire.send(h11.Data(data=body)) + wire.send(h11.EndOfMessage())
            )
        else:
            try:
                self.writer.write(wire.send(request))
                await self.writer.drain()
                async with asyncio.timeout(continue_wait):
                    event = await self._next()
            except TimeoutError:
                event = None  # the collector does not answer `Expect`: send the body anyway
            except (OSError, h11.ProtocolError) as exc:
                raise BodyNotSent(cause(exc)) from None
            if isinstance(event, h11.Response):  # answered without asking for the body
                self.writer.close()  # the request is unfinished: never reuse the connection
                if 200 <= event.status_code < 300:  # it cannot have the events: not sent
                    raise BodyNotSent(
                        f"it answered {event.status_code} before the body", answered=True
                    )
                return await self._finish(event), False
            if isinstance(event, h11.ConnectionClosed):
                raise BodyNotSent("the collector closed the connection before the body")
            continued = event is not None
            self.body_sent = True
            _put_off(timer, later)
            self.writer.write(wire.send(h11.Data(data=body)) + wire.send(h11.EndOfMessage()))
        await self.writer.drain()
        while True:
            event = await self._next()
            if isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("peer closed connection without an answer")
            if isinstance(event, h11.Response):
                return await self._finish(event), continued
            # A `100 Continue` that came after the body (a late or unasked one): skipped.

    async def _event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        """h11's next event, reading from the stream for as long as it needs data (never
        `NEED_DATA`)."""
        while True:
            event = self.wire.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.wire.receive_data(await self.reader.read(_READ_SIZE))

    async def _next(self) -> h11.Response | h11.InformationalResponse | h11.ConnectionClosed:
        """The next answer head (or the end of the connection); body data is skipped."""
        while True:
            event = await self._event()
            if isinstance(event, h11.InformationalResponse):
                if event.status_code == 100:
                    return event
                # Other 1xx answers (103 Early Hints) are skipped.
            elif isinstance(event, h11.Response | h11.ConnectionClosed):
                return event

    async def _finish(self, response: h11.Response) -> h11.Response:
        """Read the rest of an answer whose head came (its body drained unread)."""
        while True:
            event = await self._event()
            if isinstance(event, h11.EndOfMessage):
                return response
            if isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("peer closed connection without an answer")
            # A `100 Continue` the collector sent when the answer was already on its way,
            # or body data: skipped.

    def reusable(self) -> bool:
        """Ready the connection for its next request; False when it must be closed instead
        (`Connection: close`, HTTP/1.0, an answer read to the end of the stream)."""
        if self.wire.our_state is h11.DONE and self.wire.their_state is h11.DONE:
            self.wire.start_next_cycle()
            return True
        return False

    def close(self) -> None:
        self.writer.close()


class BodyNotSent(Exception):
    """The connection ended before the request's body left: the events were not received.
    `answered`: the collector answered 2xx without asking for the body (it mishandles
    `Expect`, so it is asked no more)."""

    def __init__(self, detail: str, *, answered: bool = False) -> None:
        super().__init__(detail)
        self.answered = answered


def _put_off(timer: asyncio.Timeout | None, later: float) -> None:
    if timer is not None:
        when = timer.when()
        if when is not None:
            timer.reschedule(when + later)


def cause(exc: BaseException) -> str:
    """The most specific description in the exception chain: an OS error text if there is one."""
    for link in _chain(exc):
        if isinstance(link, OSError):
            # asyncio words errno errors its own way ("Connect call failed (...)"); the
            # errno's standard text is what operators search for.
            if link.errno is not None and link.errno > 0:
                return os.strerror(link.errno)
            if link.strerror:  # resolver errors carry negative EAI_* codes
                return link.strerror
    return str(exc) or type(exc).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
