"""A real HTTP proxy on loopback for tests: `CONNECT` tunnels and forward requests.

Every host name it is asked for is reached at 127.0.0.1 (the port as asked), so a test can
address the collector by a name nothing else resolves (`collector.invalid`): an event that
arrives proves it went through the proxy. It runs in a background thread with its own
asyncio loop, like `tests.collector`. `require` makes it answer 407 to any request without
that `Proxy-Authorization` value. `.connects` and `.forwards` record what it was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Self
from urllib.parse import urlsplit

_TIMEOUT = 10.0  # seconds any one read may take: a stuck test ends, never hangs


class TinyProxy:
    def __init__(self, require: str | None = None) -> None:
        self.require = require
        self.connects: list[str] = []  # CONNECT authorities
        self.forwards: list[str] = []  # absolute request targets
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(_TIMEOUT):
            raise RuntimeError("proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(_TIMEOUT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_TIMEOUT)

    async def _shutdown(self) -> None:
        """Stop listening and end every connection's task before the loop stops."""
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for _ in range(1000):  # requests on one kept-alive connection
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _TIMEOUT)
                line, *lines = head.decode("latin-1").split("\r\n")
                method, target, _ = line.split(" ", 2)
                headers = {}
                for item in lines:
                    if ":" in item:
                        name, value = item.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                if self.require is not None and headers.get("proxy-authorization") != self.require:
                    writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n")
                    writer.write(b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                    await writer.drain()
                    return
                if method == "CONNECT":
                    await self._tunnel(target, reader, writer)
                    return
                await self._forward(method, target, lines, headers, reader, writer)
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _tunnel(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.connects.append(target)
        port = int(target.rsplit(":", 1)[1])
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                with contextlib.suppress(ConnectionError):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
            finally:
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _forward(
        self,
        method: str,
        target: str,
        lines: list[str],
        headers: dict[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.forwards.append(target)
        parts = urlsplit(target)
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        body = await asyncio.wait_for(
            reader.readexactly(int(headers.get("content-length", "0"))), _TIMEOUT
        )
        kept = [
            item
            for item in lines
            if item
            and item.split(":", 1)[0].strip().lower() not in ("proxy-authorization", "expect")
        ]
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", parts.port or 80)
        try:  # closed whatever happens, also when the proxy is stopped mid-request
            request = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{i}\r\n" for i in kept) + "\r\n"
            up_writer.write(request.encode("latin-1") + body)
            await up_writer.drain()
            answer = await asyncio.wait_for(up_reader.readuntil(b"\r\n\r\n"), _TIMEOUT)
            length = 0
            for item in answer.decode("latin-1").split("\r\n"):
                if item.lower().startswith("content-length:"):
                    length = int(item.split(":", 1)[1])
            rest = await asyncio.wait_for(up_reader.readexactly(length), _TIMEOUT)
        finally:
            up_writer.close()
        writer.write(answer + rest)
        await writer.drain()
