"""A real OpenLineage HTTP collector on loopback, for tests and benchmarks.

The server speaks a minimal HTTP/1.1 (keep-alive, Content-Length and chunked request bodies,
gzip request bodies) on 127.0.0.1 with an ephemeral port, in a background thread with its
own asyncio loop, so synchronous tests, asyncio tests and subprocess daemons can all talk to
it. Its answer is switched at run time with `set_behaviour`:

* an int status (201 by default; 200, 204, 3xx with a Location, 400, 401, 413, 500, 503 ...);
* `slow(seconds, status=201)`: answer after a delay;
* ``"hang"``: read the request and never answer (the connection closes when the collector
  stops);
* ``"reset"``: read the request, then close with SO_LINGER 0 so the client sees ECONNRESET;
* ``"close_mid_response"``: send the status line and half of a body, then close;
* `reply(status, retry_after=...)`: a status with a `Retry-After` header;
* `timeline((seconds, behaviour), ..., then=201)`: each behaviour for its seconds, counted from
  when it was set, then `then` (a collector failing for its first 20 s);
* `per_request(choose)`: the behaviour `choose(request)` picks for each request (STARTs late,
  one terminal event reset).

A slow answer stores the request's events when its answer is due, whether or not the client
is still there, as Marquez does: a client that gave up does not keep a request from being
stored after the ones it sent later.

`.events` holds the events of requests answered with 2xx, in arrival order, batch arrays
flattened; `.requests` holds every request read, whatever the answer. Both are plain lists
appended by the server thread; use `wait_for` / `wait_for_requests` to wait for them (from
asyncio code: ``await asyncio.to_thread(collector.wait_for, n)``).

Run it standalone for benchmarks: ``python tests/collector.py --port 5000``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import http
import importlib
import json
import signal
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

LINEAGE_PATH = "/api/v1/lineage"
_T = TypeVar("_T")
#: Seconds a graceful stop at least keeps open connections, turning their requests away.
_GRACE = 0.5


@dataclass(frozen=True, slots=True)
class Slow:
    """Answer `status` after `seconds`."""

    seconds: float
    status: int = 201


def slow(seconds: float, status: int = 201) -> Slow:
    """The behaviour "answer `status` after `seconds`"."""
    return Slow(seconds, status)


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer `status` with a `Retry-After: retry_after` header (seconds or an HTTP date)."""

    status: int
    retry_after: str | None = None


def reply(status: int, retry_after: str | None = None) -> Reply:
    """The behaviour "answer `status`, saying when to come back"."""
    return Reply(status, retry_after)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Each phase's behaviour for its seconds from `began` (monotonic), then `then`."""

    phases: tuple[tuple[float, Behaviour], ...]
    then: Behaviour
    began: float

    def at(self, now: float) -> Behaviour:
        elapsed = now - self.began
        for seconds, behaviour in self.phases:
            if elapsed < seconds:
                return behaviour
            elapsed -= seconds
        return self.then


def timeline(*phases: tuple[float, Behaviour], then: Behaviour = 201) -> Timeline:
    """The behaviour "each of `phases` for its seconds from now, then `then`"."""
    return Timeline(tuple(phases), then, time.monotonic())


@dataclass(frozen=True, slots=True)
class PerRequest:
    """The behaviour `choose` picks for each request."""

    choose: Callable[[Request], Behaviour]


def per_request(choose: Callable[[Request], Behaviour]) -> PerRequest:
    return PerRequest(choose)


@dataclass(frozen=True, slots=True)
class Together:
    """Answer 201 once `count` requests wait for their answer at the same time; 503 to a
    request that waited `patience` seconds without them."""

    count: int
    patience: float = 30.0


def together(count: int, patience: float = 30.0) -> Together:
    """The behaviour "answer only once `count` requests are open at once": a proof of
    overlap that a busy machine cannot fake or fail, unlike timing a slow answer."""
    return Together(count, patience)


Behaviour = (
    int
    | Slow
    | Reply
    | Timeline
    | PerRequest
    | Together
    | Literal["hang", "reset", "close_mid_response"]
)
_NAMED = ("hang", "reset", "close_mid_response")


