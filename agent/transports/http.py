"""HTTP transport: POST signed events to an OpenLineage collector (Marquez or any other).

One keep-alive connection pool per transport, sized to `HttpConfig.concurrency`; TLS
verification is always on. Every failure becomes a `DeliveryError` whose reason is one of
`REASONS`; nothing is retried (a request that may have reached the collector is never sent
twice), and no send lasts longer than `HttpConfig.timeout`, however the time is spent
(waiting for a connection, connecting, sending, reading the answer).

The hot path talks to httpx's transport layer directly instead of through `AsyncClient`:
the client's per-request work (merging headers, cookies, auth and redirect machinery) is
all unused here and cost about a quarter of the throughput. Proxy variables from the
environment are not consulted; the collector is addressed directly.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import Final

import httpx

from agent import __version__
from agent.config import HttpConfig
from agent.envelope import Envelope
from agent.transports.base import DeliveryError

#: Level 1 keeps 98% of level 6's size reduction on event JSON (a 6 KB event: 20.2% vs
#: 18.5% of the original size) at half its CPU time for one event and a third for a batch
#: of 100; CPU, not bandwidth, limits one-event-per-POST shipping.
GZIP_LEVEL: Final = 1
#: Bodies at least this large are compressed in a worker thread (zlib releases the GIL), so
#: one large batch does not stall the event loop for milliseconds.
_GZIP_OFFLOAD_BYTES: Final = 256 * 1024
#: Idle connections are dropped before the 5 s idle timeout of common collector servers, so
#: a request is seldom written into a connection the server is just closing (that send would
#: fail as `network`, and is not retried).
_KEEPALIVE_EXPIRY: Final = 4.0
_MAX_DETAIL_URL: Final = 200
_CONNECT_SHARE: Final = 0.9


def check_endpoint(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """Validate the endpoints and read the bearer token; return the token, or None without auth.

    Raises ValueError naming the config key (and for the token the environment variable,
    never its value).
    """
    token: str | None = None
    if config.auth is not None:
        variable = config.auth.token_env
        key = "lineage.http.auth.token_env"
        raw = environ.get(variable)
        if raw is None:
            raise ValueError(f"{key}: environment variable {variable} is not set")
        token = raw.strip()
        if not token:
            raise ValueError(f"{key}: environment variable {variable} is empty")
        if not all("!" <= char <= "~" for char in token):
            raise ValueError(
                f"{key}: environment variable {variable} holds characters that are not "
                "allowed in a bearer token (only visible ASCII)"
            )
    _check_url("lineage.http.endpoint", config.endpoint, auth=config.auth is not None)
    if config.batch_endpoint is not None:
        _check_url(
            "lineage.http.batch_endpoint", config.batch_endpoint, auth=config.auth is not None
        )
    return token


def _check_url(key: str, url: str, *, auth: bool) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{key}: not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"{key}: expected an http:// or https:// URL with a host")
    if parsed.userinfo:
        raise ValueError(f"{key}: credentials in the URL are not supported; use lineage.http.auth")
    if auth and parsed.scheme != "https":
        raise ValueError(
            f"{key}: bearer auth needs an https:// endpoint; refusing to send a token over http"
        )
    return parsed


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """The system's trusted CAs, plus `ca_file` when given; verification and hostname checks on."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"lineage.http.ca_file: cannot load CA bundle {ca_file}: {exc}"
            ) from None
    return context


