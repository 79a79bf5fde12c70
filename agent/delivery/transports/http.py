"""HTTP transport: POST signed events to an OpenLineage collector (Marquez or any other).

Keep-alive connections per transport, at most `HttpConfig.concurrency` at once; TLS
verification is always on. No send lasts longer than `HttpConfig.timeout`, however the time is
spent (connecting, the TLS handshake, sending, reading the answer). A failure says what became
of the batch, the one thing at-most-once delivery turns on:
- `NotSent` (connect, tls, closed): no connection, no TLS session, or the collector closed
  the connection before it asked for the body, so no byte of the events left; the pipeline
  keeps the batch and sends it when the collector answers again;
- `Unconfirmed` (timeout, network): the request began to leave and no full answer came; the
  collector may have stored it, so it is never sent again;
- `DeliveryError` (http_4xx, http_5xx): the collector answered no.
The transport itself never retries.

Each POST says `Expect: 100-continue` and sends its body only once the collector answers
`100 Continue`. That is what makes a restarting collector safe: a kept-alive connection it
closes just as a request goes out (a restart, an idle timeout) then ends before the body left,
which proves the events were not received, instead of leaving them unconfirmed. A collector
that ignores the header gets the body after `_CONTINUE_WAIT` anyway (RFC 9110, 10.1.1), and is
then asked no more.

The wire is h11 (HTTP/1.1 framing: chunked and length-delimited answers, interim 1xx
answers, `Connection: close`) over plain asyncio streams. One event per POST is this
transport's hardest case, and there the per-request work of a general client (httpcore's
pool and anyio's cancel scopes around every read) cost four times what the network and
the framing cost together. `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` and `NO_PROXY` are
honoured (`agent.delivery.transports.proxy`): an https collector through a `CONNECT` tunnel
(no byte of an event reaches the proxy in the clear), an http one by a forward request. A
proxy that cannot be reached or refuses the tunnel is `NotSent` (connect), like a collector
that cannot be reached.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final

import h11
import httpx

from agent import __version__
from agent.config.model import AUTH_HEADERS, HttpConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.proxy import (
    Proxy,
    ProxyRefused,
    check_proxy,
    open_tunnel,
    proxy_for,
)
from agent.errors import DeliveryError, NotSent, StartError, Unconfirmed

#: Level 1 keeps 98% of level 6's size reduction on event JSON (a 6 KB event: 20.2% vs
#: 18.5% of the original size) at half its CPU time for one event and a third for a batch
#: of 100; CPU, not bandwidth, limits one-event-per-POST shipping.
GZIP_LEVEL: Final = 1
#: Bodies at least this large are compressed in a worker thread (zlib releases the GIL), so
#: one large batch does not stall the event loop for milliseconds.
_GZIP_OFFLOAD_BYTES: Final = 256 * 1024
#: Idle connections are dropped before the 5 s idle timeout of common collector servers, so
#: a request is seldom written into a connection the server is just closing (`Expect` makes
#: that case `NotSent` anyway, unless the collector ignores it).
_KEEPALIVE_EXPIRY: Final = 4.0
_MAX_DETAIL_URL: Final = 200
#: Seconds to wait for `100 Continue` before sending the body anyway (a collector that ignores
#: `Expect`); at most half the request's timeout.
_CONTINUE_WAIT: Final = 1.0
_CLOSE_WAIT: Final = 1.0  # seconds aclose waits for idle connections to finish closing
_READ_SIZE: Final = 64 * 1024


def check_endpoint(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """Validate the endpoints and read the bearer token; return the token, or None without auth.

    Raises StartError naming the config key (and for the token the environment variable,
    never its value).
    """
    token = read_token(config, environ)
    check_urls(config)
    check_headers(config)
    check_proxy(config, environ)
    return token


def read_token(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The bearer token from the environment variable `auth.token_env`; None without auth.
    StartError names the variable (never its value) when it is unset, empty or malformed."""
    if config.auth is None:
        return None
    if config.auth.api_key is not None:  # the client's apiKey, checked when it was read
        return config.auth.api_key.reveal()
    variable = config.auth.token_env
    if variable is None:
        raise StartError("lineage.http.auth.token_env: required key is missing")
    key = "lineage.http.auth.token_env"
    raw = environ.get(variable)
    if raw is None:
        raise StartError(f"{key}: environment variable {variable} is not set")
    token = raw.strip()
    if not token:
        raise StartError(f"{key}: environment variable {variable} is empty")
    if not all("!" <= char <= "~" for char in token):
        raise StartError(
            f"{key}: environment variable {variable} holds characters that are not "
            "allowed in a bearer token (only visible ASCII)"
        )
    return token


