"""Where a POST goes and the connections that carry it: a `Target` per endpoint, and the `Pool`
that opens connections (directly, through a `CONNECT` tunnel or to a forward proxy, TLS
verified) and keeps at most `capacity` idle ones per target, each for `_KEEPALIVE_EXPIRY`
seconds. Every failure to open a connection is `NotSent`: no byte of an event has left."""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from typing import Final

import httpx

from agent.delivery.transports.http.proxy import Proxy, ProxyRefused, open_tunnel
from agent.delivery.transports.http.wire import Connection, cause
from agent.errors import NotSent

#: Idle connections are dropped before the 5 s idle timeout of common collector servers, so
#: a request is seldom written into a connection the server is just closing (`Expect` makes
#: that case `NotSent` anyway, unless the collector ignores it).
_KEEPALIVE_EXPIRY: Final = 4.0
_CLOSE_WAIT: Final = 1.0  # seconds aclose waits for idle connections to finish closing


@dataclass(frozen=True, slots=True)
class Target:
    """Where one kind of POST goes: the connection's address and the request's first line."""

    host: str  # to connect to (IDNA-encoded, IPv6 without brackets)
    port: int
    tls: bool
    path: bytes  # the request's target: path and query, or the whole URL for a forward proxy
    authority: bytes  # the Host header
    origin: str  # host:port, for error details
    proxy: Proxy | None = None  # the proxy in between, if any

    @classmethod
    def of(cls, url: httpx.URL, proxy: Proxy | None = None) -> Target:
        tls = url.scheme == "https"
        port = url.port or (443 if tls else 80)
        host = url.raw_host.decode("ascii")
        path = url.raw_path
        if proxy is not None and not tls:  # a forward proxy is given the absolute form
            path = f"http://{url.netloc.decode('ascii')}".encode("ascii") + url.raw_path
        return cls(host, port, tls, path, url.netloc, f"{url.host}:{port}", proxy)


class Pool:
    """Idle keep-alive connections per target, and the opening of new ones."""

    def __init__(self, tls: ssl.SSLContext, capacity: int) -> None:
        self._tls = tls
        self._capacity = capacity
        self._idle: dict[Target, list[Connection]] = {}
        self.closed = False

    def checkout(self, target: Target) -> Connection | None:
        """An idle connection to `target` that is still fresh and open, or None."""
        idle = self._idle.get(target)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if now - connection.idle_since < _KEEPALIVE_EXPIRY and connection.open():
                return connection
            connection.close()
        return None

    def checkin(self, target: Target, connection: Connection) -> None:
        """Keep a connection whose exchange ended well for the next request, or close it."""
        idle = self._idle.setdefault(target, [])
        if self.closed or not connection.reusable() or len(idle) >= self._capacity:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    async def connect(self, target: Target) -> Connection:
        """A new connection to `target`; `NotSent` (connect, tls) when there is none."""
        if target.proxy is not None:
            return await self._connect_through(target, target.proxy)
        try:
            if target.tls:
                reader, writer = await asyncio.open_connection(
                    target.host, target.port, ssl=self._tls, server_hostname=target.host
                )
            else:
                reader, writer = await asyncio.open_connection(target.host, target.port)
        except ssl.SSLCertVerificationError as exc:
            raise _unverified(target, exc) from None
        except ssl.SSLError as exc:
            raise NotSent(
                "tls", f"TLS handshake with {target.origin} failed: {exc.reason or exc}"
            ) from None
        except OSError as exc:
            raise NotSent("connect", f"cannot connect to {target.origin}: {cause(exc)}") from None
        return Connection(reader, writer)

    async def _connect_through(self, target: Target, proxy: Proxy) -> Connection:
        """A connection by way of `proxy`: a tunnel with TLS inside for an https collector,
        the proxy itself for an http one. Nothing of an event has left when this fails."""
        try:
            if not target.tls:
                reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
                return Connection(reader, writer)
            reader, writer = await open_tunnel(proxy, target.host, target.port)
        except ProxyRefused as exc:
            raise NotSent(
                "connect", f"{proxy.origin} did not open a tunnel to {target.origin}: {exc}"
            ) from None
        except OSError as exc:
            raise NotSent("connect", f"cannot connect to {proxy.origin}: {cause(exc)}") from None
        try:
            await writer.start_tls(self._tls, server_hostname=target.host)
        except BaseException as exc:
            # whatever ends the handshake, a timeout's cancellation too, closes the tunnel
            writer.close()
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise _unverified(target, exc) from None
            if isinstance(exc, ssl.SSLError | OSError):
                reason = exc.reason if isinstance(exc, ssl.SSLError) else cause(exc)
                raise NotSent(
                    "tls",
                    f"TLS handshake with {target.origin} through {proxy.origin} failed: {reason}",
                ) from None
            raise
        return Connection(reader, writer)

    async def aclose(self) -> None:
        """Close the idle connections; idempotent. Nothing is checked in afterwards."""
        if self.closed:
            return
        self.closed = True
        idle = [connection for pool in self._idle.values() for connection in pool]
        self._idle.clear()
        for connection in idle:
            connection.close()
        if idle:
            # Let TLS close_notify and FIN go out before the loop (or the process) ends; a
            # peer that does not answer the goodbye costs a second at most, then the socket
            # is dropped. Errors of a connection already gone are of no interest any more.
            closing = asyncio.gather(
                *(c.writer.wait_closed() for c in idle), return_exceptions=True
            )
            try:
                await asyncio.wait_for(closing, _CLOSE_WAIT)
            except TimeoutError:
                for connection in idle:
                    connection.writer.transport.abort()


def _unverified(target: Target, exc: ssl.SSLCertVerificationError) -> NotSent:
    message = exc.verify_message or str(exc)
    return NotSent("tls", f"certificate of {target.origin} did not verify: {message}")
