"""HTTP transport: POST signed events to an OpenLineage collector (Marquez or any other).

Keep-alive connections per transport, at most `HttpConfig.concurrency` at once; TLS
verification is always on. Connecting, the TLS handshake and waiting for `100 Continue` last
at most `HttpConfig.timeout`. Once the body left, an answer that has not come within the
timeout is awaited on the same connection for `HttpConfig.late_answer_wait` more (counted
and logged by `late`): a collector that stores a request when its processing ends, whether
or not its client is still there (Marquez does), has then stored it before the run's next
event leaves. No send lasts longer than the timeout plus that wait. A failure says what
became of the batch, the one thing at-most-once delivery turns on:
- `NotSent` (connect, tls, closed): no connection, no TLS session, or the collector closed
  the connection before it asked for the body, so no byte of the events left; the pipeline
  keeps the batch and sends it when the collector answers again;
- `Unconfirmed` (timeout, network): the request began to leave and no full answer came; the
  collector may have stored it, so it is not sent again (the pipeline's one exception: a
  run's terminal event, once, `agent.delivery.retry`);
- `NotStored` (http_429, http_500, http_502, http_503, http_504 by default): the collector
  said it did not store it; the pipeline tries it again (`HttpConfig.retry`);
- `DeliveryError` (http_4xx, http_5xx): the collector answered no.
The transport itself never retries. This module builds and sends the requests; `wire`,
`pool` and `policy` hold the framing, the connections and the reading of failures.

A POST over a new connection, over one idle for a second or more, or with a body of 64 KiB
or more says `Expect: 100-continue` and sends its body only once the collector answers
`100 Continue` (`wire.ExpectRule`). That is what makes a restarting collector safe: a
kept-alive connection it closes just as a request goes out (a restart, an idle timeout) then
ends before the body left, which proves the events were not received, instead of leaving them
unconfirmed. On a connection the collector answered on less than a second ago the round trip
is skipped: it would cost a quarter of the throughput at one event per POST. A collector
that ignores the header gets the body after `_CONTINUE_WAIT` anyway (RFC 9110, 10.1.1), and is
then asked no more.

The wire is h11 (HTTP/1.1 framing: chunked and length-delimited answers, interim 1xx
answers, `Connection: close`) over plain asyncio streams. One event per POST is this
transport's hardest case, and there the per-request work of a general client (httpcore's
pool and anyio's cancel scopes around every read) cost four times what the network and
the framing cost together. `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` and `NO_PROXY` are
honoured (`proxy`): an https collector through a `CONNECT` tunnel
(no byte of an event reaches the proxy in the clear), an http one by a forward request. A
proxy that cannot be reached or refuses the tunnel is `NotSent` (connect), like a collector
that cannot be reached.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import h11

from agent import __version__
from agent.config.model import HttpConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.http.auth import Authorization, StaticBearer
from agent.delivery.transports.http.late import LateAnswers
from agent.delivery.transports.http.policy import failure, status_error
from agent.delivery.transports.http.pool import Pool, Target
from agent.delivery.transports.http.proxy import proxy_for
from agent.delivery.transports.http.settings import check_url, tls_context
from agent.delivery.transports.http.wire import EXPECT, BodyNotSent, ExpectRule
from agent.errors import NotSent

#: Level 1 keeps 98% of level 6's size reduction on event JSON (a 6 KB event: 20.2% vs
#: 18.5% of the original size) at half its CPU time for one event and a third for a batch
#: of 100; CPU, not bandwidth, limits one-event-per-POST shipping.
GZIP_LEVEL: Final = 1
#: Bodies at least this large are compressed in a worker thread (zlib releases the GIL), so
#: one large batch does not stall the event loop for milliseconds.
_GZIP_OFFLOAD_BYTES: Final = 256 * 1024
#: Seconds to wait for `100 Continue` before sending the body anyway (a collector that ignores
#: `Expect`); at most half the request's timeout.
_CONTINUE_WAIT: Final = 1.0


class HttpTransport:
    """POSTs each batch to the collector; see the module docstring for the contract."""

    name = "http"

    def __init__(
        self,
        config: HttpConfig,
        *,
        token: str | None = None,
        auth: Authorization | None = None,
        environ: Mapping[str, str] = os.environ,
        on_late: Callable[[], None] | None = None,
        expect: ExpectRule = EXPECT,
    ) -> None:
        """`token` is a static bearer token, `auth` any other `Authorization`; `on_late` is
        called for each answer that came after `timeout` (a counter); `expect` says which
        requests ask for `100 Continue`."""
        if token is not None:
            auth = StaticBearer(token)
        if (config.auth is None) != (auth is None):
            raise ValueError("lineage.http.auth: a token is needed exactly when auth is configured")
        endpoint = check_url("lineage.http.endpoint", config.endpoint, auth=auth is not None)
        if config.batch_endpoint is None:  # the OpenLineage API: POST /api/v1/lineage/batch
            batch_url = endpoint.copy_with(path=endpoint.path.rstrip("/") + "/batch")
        else:
            batch_url = check_url(
                "lineage.http.batch_endpoint", config.batch_endpoint, auth=auth is not None
            )
        self._single = Target.of(endpoint, proxy_for(endpoint, environ))
        self._batch = Target.of(batch_url, proxy_for(batch_url, environ))
        self._batched = config.batch_size > 1
        self._timeout = config.timeout
        self._late_wait = config.late_answer_wait
        self._late = LateAnswers(self._single.origin, config.timeout, on_late)
        self._not_stored = frozenset(config.retry.status_forcelist)
        self._gzip = config.compression == "gzip"
        # Validated once here; every request reuses the list (h11 checks it again per
        # request only for framing headers, which come last).
        headers = [
            (b"Content-Type", b"application/json"),
            (b"User-Agent", f"lineage-agent/{__version__}".encode("ascii")),
        ]
        if self._gzip:
            headers.append((b"Content-Encoding", b"gzip"))
        # A constant header costs nothing per request; another is asked for per request.
        constant = auth.constant() if auth is not None else None
        if constant is not None:
            headers.append((b"Authorization", constant))
        self._auth = auth if constant is None else None
        headers.extend((n.encode("ascii"), v.encode("latin-1")) for n, v in config.headers.items())
        self._headers = headers
        self._pool = Pool(tls_context(config.ca_file, config.cert, config.key), config.concurrency)
        # Whether a target is still asked to say `100 Continue` (False once it ignored it).
        self._continues: dict[Target, bool] = {}
        self._continue_wait = min(_CONTINUE_WAIT, config.timeout / 2)
        self._expect = expect

    async def send(self, batch: Sequence[Envelope]) -> None:
        """POST the batch; return when the collector answered 2xx, else raise a
        TransportFailure (see the module docstring)."""
        if not batch:
            return
        if self._pool.closed:
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
        authorization = await self._auth.value() if self._auth is not None else None
        loop = asyncio.get_running_loop()
        connection = self._pool.checkout(target)
        connected = connection is not None
        expect = self._continues.get(target, True) and self._expect.wants(
            connection, len(body), time.monotonic()
        )
        forward = target.proxy is not None and not target.tls
        proxy_auth = target.proxy.authorization if target.proxy is not None else None
        request = h11.Request(
            method=b"POST",
            target=target.path,
            headers=[
                (b"Host", target.authority),
                *self._headers,
                *([(b"Authorization", authorization)] if authorization else []),
                *([(b"Proxy-Authorization", proxy_auth)] if forward and proxy_auth else []),
                *([(b"Expect", b"100-continue")] if expect else []),
                (b"Content-Length", str(len(body)).encode("ascii")),
            ],
        )
        began = loop.time()
        try:
            async with asyncio.timeout(self._timeout) as timer:
                if connection is None:
                    connection = await self._pool.connect(target)
                connected = True
                wait = self._continue_wait if expect else None
                later = self._late_wait
                response, continued = await connection.exchange(
                    request, body, wait, timer if later else None, later
                )
            self._late.answered(loop.time() - began)
            if expect and not continued and 200 <= response.status_code < 300:
                self._continues[target] = False  # it took the body without asking for it
        except BaseException as exc:
            # The connection is in an unknown state (cancelled, timed out, broken): never
            # reuse it. Cancellation passes through untouched.
            if connection is not None:
                connection.close()
            if isinstance(exc, BodyNotSent) and exc.answered:
                self._continues[target] = False
            body_left = connection is None or connection.body_sent
            error = failure(
                exc,
                target.origin,
                self._timeout,
                connected=connected,
                body_left=body_left,
                late_wait=self._late_wait,
            )
            if error is None:
                raise
            raise error from None
        self._pool.checkin(target, connection)
        if response.status_code == 401 and authorization is not None and self._auth is not None:
            self._auth.rejected(authorization)
        if not 200 <= response.status_code < 300:
            error = status_error(response, self._not_stored, time.time())
            if error is not None:
                raise error

    async def aclose(self) -> None:
        """Close the pooled connections; idempotent. Sends started afterwards fail `connect`."""
        await self._pool.aclose()


async def _compress(body: bytes) -> bytes:
    if len(body) >= _GZIP_OFFLOAD_BYTES:
        return await asyncio.to_thread(gzip.compress, body, GZIP_LEVEL, mtime=0)
    return gzip.compress(body, GZIP_LEVEL, mtime=0)