def check_urls(config: HttpConfig) -> None:
    """The endpoint rules the transport applies (`_check_url`), for both endpoints."""
    _check_url("lineage.http.endpoint", config.endpoint, auth=config.auth is not None)
    if config.batch_endpoint is not None:
        _check_url(
            "lineage.http.batch_endpoint", config.batch_endpoint, auth=config.auth is not None
        )


#: Headers the transport writes itself: a custom one of these names would break the framing
#: or the auth rules, so it is refused.
_OWN_HEADERS: Final = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "expect",
        "content-encoding",
        "content-type",
        "connection",
    }
)
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: Words in a header's name that mark its value as a credential (X-Api-Key, X-Auth-Token,
#: Cookie): those values are kept out of every log line, other values (X-Env) are not.
_CREDENTIAL_WORDS: Final = (
    "auth",
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "credential",
    "cookie",
    "session",
    "signature",
)


def secret_headers(config: HttpConfig) -> list[str]:
    """The values of the custom headers whose names look like credentials, for the log
    scrubber."""
    return [
        value
        for name, value in config.headers.items()
        if any(word in name.lower() for word in _CREDENTIAL_WORDS)
    ]


def check_headers(config: HttpConfig) -> None:
    """Custom headers: valid names and values, none the transport writes itself, and no
    `Authorization` beside `auth`, no credential header to an http:// endpoint. Errors name
    the header, never its value."""
    urls = (config.endpoint, config.batch_endpoint)
    plain_http = any(url is not None and httpx.URL(url).scheme != "https" for url in urls)
    for name, value in config.headers.items():
        key = f"lineage.http.headers.{name}"
        if not _TOKEN.fullmatch(name):
            raise StartError(f"{key}: not a valid header name")
        if name.lower() in _OWN_HEADERS:
            raise StartError(f"{key}: the transport sets this header itself")
        if name.lower() == "authorization" and config.auth is not None:
            raise StartError(f"{key}: set either this header or lineage.http.auth, not both")
        if name.lower() in AUTH_HEADERS and plain_http:
            raise StartError(
                f"{key}: a credential header needs https:// endpoints; refusing to send it"
                " over http"
            )
        if not all(" " <= char <= "~" or char == "\t" for char in value) or value != value.strip():
            raise StartError(f"{key}: the value holds characters a header may not have")