@dataclass(frozen=True, slots=True)
class Request:
    """One request as read from the wire; `headers` keys are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes  # as received, still compressed when Content-Encoding says so
    content: bytes  # the body after Content-Encoding was undone


class _BadRequest(Exception):
    """A request that cannot be parsed; answered 400 and the connection closed."""


def closed_port() -> int:
    """A loopback TCP port with nothing listening (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _response(status: int, extra: str = "") -> bytes:
    phrase = _phrase(status)
    head = f"HTTP/1.1 {status} {phrase}\r\nContent-Length: 0\r\n{extra}\r\n"
    return head.encode("latin-1")


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    lines = head[:-4].decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise _BadRequest(f"malformed request line {lines[0]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest(f"malformed header line {line!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return method, target, version, headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BadRequest(f"malformed chunk size {size_line!r}") from None
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length", "0")
    if not length.isdigit():
        raise _BadRequest(f"malformed Content-Length {length!r}")
    return await reader.readexactly(int(length)) if length != "0" else b""


def _decode(body: bytes, headers: dict[str, str]) -> bytes:
    encoding = headers.get("content-encoding", "identity").lower()
    if encoding in ("identity", ""):
        return body
    if encoding in ("gzip", "x-gzip"):
        try:
            return gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise _BadRequest(f"bad gzip body: {exc}") from None
    raise _BadRequest(f"unsupported Content-Encoding {encoding!r}")


class Collector:
    """A loopback OpenLineage collector; use as a context manager."""

    def __init__(
        self,
        behaviour: Behaviour = 201,
        *,
        tls: ssl.SSLContext | None = None,
        validate: bool = False,
        port: int = 0,
        record: bool = True,
        continues: bool = True,
    ) -> None:
        self._behaviour = _checked(behaviour)
        #: Whether it answers `Expect: 100-continue` (False: as a server that ignores it).
        self._continues = continues
        self._tls = tls
        self._validate = validate
        self._validator: Callable[[Any], Any] | None = None
        self._requested_port = port
        self._record = record
        #: Events accepted so far; also counted when `record` is False (long benchmarks).
        self.accepted = 0
        self.port = 0
        self.events: list[Any] = []
        self.requests: list[Request] = []
        #: (event, error) for every event that failed `validate_run_event`.
        self.invalid: list[tuple[Any, str]] = []
        #: TCP connections accepted so far.
        self.connections = 0
        #: What the server loop reported: failed TLS handshakes, unparsable requests, bugs.
        self.errors: list[str] = []
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()  # read a request, not answered yet
        self._graceful = False
        self._together = 0  # requests waiting at a `Together` behaviour
        self._met: asyncio.Event | None = None  # set once that many waited at once

    # -- public API ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http(s)://127.0.0.1:PORT``."""
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The lineage endpoint, ``http(s)://127.0.0.1:PORT/api/v1/lineage``."""
        return self.base_url + LINEAGE_PATH

    def set_behaviour(self, behaviour: Behaviour) -> None:
        """Switch how the next requests are answered."""
        self._behaviour = _checked(behaviour)

    def clear(self) -> None:
        """Forget the events, requests and validation errors recorded so far."""
        with self._changed:
            self.events.clear()
            self.requests.clear()
            self.invalid.clear()

    def wait_for(self, n: int, timeout: float = 30.0) -> list[Any]:
        """Block until at least `n` events were accepted; return a copy of `.events`."""
        return self._wait(self.events, n, "events", timeout)

    def wait_for_requests(self, n: int, timeout: float = 30.0) -> list[Request]:
        """Block until at least `n` requests were read; return a copy of `.requests`."""
        return self._wait(self.requests, n, "requests", timeout)

    def start(self) -> Self:
        """Start serving; returns when the port is bound."""
        if self._thread is not None:
            raise RuntimeError("collector already started")
        self._thread = threading.Thread(target=self._run, name="collector", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join()
            raise RuntimeError(f"collector failed to start: {self._start_error}")
        return self

    def stop(self, *, graceful: bool = False) -> None:
        """Close every connection (hung ones too) and stop the thread; idempotent. With
        `graceful`, as Jetty's graceful shutdown (Marquez restarting): stop accepting, answer
        the requests already read, answer 503 with `Connection: close` to any request that
        comes over an open connection meanwhile (for at least `_GRACE` seconds), then close."""
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is None or stopping is None or thread is None:
            return
        self._graceful = graceful
        with contextlib.suppress(RuntimeError):  # the loop already ended
            loop.call_soon_threadsafe(stopping.set)
        thread.join()
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- server thread ---------------------------------------------------------------------

    def _wait(self, seen: list[_T], n: int, what: str, timeout: float) -> list[_T]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(seen) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"collector received {len(seen)} of {n} {what} in {timeout}s"
                    )
                self._changed.wait(left)
            return list(seen)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start() if it happened before binding
            if not self._started.is_set():
                self._start_error = exc
            else:
                self.errors.append(f"collector loop failed: {exc!r}")
        finally:
            self._started.set()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._loop_error)
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(
            self._connection,
            "127.0.0.1",
            self._requested_port,
            ssl=self._tls,
            backlog=512,
            ssl_shutdown_timeout=1.0 if self._tls is not None else None,
        )
        self.port = server.sockets[0].getsockname()[1]
        self._loop = loop
        self._started.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            if self._graceful:
                # Closing an idle kept-alive connection at once would race a request already
                # on its way over it, which no client can tell from one the server stored;
                # Jetty keeps such connections and turns their requests away with 503.
                await asyncio.sleep(_GRACE)
                busy = list(self._busy)
                if busy:
                    await asyncio.wait(busy, timeout=30)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # Failed TLS handshakes land here (the client refused our certificate); keep them for
        # tests to inspect instead of printing them.
        self.errors.append(str(context.get("exception") or context.get("message")))

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            while await self._exchange(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass  # the client went away; that is its right
        except asyncio.CancelledError:
            pass  # the collector is stopping
        except Exception as exc:
            self.errors.append(f"collector connection failed: {exc!r}")
        finally:
            self._tasks.discard(task)
            assert self._stopping is not None
            if self._stopping.is_set() and not self._graceful:
                writer.transport.abort()  # no TLS goodbye with a client that may be gone
            else:
                writer.close()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; False when the connection must end."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            return False  # clean close between requests
        except asyncio.LimitOverrunError:
            writer.write(_response(431, "Connection: close\r\n"))
            return False
        task = asyncio.current_task()
        assert task is not None
        assert self._stopping is not None
        if self._stopping.is_set() and not self._graceful:
            return False  # stopping: a request not begun is not taken (no 100 Continue)
        # From its head on, a request is under way: a graceful stop lets it finish, as a
        # server that sent `100 Continue` has taken it on.
        self._busy.add(task)
        try:
            try:
                method, path, version, headers = _parse_head(head)
                if self._stopping.is_set():  # a graceful stop turns a new request away
                    return await self._turn_away(reader, writer, headers)
                if headers.get("expect", "").lower() == "100-continue" and self._continues:
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                body = await _read_body(reader, headers)
                content = _decode(body, headers)
            except _BadRequest as exc:
                writer.write(_response(400, "Connection: close\r\n"))
                self.errors.append(f"bad request: {exc}")
                return False
            return await self._take(Request(method, path, headers, body, content), writer, version)
        finally:
            self._busy.discard(task)

    async def _turn_away(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]
    ) -> bool:
        """503 and close, as Jetty answers a request that comes during its graceful stop. A
        body already sent is read first: closing over unread bytes resets the connection, and
        the reset can destroy the answer before the client reads it."""
        if headers.get("expect", "").lower() != "100-continue":
            await _read_body(reader, headers)
        writer.write(_response(503, "Connection: close\r\n"))
        await writer.drain()
        return False

    async def _take(self, request: Request, writer: asyncio.StreamWriter, version: str) -> bool:
        """Record and answer one request read whole; False when the connection must end."""
        headers = request.headers
        if self._record:
            with self._changed:
                self.requests.append(request)
                self._changed.notify_all()
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        assert self._stopping is not None
        keep_alive = keep_alive and not self._stopping.is_set()  # a graceful stop's last answer
        return await self._answer(request, writer, keep_alive)

    def _pick(self, request: Request) -> Behaviour:
        """The concrete behaviour (a status, `Slow`, `Reply` or a named one) for `request`."""
        behaviour = self._behaviour
        for _ in range(8):  # a timeline of per-request choices, or the other way round
            if isinstance(behaviour, Timeline):
                behaviour = behaviour.at(time.monotonic())
            elif isinstance(behaviour, PerRequest):
                behaviour = behaviour.choose(request)
            else:
                break
        return behaviour

    async def _answer(
        self, request: Request, writer: asyncio.StreamWriter, keep_alive: bool
    ) -> bool:
        return await self._reply(self._pick(request), request, writer, keep_alive)

    async def _reply(
        self,
        behaviour: Behaviour,
        request: Request,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> bool:
        """Answer `request` as `behaviour` says; False when the connection must end."""
        if behaviour == "hang":
            assert self._stopping is not None
            await self._stopping.wait()
            return False
        if behaviour == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if behaviour == "close_mid_response":
            writer.write(b'HTTP/1.1 201 Created\r\nContent-Length: 64\r\n\r\n{"partial":')
            await writer.drain()
            return False
        status = behaviour
        extra = "" if keep_alive else "Connection: close\r\n"
        if isinstance(behaviour, Slow):
            await asyncio.sleep(behaviour.seconds)
            status = behaviour.status
        elif isinstance(behaviour, Together):
            status = 201 if await self._meet(behaviour) else 503
        elif isinstance(behaviour, Reply):
            status = behaviour.status
            if behaviour.retry_after is not None:
                extra += f"Retry-After: {behaviour.retry_after}\r\n"
        assert isinstance(status, int)
        if 200 <= status < 300 and not self._accept(request):
            status = 400
        if 300 <= status < 400:
            extra += f"Location: {self.base_url}/moved{request.path}\r\n"
        writer.write(_response(status, extra))
        await writer.drain()
        return keep_alive

    async def _meet(self, gate: Together) -> bool:
        """Whether `gate.count` requests came to wait here at once within its patience."""
        if self._met is None:
            self._met = asyncio.Event()
        self._together += 1
        if self._together >= gate.count:
            self._met.set()  # for good: later requests are answered at once
        try:
            async with asyncio.timeout(gate.patience):
                await self._met.wait()
        except TimeoutError:
            return False
        finally:
            self._together -= 1
        return True

    def _accept(self, request: Request) -> bool:
        """Record the events of a request about to be answered 2xx; False if not JSON."""
        try:
            parsed = json.loads(request.content)
        except ValueError as exc:
            self.errors.append(f"body is not JSON: {exc}")
            return False
        events = parsed if isinstance(parsed, list) else [parsed]
        if self._validate:
            for event in events:
                self._check(event)
        with self._changed:
            self.accepted += len(events)
            if self._record:
                self.events.extend(events)
            self._changed.notify_all()
        return True

    def _check(self, event: Any) -> None:
        if self._validator is None:
            # Imported lazily: only collectors that validate pay for loading the schemas.
            self._validator = importlib.import_module("tests.olschema").validate_run_event
        try:
            self._validator(event)
        except Exception as exc:  # SchemaViolation, or a malformed event the validator chokes on
            self.invalid.append((event, str(exc)))


def _checked(behaviour: Behaviour) -> Behaviour:
    if isinstance(behaviour, bool):
        raise ValueError(f"unknown collector behaviour {behaviour!r}")
    if isinstance(behaviour, int):
        if not 100 <= behaviour <= 599:
            raise ValueError(f"HTTP status out of range: {behaviour}")
        return behaviour
    if isinstance(behaviour, Reply):
        _checked(behaviour.status)
        return behaviour
    if isinstance(behaviour, Slow | Timeline | PerRequest | Together) or behaviour in _NAMED:
        return behaviour
    raise ValueError(f"unknown collector behaviour {behaviour!r}")


def main() -> None:
    """Serve on a fixed port until interrupted (for benchmarks against a separate process)."""
    parser = argparse.ArgumentParser(description="Loopback OpenLineage collector.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--status", type=int, default=201)
    args = parser.parse_args()
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    with Collector(args.status, port=args.port, record=False) as collector:
        print(collector.url, flush=True)
        done.wait()
        print(f"{collector.accepted} events, {collector.connections} connections", flush=True)


if __name__ == "__main__":
    main()