class HttpTransport:
    """POSTs each batch to the collector; see the module docstring for the contract."""

    name = "http"

    def __init__(self, config: HttpConfig, *, token: str | None) -> None:
        if (config.auth is None) != (token is None):
            raise ValueError("lineage.http.auth: a token is needed exactly when auth is configured")
        endpoint = _check_url("lineage.http.endpoint", config.endpoint, auth=token is not None)
        self._url = endpoint
        if config.batch_endpoint is None:  # the OpenLineage API: POST /api/v1/lineage/batch
            self._batch_url = endpoint.copy_with(path=endpoint.path.rstrip("/") + "/batch")
        else:
            self._batch_url = _check_url(
                "lineage.http.batch_endpoint", config.batch_endpoint, auth=token is not None
            )
        self._batched = config.batch_size > 1
        self._timeout = config.timeout
        self._gzip = config.compression == "gzip"
        # Built once: every request shares these; httpx copies headers into each request.
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"lineage-agent/{__version__}",
        }
        if self._gzip:
            headers["Content-Encoding"] = "gzip"
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self._headers = httpx.Headers(headers)
        # The whole send is bounded by `timeout` (asyncio.timeout in send). Connecting (TCP
        # and TLS handshake) gets a little less, so that a stalled handshake ends through
        # httpx's own timeout, which closes the socket: a handshake cancelled from outside
        # leaves its socket to the garbage collector (httpcore 1.0).
        phases = httpx.Timeout(config.timeout, connect=config.timeout * _CONNECT_SHARE)
        self._extensions = {"timeout": phases.as_dict()}
        self._origin = _origin(endpoint)
        self._batch_origin = _origin(self._batch_url)
        self._pool = httpx.AsyncHTTPTransport(
            verify=tls_context(config.ca_file),
            limits=httpx.Limits(
                max_connections=config.concurrency,
                max_keepalive_connections=config.concurrency,
                keepalive_expiry=_KEEPALIVE_EXPIRY,
            ),
            retries=0,
        )
        self._closed = False

    async def send(self, batch: Sequence[Envelope]) -> None:
        """POST the batch; return when the collector answered 2xx, else raise DeliveryError."""
        if not batch:
            return
        if self._closed:
            raise DeliveryError("connect", "transport closed")
        if self._batched:
            url, origin = self._batch_url, self._batch_origin
            body = b"[" + b",".join(envelope.payload for envelope in batch) + b"]"
        elif len(batch) == 1:
            url, origin = self._url, self._origin
            body = batch[0].payload
        else:
            raise ValueError(f"batch_size is 1 but the batch holds {len(batch)} events")
        if self._gzip:
            body = await _compress(body)
        request = httpx.Request(
            "POST", url, headers=self._headers, content=body, extensions=self._extensions
        )
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._pool.handle_async_request(request)
                try:
                    # Drain without decoding or keeping the answer: only the status matters,
                    # and a fully read response lets the connection go back to the pool.
                    async for _ in response.aiter_raw():
                        pass
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            raise DeliveryError(
                "timeout", f"no complete response from {origin} within {self._timeout:g}s"
            ) from None
        except httpx.ConnectError as exc:
            raise _connect_error(exc, origin) from None
        except (httpx.HTTPError, OSError) as exc:
            raise DeliveryError(
                "network", f"connection to {origin} failed mid-request: {_cause(exc)}"
            ) from None
        status = response.status_code
        if 200 <= status < 300:
            return
        raise _status_error(response)

    async def aclose(self) -> None:
        """Close the pooled connections; idempotent. Sends started afterwards fail `connect`."""
        if self._closed:
            return
        self._closed = True
        await self._pool.aclose()


async def _compress(body: bytes) -> bytes:
    if len(body) >= _GZIP_OFFLOAD_BYTES:
        return await asyncio.to_thread(gzip.compress, body, GZIP_LEVEL, mtime=0)
    return gzip.compress(body, GZIP_LEVEL, mtime=0)


def _origin(url: httpx.URL) -> str:
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}"


def _status_error(response: httpx.Response) -> DeliveryError:
    status = response.status_code
    phrase = httpx.codes.get_reason_phrase(status)
    text = f"{status} {phrase}" if phrase else str(status)
    if 300 <= status < 400:
        # Redirects are not followed: a redirected POST may change method or leave the
        # configured (and, with auth, trusted) origin.
        location = response.headers.get("location", "")[:_MAX_DETAIL_URL]
        where = f" to {location}" if location else ""
        return DeliveryError("http_4xx", f"unexpected redirect {text}{where}")
    reason = "http_5xx" if status >= 500 else "http_4xx"
    return DeliveryError(reason, f"HTTP {text}")


def _connect_error(exc: httpx.ConnectError, origin: str) -> DeliveryError:
    for cause in _chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            message = cause.verify_message or str(cause)
            return DeliveryError("tls", f"certificate of {origin} did not verify: {message}")
        if isinstance(cause, ssl.SSLError) and not isinstance(
            cause, ssl.SSLWantReadError | ssl.SSLWantWriteError
        ):
            return DeliveryError(
                "tls", f"TLS handshake with {origin} failed: {cause.reason or cause}"
            )
    return DeliveryError("connect", f"cannot connect to {origin}: {_cause(exc)}")


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
