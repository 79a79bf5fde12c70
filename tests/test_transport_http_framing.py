"""The HTTP transport's HTTP/1.1 framing against a loopback server that answers from a script.

The collector in `tests.collector` answers one well-formed way; these cases need answers
that collectors are allowed (or known) to give: chunked bodies, interim 1xx answers,
`Connection: close`, HTTP/1.0, idle connections closed by the server, and garbage.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trustme

from agent.config.model import HttpConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.http.transport import HttpTransport
from agent.errors import NotSent, Unconfirmed
from tests.envelopes import start_envelope

Answer = Callable[[int], bytes]  # the answer to the n-th request (0-based) on the server


@dataclass
class Scripted:
    """A loopback server that reads each request whole and writes `answer(n)` back."""

    answer: Answer
    close_after_answer: bool = False
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.requests.append(head + await reader.readexactly(length))
                writer.write(self.answer(len(self.requests) - 1))
                await writer.drain()
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1/lineage"


Serve = Callable[..., Awaitable[Scripted]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Starts scripted servers on loopback and stops them after the test."""
    servers: list[asyncio.Server] = []

    async def start(answer: Answer, *, close_after_answer: bool = False) -> Scripted:
        script = Scripted(answer, close_after_answer)
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
        script.port = server.sockets[0].getsockname()[1]
        servers.append(server)
        return script

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def transports() -> AsyncIterator[list[HttpTransport]]:
    made: list[HttpTransport] = []
    yield made
    for transport in made:
        await transport.aclose()


def envelope(i: int) -> Envelope:
    payload = b'{"eventType":"START","n":%d}' % i
    return start_envelope(payload, f"run-{i}")


def always(answer: bytes) -> Answer:
    return lambda n: answer


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"
)
INTERIM = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"


@pytest.mark.parametrize(
    "answer",
    [CHUNKED, INTERIM, b"HTTP/1.1 204 No Content\r\n\r\n"],
    ids=["chunked", "interim-100", "no-content"],
)
async def test_framed_answers_deliver_and_keep_the_connection(
    serve: Serve,
    transports: list[HttpTransport],
    answer: bytes,
) -> None:
    """Chunked (with extensions and trailers), 1xx-then-final and 204 answers all deliver."""
    server = await serve(always(answer))
    transport = HttpTransport(HttpConfig(endpoint=server.url), token=None)
    transports.append(transport)
    for i in range(3):
        await transport.send([envelope(i)])
    assert len(server.requests) == 3
    assert server.connections == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\naccepted",
        # Keep-alive announced, yet closed right after (as servers with a short idle timeout
        # do between requests): the FIN arrives while the connection is idle.
        b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=["connection-close", "http10-read-to-end", "closed-while-idle"],
)
async def test_connection_the_server_closed_is_replaced(
    serve: Serve, transports: list[HttpTransport], answer: bytes
) -> None:
    """Whenever the server ends the connection after its answer, the next send connects
    again instead of failing on the dead one."""
    server = await serve(always(answer), close_after_answer=True)
    transport = HttpTransport(HttpConfig(endpoint=server.url), token=None)
    transports.append(transport)
    for i in range(3):
        await transport.send([envelope(i)])
        await asyncio.sleep(0.05)
    assert (len(server.requests), server.connections) == (3, 3)


