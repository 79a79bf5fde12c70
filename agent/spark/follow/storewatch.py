"""Each event-log directory on a store (S3, GCS, Azure, HDFS) is followed by a task of its
own: listed, its new applications discovered, its unfinished logs read, once per
`spark.store_poll_interval`. A store that hangs or drips its answers holds its own task only
(every request to it has a whole deadline, `stores.configure`): the local directories and
every other store go on meanwhile. Single-file logs last written before
`spark.store_horizon` are passed over as the listing pages by, so what a look keeps is
bounded by what is followed, not by what the bucket holds. What each look found, or why it
failed and since when, is kept here for `status`, `describe` and /healthz, and in the
per-store metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection

import structlog

from agent.source import StoreStatus
from agent.spark.eventlog import stores
from agent.spark.eventlog.layout import LogRef
from agent.spark.follow.directories import Directories
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")


class StoreDirectory:
    """One directory on a store: its listing, and how its looks went."""

    def __init__(
        self, url: str, horizon: float, metrics: Metrics, on_ignored: Callable[[], object]
    ) -> None:
        self.url = url
        self.horizon = horizon  # seconds back a log is still followed; 0: every one
        self.label = stores.redact(url)
        self.prefix = f"{url.rstrip('/')}/"  # of its applications' keys
        self.first = True  # no listing yet: the next one is its first scan
        self.wake = asyncio.Event()  # set to look at once
        self._dirs = Directories([url], on_ignored)
        self._metrics = metrics
        self._last_listing: float | None = None
        self._applications = 0
        self._error: str | None = None
        self._error_since: float | None = None
        metrics.store_up.labels(store=self.label).set(0)
        metrics.store_failures.labels(store=self.label)

    async def list(self, finished: Collection[str]) -> list[LogRef] | None:
        """The applications listed now; None when the store could not be listed (the reason
        kept for the status)."""
        began = time.monotonic()
        since_ns = time.time_ns() - int(self.horizon * 1e9) if self.horizon else 0
        found = await self._dirs.list(finished, since_ns)
        refs = found.get(self.url)
        metrics = self._metrics
        metrics.store_listing_seconds.labels(store=self.label).set(time.monotonic() - began)
        if refs is None:
            error = self._dirs.failed.get(self.url)
            text = "cannot be listed" if error is None else (error.strerror or str(error))
            if self._error is None:
                self._error_since = time.time()
            self._error = text
            metrics.store_up.labels(store=self.label).set(0)
            metrics.store_failures.labels(store=self.label).inc()
            return None
        if self._error is not None:
            log.info("eventlog_store_recovered", directory=self.label, after=self._error)
        self._error = self._error_since = None
        self._last_listing = time.time()
        self._applications = len(refs)
        metrics.store_up.labels(store=self.label).set(1)
        metrics.store_last_listing.labels(store=self.label).set(self._last_listing)
        return refs

    def holds(self, key: str) -> bool:
        """The application of that key is in this directory."""
        return key.startswith(self.prefix)

    def status(self) -> StoreStatus:
        return StoreStatus(
            self.label, self._last_listing, self._applications, self._error, self._error_since
        )