def _check_url(key: str, url: str, *, auth: bool) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise StartError(f"{key}: not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise StartError(f"{key}: expected an http:// or https:// URL with a host")
    if parsed.userinfo:
        raise StartError(f"{key}: credentials in the URL are not supported; use lineage.http.auth")
    if auth and parsed.scheme != "https":
        raise StartError(
            f"{key}: bearer auth needs an https:// endpoint; refusing to send a token over http"
        )
    return parsed


def tls_context(
    ca_file: str | None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """The system's trusted CAs, plus `ca_file` when given; verification and hostname checks on;
    with `cert` and `key`, the client certificate an mTLS collector asks for."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise StartError(
                f"lineage.http.ca_file: cannot load CA bundle {ca_file}: {exc}"
            ) from None
    if cert is not None and key is not None:
        try:
            context.load_cert_chain(certfile=cert, keyfile=key)
        except (OSError, ssl.SSLError) as exc:
            # The error's own words name the file or the mismatch, never the key's contents.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise StartError(
                f"lineage.http.cert: cannot load client certificate {cert} with key {key}: {reason}"
            ) from None
    return context


@dataclass(frozen=True, slots=True)
class _Target:
    """Where one kind of POST goes: the connection's address and the request's first line."""

    host: str  # to connect to (IDNA-encoded, IPv6 without brackets)
    port: int
    tls: bool
    path: bytes  # the request's target: path and query, or the whole URL for a forward proxy
    authority: bytes  # the Host header
    origin: str  # host:port, for error details
    proxy: Proxy | None = None  # the proxy in between, if any

    @classmethod
    def of(cls, url: httpx.URL, proxy: Proxy | None = None) -> _Target:
        tls = url.scheme == "https"
        port = url.port or (443 if tls else 80)
        host = url.raw_host.decode("ascii")
        path = url.raw_path
        if proxy is not None and not tls:  # a forward proxy is given the absolute form
            path = f"http://{url.netloc.decode('ascii')}".encode("ascii") + url.raw_path
        return cls(host, port, tls, path, url.netloc, f"{url.host}:{port}", proxy)


class _Connection:
    """One keep-alive connection: a stream pair and its HTTP/1.1 state machine."""

    __slots__ = ("body_sent", "idle_since", "reader", "wire", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.wire = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.body_sent = False  # of the request under way: before it, nothing was received

    def usable(self, now: float) -> bool:
        # A server that closed an idle connection has left EOF in the reader by now.
        return (
            now - self.idle_since < _KEEPALIVE_EXPIRY
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    async def exchange(
        self, request: h11.Request, body: bytes, continue_wait: float | None
    ) -> tuple[h11.Response, bool]:
        """Send one request and read its whole answer: (the answer's head, whether the
        collector answered `100 Continue` in time). With `continue_wait` the head goes
        first and the body only after `100 Continue`, or after `continue_wait` seconds
        without one; `_BodyNotSent` when the connection ends before the body left."""
        wire = self.wire
        continued = False
        self.body_sent = False
        if continue_wait is None:
            self.body_sent = True
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
                raise _BodyNotSent(_cause(exc)) from None
            if isinstance(event, h11.Response):  # answered without asking for the body
                self.writer.close()  # the request is unfinished: never reuse the connection
                if 200 <= event.status_code < 300:  # it cannot have the events: not sent
                    raise _BodyNotSent(
                        f"it answered {event.status_code} before the body", answered=True
                    )
                return await self._finish(event), False
            if isinstance(event, h11.ConnectionClosed):
                raise _BodyNotSent("the collector closed the connection before the body")
            continued = event is not None
            self.body_sent = True
            self.writer.write(wire.send(h11.Data(data=body)) + wire.send(h11.EndOfMessage()))
        await self.writer.drain()
        while True:
            event = await self._next()
            if isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("peer closed connection without an answer")
            if isinstance(event, h11.Response):
                return await self._finish(event), continued
            # A `100 Continue` that came after the body (a late or unasked one): skipped.

    async def _next(self) -> h11.Response | h11.InformationalResponse | h11.ConnectionClosed:
        """The next answer head (or the end of the connection); body data is skipped."""
        wire = self.wire
        while True:
            event = wire.next_event()
            if event is h11.NEED_DATA:
                wire.receive_data(await self.reader.read(_READ_SIZE))
            elif isinstance(event, h11.InformationalResponse):
                if event.status_code == 100:
                    return event
                # Other 1xx answers (103 Early Hints) are skipped.
            elif isinstance(event, h11.Response | h11.ConnectionClosed):
                return event

    async def _finish(self, response: h11.Response) -> h11.Response:
        """Read the rest of an answer whose head came (its body drained unread)."""
        wire = self.wire
        while True:
            event = wire.next_event()
            if event is h11.NEED_DATA:
                wire.receive_data(await self.reader.read(_READ_SIZE))
            elif isinstance(event, h11.EndOfMessage):
                return response
            elif isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("peer closed connection without an answer")
            elif isinstance(event, h11.InformationalResponse | h11.Response):
                # A `100 Continue` the collector sent when the answer was already on its way.
                continue

    def reusable(self) -> bool:
        """Ready the connection for its next request; False when it must be closed instead
        (`Connection: close`, HTTP/1.0, an answer read to the end of the stream)."""
        if self.wire.our_state is h11.DONE and self.wire.their_state is h11.DONE:
            self.wire.start_next_cycle()
            return True
        return False

    def close(self) -> None:
        self.writer.close()


class _BodyNotSent(Exception):
    """The connection ended before the request's body left: the events were not received.
    `answered`: the collector answered 2xx without asking for the body (it mishandles
    `Expect`, so it is asked no more)."""

    def __init__(self, detail: str, *, answered: bool = False) -> None:
        super().__init__(detail)
        self.answered = answered


class HttpTransport:
    """POSTs each batch to the collector; see the module docstring for the contract."""

    name = "http"

    def __init__(
        self,
        config: HttpConfig,
        *,
        token: str | None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        if (config.auth is None) != (token is None):
            raise ValueError("lineage.http.auth: a token is needed exactly when auth is configured")
        endpoint = _check_url("lineage.http.endpoint", config.endpoint, auth=token is not None)
        if config.batch_endpoint is None:  # the OpenLineage API: POST /api/v1/lineage/batch
            batch_url = endpoint.copy_with(path=endpoint.path.rstrip("/") + "/batch")
        else:
            batch_url = _check_url(
                "lineage.http.batch_endpoint", config.batch_endpoint, auth=token is not None
            )
        self._single = _Target.of(endpoint, proxy_for(endpoint, environ))
        self._batch = _Target.of(batch_url, proxy_for(batch_url, environ))
        self._batched = config.batch_size > 1
        self._timeout = config.timeout
        self._gzip = config.compression == "gzip"
        # Validated once here; every request reuses the list (h11 checks it again per
        # request only for framing headers, which come last).
        headers = [
            (b"Content-Type", b"application/json"),
            (b"User-Agent", f"lineage-agent/{__version__}".encode("ascii")),
        ]
        if self._gzip:
            headers.append((b"Content-Encoding", b"gzip"))
        if token is not None:
            headers.append((b"Authorization", f"Bearer {token}".encode("ascii")))
        headers.extend((n.encode("ascii"), v.encode("latin-1")) for n, v in config.headers.items())
        self._headers = headers
        self._tls = tls_context(config.ca_file, config.cert, config.key)
        self._capacity = config.concurrency
        self._idle: dict[_Target, list[_Connection]] = {}
        self._closed = False
        # Whether a target is still asked to say `100 Continue` (False once it ignored it).
        self._continues: dict[_Target, bool] = {}
        self._continue_wait = min(_CONTINUE_WAIT, config.timeout / 2)

    async def send(self, batch: Sequence[Envelope]) -> None:
        """POST the batch; return when the collector answered 2xx, else raise DeliveryError."""
        if not batch:
            return
        if self._closed:
            raise NotSent("connect", "transport closed")
        if self._batched:
            target = self._batch
            body = b"[" + b",".join(envelope.payload for envelope in batch) + b"]"
        elif len(batch) == 1:
            target = self._single
            body = batch[0].payload
        else:
            raise ValueError(f"batch_size is 1 but the batch holds {len(batch)} events")
        if self._gzip:
            body = await _compress(body)
        expect = self._continues.get(target, True)
        forward = target.proxy is not None and not target.tls
        proxy_auth = target.proxy.authorization if target.proxy is not None else None
        request = h11.Request(
            method=b"POST",
            target=target.path,
            headers=[
                (b"Host", target.authority),
                *self._headers,
                *([(b"Proxy-Authorization", proxy_auth)] if forward and proxy_auth else []),
                *([(b"Expect", b"100-continue")] if expect else []),
                (b"Content-Length", str(len(body)).encode("ascii")),
            ],
        )
        connection = self._checkout(target)
        connected = connection is not None
        try:
            async with asyncio.timeout(self._timeout):
                if connection is None:
                    connection = await self._connect(target)
                connected = True
                wait = self._continue_wait if expect else None
                response, continued = await connection.exchange(request, body, wait)
            if expect and not continued and 200 <= response.status_code < 300:
                self._continues[target] = False  # it took the body without asking for it
        except BaseException as exc:
            # The connection is in an unknown state (cancelled, timed out, broken): never
            # reuse it. Cancellation passes through untouched.
            if connection is not None:
                connection.close()
            if isinstance(exc, NotSent | asyncio.CancelledError):
                raise
            if isinstance(exc, _BodyNotSent):
                if exc.answered:
                    self._continues[target] = False
                raise NotSent("closed", f"{target.origin} closed the connection: {exc}") from None
            if isinstance(exc, TimeoutError):
                if not connected:  # still connecting: not a byte of the request left
                    raise NotSent(
                        "connect", f"no connection to {target.origin} within {self._timeout:g}s"
                    ) from None
                if connection is not None and not connection.body_sent:
                    raise NotSent(  # still waiting for `100 Continue`: no event left
                        "closed", f"no answer from {target.origin} within {self._timeout:g}s"
                    ) from None
                raise Unconfirmed(
                    "timeout",
                    f"no complete response from {target.origin} within {self._timeout:g}s",
                ) from None
            if isinstance(exc, OSError | h11.ProtocolError | ssl.SSLError):
                raise Unconfirmed(
                    "network", f"connection to {target.origin} failed mid-request: {_cause(exc)}"
                ) from None
            raise
        self._checkin(target, connection)
        if not 200 <= response.status_code < 300:
            raise _status_error(response)

    def _checkout(self, target: _Target) -> _Connection | None:
        idle = self._idle.get(target)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.usable(now):
                return connection
            connection.close()
        return None

    def _checkin(self, target: _Target, connection: _Connection) -> None:
        idle = self._idle.setdefault(target, [])
        if self._closed or not connection.reusable() or len(idle) >= self._capacity:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    async def _connect(self, target: _Target) -> _Connection:
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
            message = exc.verify_message or str(exc)
            raise NotSent(
                "tls", f"certificate of {target.origin} did not verify: {message}"
            ) from None
        except ssl.SSLError as exc:
            raise NotSent(
                "tls", f"TLS handshake with {target.origin} failed: {exc.reason or exc}"
            ) from None
        except OSError as exc:
            raise NotSent("connect", f"cannot connect to {target.origin}: {_cause(exc)}") from None
        return _Connection(reader, writer)

    async def _connect_through(self, target: _Target, proxy: Proxy) -> _Connection:
        """A connection by way of `proxy`: a tunnel with TLS inside for an https collector,
        the proxy itself for an http one. Nothing of an event has left when this fails."""
        try:
            if not target.tls:
                reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
                return _Connection(reader, writer)
            reader, writer = await open_tunnel(proxy, target.host, target.port)
        except ProxyRefused as exc:
            raise NotSent(
                "connect", f"{proxy.origin} did not open a tunnel to {target.origin}: {exc}"
            ) from None
        except OSError as exc:
            raise NotSent("connect", f"cannot connect to {proxy.origin}: {_cause(exc)}") from None
        try:
            await writer.start_tls(self._tls, server_hostname=target.host)
        except BaseException as exc:
            # whatever ends the handshake, a timeout's cancellation too, closes the tunnel
            writer.close()
            if isinstance(exc, ssl.SSLCertVerificationError):
                message = exc.verify_message or str(exc)
                raise NotSent(
                    "tls", f"certificate of {target.origin} did not verify: {message}"
                ) from None
            if isinstance(exc, ssl.SSLError | OSError):
                reason = exc.reason if isinstance(exc, ssl.SSLError) else _cause(exc)
                raise NotSent(
                    "tls",
                    f"TLS handshake with {target.origin} through {proxy.origin} failed: {reason}",
                ) from None
            raise
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        """Close the pooled connections; idempotent. Sends started afterwards fail `connect`."""
        if self._closed:
            return
        self._closed = True
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


async def _compress(body: bytes) -> bytes:
    if len(body) >= _GZIP_OFFLOAD_BYTES:
        return await asyncio.to_thread(gzip.compress, body, GZIP_LEVEL, mtime=0)
    return gzip.compress(body, GZIP_LEVEL, mtime=0)


def _status_error(response: h11.Response) -> DeliveryError:
    status = response.status_code
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    text = f"{status} {phrase}" if phrase else str(status)
    if 300 <= status < 400:
        # Redirects are not followed: a redirected POST may change method or leave the
        # configured (and, with auth, trusted) origin.
        location = next(
            (value.decode("latin-1") for name, value in response.headers if name == b"location"),
            "",
        )[:_MAX_DETAIL_URL]
        where = f" to {location}" if location else ""
        return DeliveryError("http_4xx", f"unexpected redirect {text}{where}")
    return DeliveryError("http_5xx" if status >= 500 else "http_4xx", f"HTTP {text}")


def _cause(exc: BaseException) -> str:
    """The most specific description in the exception chain: an OS error text if there is one."""
    for cause in _chain(exc):
        if isinstance(cause, OSError):
            # asyncio words errno errors its own way ("Connect call failed (...)"); the
            # errno's standard text is what operators search for.
            if cause.errno is not None and cause.errno > 0:
                return os.strerror(cause.errno)
            if cause.strerror:  # resolver errors carry negative EAI_* codes
                return cause.strerror
    return str(exc) or type(exc).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