async def test_expired_idle_connection_is_not_reused(
    serve: Serve,
    transports: list[HttpTransport],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection idle past the keep-alive expiry is closed and a new one opened."""
    monkeypatch.setattr("agent.delivery.transports.http.pool._KEEPALIVE_EXPIRY", 0.05)
    server = await serve(always(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"))
    transport = HttpTransport(HttpConfig(endpoint=server.url), token=None)
    transports.append(transport)
    await transport.send([envelope(1)])
    await transport.send([envelope(2)])
    await asyncio.sleep(0.1)
    await transport.send([envelope(3)])
    assert (len(server.requests), server.connections) == (3, 2)


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (b"SPDY/3 200 OK\r\n\r\n", "illegal status line: bytearray(b'SPDY/3 200 OK')"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab",
            "conflicting Content-Length headers",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "illegal chunk header: bytearray(b'zz\\r\\n')",
        ),
    ],
    ids=["status-line", "two-lengths", "chunk-header"],
)
async def test_garbage_answer_is_network_and_connection_dropped(
    serve: Serve,
    transports: list[HttpTransport],
    answer: bytes,
    detail: str,
) -> None:
    """An answer that breaks HTTP/1.1 framing is unconfirmed (`network`), and its connection is
    not reused."""
    good = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
    server = await serve(lambda n: answer if n == 0 else good)
    transport = HttpTransport(HttpConfig(endpoint=server.url, timeout=2.0), token=None)
    transports.append(transport)
    with pytest.raises(Unconfirmed) as caught:
        await transport.send([envelope(1)])
    assert (caught.value.reason, caught.value.detail) == (
        "network",
        f"connection to 127.0.0.1:{server.port} failed mid-request: {detail}",
    )
    await transport.send([envelope(2)])
    assert server.connections == 2


async def test_cancelled_send_closes_its_connection(
    serve: Serve, transports: list[HttpTransport]
) -> None:
    """A send cancelled while waiting for the answer leaves no connection behind for reuse."""
    ok = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
    server = await serve(lambda n: b"" if n == 0 else ok)
    transport = HttpTransport(HttpConfig(endpoint=server.url), token=None)
    transports.append(transport)
    task = asyncio.create_task(transport.send([envelope(1)]))
    while not server.requests:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await transport.send([envelope(2)])
    assert server.connections == 2


async def test_request_head_is_exact(serve: Serve, transports: list[HttpTransport]) -> None:
    """The request is one POST with Host, JSON content type, agent User-Agent and the length."""
    server = await serve(always(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"))
    transport = HttpTransport(HttpConfig(endpoint=server.url + "?tenant=a"), token=None)
    transports.append(transport)
    await transport.send([envelope(7)])
    (request,) = server.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /api/v1/lineage?tenant=a HTTP/1.1"
    headers = dict(line.split(b": ", 1) for line in lines[1:])
    assert headers[b"Host"] == f"127.0.0.1:{server.port}".encode()
    assert headers[b"Content-Type"] == b"application/json"
    assert headers[b"User-Agent"].startswith(b"lineage-agent/")
    assert headers[b"Content-Length"] == str(len(body)).encode()
    assert body == envelope(7).payload


async def test_aclose_is_bounded_when_a_tls_peer_ignores_the_goodbye(tmp_path: Path) -> None:
    """aclose ends by itself (its own wait is about a second) for a TLS peer that never
    answers close_notify, and leaves no task behind."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    stalled = asyncio.Event()
    handlers: set[asyncio.Task[object] | None] = set()

    async def answer_then_stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        socket_side = writer.transport
        assert isinstance(socket_side, asyncio.Transport)
        socket_side.pause_reading()  # the client's close_notify is never read, never answered
        await stalled.wait()
        writer.transport.abort()

    server = await asyncio.start_server(answer_then_stall, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    url = f"https://127.0.0.1:{port}/api/v1/lineage"
    transport = HttpTransport(HttpConfig(endpoint=url, ca_file=str(ca_file)), token=None)
    try:
        await transport.send([envelope(1)])
        # The peer stalls until this test ends: an unbounded aclose would wait that out, and
        # this wait's 30 s tell it apart from the bounded one on a busy machine.
        await asyncio.wait_for(transport.aclose(), 30)
        assert asyncio.all_tasks() - handlers == {asyncio.current_task()}
    finally:
        stalled.set()
        server.close()
        await server.wait_closed()


async def test_a_connection_closed_before_the_body_left_is_not_sent(
    transports: list[HttpTransport],
) -> None:
    """A collector that closes the connection after the request's head, before it asked for
    the body (a restart, an idle timeout), received no event: `NotSent` (`closed`), which the
    pipeline sends again, not unconfirmed."""
    received: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"\r\n\r\n"))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        config = HttpConfig(endpoint=f"http://127.0.0.1:{port}/api/v1/lineage", timeout=2.0)
        transport = HttpTransport(config, token=None)
        transports.append(transport)
        with pytest.raises(NotSent) as caught:
            await transport.send([envelope(1)])
    finally:
        server.close()
        await server.wait_closed()
    assert caught.value.reason == "closed"
    assert caught.value.detail.startswith(f"127.0.0.1:{port} closed the connection: ")
    [head] = received
    assert b"expect: 100-continue" in head.lower()


async def test_a_collector_ignoring_expect_gets_the_body_and_is_asked_no_more(
    serve: Serve, transports: list[HttpTransport]
) -> None:
    """A collector that never answers `100 Continue` still gets the body, after the wait,
    and later requests to it go without `Expect`, at full speed."""
    ok = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
    server = await serve(always(ok))
    transport = HttpTransport(HttpConfig(endpoint=server.url, timeout=1.0), token=None)
    transports.append(transport)
    began = time.monotonic()
    await transport.send([envelope(1)])
    first = time.monotonic() - began
    await transport.send([envelope(2)])
    assert b"expect: 100-continue" in server.requests[0].lower()
    # Without `Expect` there is nothing to wait for: the header, not a timing a busy machine
    # could stretch, shows the second went at full speed.
    assert b"expect:" not in server.requests[1].lower()
    assert first >= 0.5  # the wait is half the timeout, at most a second
