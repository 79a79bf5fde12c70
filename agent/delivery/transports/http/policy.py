"""What became of a batch, from how its POST ended: the one thing at-most-once delivery turns on.

- `NotSent` (connect, tls, closed): no byte of the events left; the pipeline keeps the batch;
- `Unconfirmed` (timeout, network): the request began to leave and no full answer came;
- `NotStored` (http_429, http_500, http_502, http_503, http_504 by default: the statuses of
  `retry.status_forcelist`): the collector said it did not store it; the pipeline tries again;
- `DeliveryError` (http_4xx, http_5xx, http_<status>): the collector answered no (redirects
  included: they are not followed).
Pure: no I/O, no clock (the caller passes the time a `Retry-After` date is read against)."""

from __future__ import annotations

import asyncio
import ssl
from http import HTTPStatus
from typing import Final

import h11

from agent.delivery.retry import retry_after
from agent.delivery.transports.http.wire import BodyNotSent, cause
from agent.errors import (
    DeliveryError,
    NotSent,
    NotStored,
    TransportFailure,
    Unconfirmed,
    status_reason,
)

_MAX_DETAIL_URL: Final = 200


def failure(
    exc: BaseException,
    origin: str,
    timeout: float,
    *,
    connected: bool,
    body_left: bool,
    late_wait: float = 0.0,
) -> TransportFailure | None:
    """The delivery error a send that raised `exc` ends in, or None when `exc` itself is to
    pass (a `NotSent` already, a cancellation, an error of no known kind). `connected`: a
    connection was there; `body_left`: the request's body may have begun to leave;
    `late_wait`: how long an answer was awaited past `timeout` once the body left."""
    if isinstance(exc, NotSent | asyncio.CancelledError):
        return None
    if isinstance(exc, BodyNotSent):
        return NotSent("closed", f"{origin} closed the connection: {exc}")
    if isinstance(exc, TimeoutError):
        if not connected:  # still connecting: not a byte of the request left
            return NotSent("connect", f"no connection to {origin} within {timeout:g}s")
        if not body_left:  # still waiting for `100 Continue`: no event left
            return NotSent("closed", f"no answer from {origin} within {timeout:g}s")
        waited = f"{timeout:g}s" if not late_wait else f"{timeout:g}s + {late_wait:g}s"
        return Unconfirmed("timeout", f"no complete response from {origin} within {waited}")
    if isinstance(exc, OSError | h11.ProtocolError | ssl.SSLError):
        return Unconfirmed("network", f"connection to {origin} failed mid-request: {cause(exc)}")
    return None


def status_error(
    response: h11.Response, not_stored: frozenset[int], now: float
) -> DeliveryError | None:
    """The delivery error a non-2xx answer is (`NotStored` for a status in `not_stored`, with
    the `Retry-After` it gave, read against `now`, a Unix time); None for a 2xx one."""
    status = response.status_code
    if 200 <= status < 300:
        return None
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
    if status in not_stored:
        after = next((v for n, v in response.headers if n == b"retry-after"), None)
        later = None if after is None else retry_after(after.decode("latin-1"), now)
        return NotStored(status, f"HTTP {text}", later)
    return DeliveryError(status_reason(status), f"HTTP {text}")
