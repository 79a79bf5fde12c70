"""A loopback HTTP proxy in front of an S3-compatible server (moto) that can drip its LIST
answers: while `dripping` is set, the answer to a LIST request (`list-type=2`) leaves one
byte every `interval` seconds, as a store that is slow or hostile sends it; every other
request, and every LIST while it is not set, passes through whole. It runs in a background
thread with its own asyncio loop, as `tests.tinyproxy` does.

`.lists_started` counts the LIST requests it began to drip, `.lists_answered` those whose
answer went out whole (a client that gave up closed the connection before)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from tests.s3server import S3Server
from tests.tinyproxy import TinyProxy

_TIMEOUT = 30.0  # seconds any one read from either side may take: a stuck test ends


class DripStore(TinyProxy):
    """The proxy's life (a thread, its loop, `with`) is TinyProxy's; what it serves is not."""

    def __init__(self, upstream: S3Server, interval: float = 1.0) -> None:
        super().__init__()
        self.upstream = upstream
        self.upstream_port = int(upstream.endpoint.rpartition(":")[2])
        self.interval = interval
        self.dripping = threading.Event()
        self.lists_started = 0
        self.lists_answered = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            for _ in range(10_000):  # requests on one kept-alive connection
                request = await _message(reader)
                answer = await self._upstream(request)
                if self.dripping.is_set() and b"list-type=2" in request.split(b"\r\n", 1)[0]:
                    self.lists_started += 1
                    sent = 0
                    while sent < len(answer) and self.dripping.is_set():
                        writer.write(answer[sent : sent + 1])
                        await writer.drain()
                        sent += 1
                        await asyncio.sleep(self.interval)
                    writer.write(answer[sent:])  # the rest at once once no longer dripping
                    await writer.drain()
                    self.lists_answered += 1
                else:
                    writer.write(answer)
                    await writer.drain()
        writer.close()

    async def _upstream(self, request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            writer.write(request)
            await writer.drain()
            return await _message(reader, body=not request.startswith(b"HEAD "))
        finally:
            writer.close()


async def _message(reader: asyncio.StreamReader, *, body: bool = True) -> bytes:
    """One HTTP message (head and a Content-Length body) as it came; the head alone for the
    answer to a HEAD request."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _TIMEOUT)
    if not body:
        return head
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    rest = await asyncio.wait_for(reader.readexactly(length), _TIMEOUT) if length else b""
    return head + rest
