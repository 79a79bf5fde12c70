"""Each request to a store: bounded as a whole by `deadline()` (`configure`), counted per
kind for the `lineage_eventlog_store_requests_total` metric (`requests()`), and its failure
turned into a StoreError whose text names no credential."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import fsspec.asyn

REQUEST_DEADLINE: Final = 30.0  # seconds for a whole request (spark.store_request_timeout)
CONNECT_TIMEOUT: Final = 5.0  # seconds per connection attempt (no longer than the deadline)
READ_TIMEOUT: Final = 20.0  # seconds per read (no longer than the deadline)

Request = Literal["list", "head", "get"]
_counts: Counter[str] = Counter()
_counts_lock = threading.Lock()
_deadline = REQUEST_DEADLINE


class StoreError(OSError):
    """The store could not answer now (network, throttling, permission); tried again later."""


def configure(request_timeout: float) -> None:
    """The deadline of each whole request from now on (`spark.store_request_timeout`)."""
    global _deadline
    _deadline = request_timeout


def deadline() -> float:
    return _deadline


def requests() -> dict[str, int]:
    """Calls made to stores since the start, per kind."""
    with _counts_lock:
        return {kind: _counts[kind] for kind in ("list", "head", "get")}


def count(kind: Request, requests: int = 1) -> None:
    with _counts_lock:
        _counts[kind] += requests


def call(fs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """One call of the file system, bounded as a whole: where the library is asynchronous
    (S3, GCS, Azure) it runs on fsspec's own event loop and is cancelled at the deadline
    (FSTimeoutError); WebHDFS' blocking session has `bounded`'s adapter mounted."""
    if getattr(fs, "async_impl", False):
        return run(fs, getattr(fs, f"_{method}"), *args, **kwargs)
    return getattr(fs, method)(*args, **kwargs)


def run(fs: Any, function: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """`function`'s coroutine on the asynchronous file system's loop, cancelled at the
    deadline."""
    return fsspec.asyn.sync(fs.loop, function, *args, timeout=_deadline, **kwargs)


def redact(url: str) -> str:
    """The URL without a password in its userinfo (abfss' `container@account` stays)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def late() -> StoreError:
    """The error of a request that did not answer whole within the deadline."""
    return StoreError(
        f"no whole answer within {_deadline:g} s (spark.store_request_timeout): the "
        "request was cancelled"
    )


def unavailable(error: Exception) -> StoreError:
    """The store's error as a StoreError whose text names no credential."""
    if isinstance(error, StoreError):
        return error
    if isinstance(error, asyncio.TimeoutError):  # fsspec's FSTimeoutError is one
        return late()
    return StoreError(f"{type(error).__name__}: {redact(str(error))}")
