"""A prototype transport for the shipping benchmark only: what one POST costs without httpx.

The agent's `HttpTransport` spends most of its per-request time in httpcore, anyio and h11
(cancel scopes, checkpoints, event objects) rather than in the network. This prototype does
the same job as that transport's one-event-per-POST path on plain asyncio streams: a pool of
keep-alive connections, one pre-built header block plus the body written at once, the status
line and Content-Length of the answer parsed, the body drained, every failure a
`DeliveryError`. It runs through the agent's real Pipeline and Delivery, so the difference to
the `HttpTransport` figure is the transport alone. Plain http only (no TLS, no redirects, no
chunked answers): it measures a proposal, it is not a replacement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from urllib.parse import urlsplit

from agent.envelope import Envelope
from agent.transports.base import DeliveryError

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class LeanHttpTransport:
    """POST each event to an http:// endpoint over pooled asyncio stream connections."""

    name = "http"

    def __init__(self, url: str, *, timeout: float = 3.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"the prototype speaks plain http only, got {url}")
        self._host, self._port = parts.hostname, parts.port or 80
        path = parts.path or "/"
        self._batch_path = path.rstrip("/") + "/batch"
        self._head = self._header_block(path)
        self._batch_head = self._header_block(self._batch_path)
        self._timeout = timeout
        self._idle: list[Connection] = []

    def _header_block(self, path: str) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            "Content-Type: application/json\r\nUser-Agent: lineage-agent-prototype\r\n"
            "Content-Length: "
        ).encode("ascii")

    async def send(self, batch: Sequence[Envelope]) -> None:
        if not batch:
            return
        if len(batch) == 1:
            head, body = self._head, batch[0].payload
        else:
            head = self._batch_head
            body = b"[" + b",".join(envelope.payload for envelope in batch) + b"]"
        connection = self._idle.pop() if self._idle else None
        try:
            async with asyncio.timeout(self._timeout):
                if connection is None:
                    connection = await asyncio.open_connection(self._host, self._port)
                reader, writer = connection
                writer.write(head + str(len(body)).encode("ascii") + b"\r\n\r\n" + body)
                answer = await reader.readuntil(b"\r\n\r\n")
                status, length = _status_and_length(answer)
                if length:
                    await reader.readexactly(length)
        except TimeoutError:
            _close(connection)
            raise DeliveryError("timeout", f"no answer within {self._timeout:g}s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
            _close(connection)
            raise DeliveryError("network", f"{type(error).__name__}: {error}") from None
        self._idle.append(connection)
        if not 200 <= status < 300:
            raise DeliveryError("http_5xx" if status >= 500 else "http_4xx", f"HTTP {status}")

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()


def _status_and_length(head: bytes) -> tuple[int, int]:
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return status, int(value)
    return status, 0


def _close(connection: Connection | None) -> None:
    if connection is not None:
        connection[1].close()
