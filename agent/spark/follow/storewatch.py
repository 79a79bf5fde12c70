"""Each event-log directory on a store (S3, GCS, Azure, HDFS) is followed by a task of its
own: listed, its new applications discovered, its unfinished logs read, once per
`spark.store_poll_interval`. A store that hangs or drips its answers holds its own task only
(every request to it has a whole deadline, `stores.configure`): the local directories and
every other store go on meanwhile. Single-file logs last written before
`spark.store_horizon` are passed over as the listing pages by, so what a look keeps is
bounded by what is followed, not by what the bucket holds. What each look found, or why it
failed and since when, is kept here for `status`, `describe` and /healthz, and in the
per-store metrics.

On S3, GCS and HDFS (`stores.resumable`; not Azure) a listing starts after the directory's
resume point: the last name of the longest prefix of the listing that is all decided
(`storescan.scan_store` says why a prefix), kept in the state so that a restart does not
list the whole bucket again. An application whose name sorts before the point but appears
later (another YARN cluster, another id scheme) is found by the full listing made every
FULL_LISTING_EVERY seconds, which also sets the point again from the start: such a log is
followed late, never passed over."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from typing import Final

import structlog

from agent.source import StoreStatus
from agent.spark.eventlog import stores
from agent.spark.eventlog.layout import LogRef
from agent.spark.follow.directories import Directories
from agent.state.store import StateStore, call
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")

FULL_LISTING_EVERY: Final = 600.0  # seconds between listings from the start (resumable stores)


class StoreDirectory:
    """One directory on a store: its listing, and how its looks went."""

    def __init__(
        self,
        url: str,
        horizon: float,
        metrics: Metrics,
        on_ignored: Callable[[], object],
        state: StateStore,
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
        self._state = state
        self._resume: str | None = None if stores.resumable(url) else ""  # None: not read yet
        self._kept = ""  # the resume point the state holds
        self._full_at = time.monotonic()  # when the last listing from the start was made
        metrics.store_up.labels(store=self.label).set(0)
        metrics.store_failures.labels(store=self.label)

    async def list(
        self, finished: Collection[str], unsaved: Collection[str] = ()
    ) -> list[LogRef] | None:
        """The applications listed now, but for those `finished`; None when the store could
        not be listed (the reason kept for the status). Those of `finished` also `unsaved`
        (finished in memory only: the next start reads them again) are listed again, so that
        the resume point never passes them."""
        began = time.monotonic()
        since_ns = time.time_ns() - int(self.horizon * 1e9) if self.horizon else 0
        if self._resume is None:
            self._resume = self._kept = await self._resume_point()
        full = began - self._full_at >= FULL_LISTING_EVERY or not self._resume
        decided = set(finished).difference(unsaved) if unsaved else finished
        found = await self._dirs.list(decided, since_ns, {self.url: "" if full else self._resume})
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
        if full:
            self._full_at = began
        await self._keep(self._dirs.settled.get(self.url, ""))
        self._last_listing = time.time()
        self._applications = len(refs)
        metrics.store_up.labels(store=self.label).set(1)
        metrics.store_last_listing.labels(store=self.label).set(self._last_listing)
        return refs

    async def _resume_point(self) -> str:
        try:
            return await call(self._state, self._state.resume_point, self.url) or ""
        except self._state.write_errors as error:  # listed from the start meanwhile
            log.warning("eventlog_resume_point_unread", directory=self.label, error=str(error))
            return ""

    async def _keep(self, settled: str) -> None:
        """The resume point of the listing made, kept in the state when it moved (tried
        again at the next listing when the state refuses it)."""
        if not stores.resumable(self.url):
            return
        self._resume = settled
        if settled == self._kept:
            return
        try:
            await call(self._state, self._state.save_resume_point, self.url, settled)
        except self._state.write_errors:
            return
        self._kept = settled

    def holds(self, key: str) -> bool:
        """The application of that key is in this directory."""
        return key.startswith(self.prefix)

    def status(self) -> StoreStatus:
        return StoreStatus(
            self.label, self._last_listing, self._applications, self._error, self._error_since
        )
