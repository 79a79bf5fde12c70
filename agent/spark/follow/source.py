"""The Spark source: discover event logs, read and translate them, claim and hand events on.

One loop, woken by inotify (or by the poll interval on file systems without it): for every
application log that is not finished it reads the new complete lines and translates them
(`ApplicationLog`, shared with `replay`), claims the resulting events in the state database
(so none is ever emitted twice, across restarts too) and passes the fresh ones to the sink.
A finished log (complete and read to the end) is remembered and not read again. After a
restart an unfinished log is read again from its start: translation is pure, so the same
events come out and the claims drop those already emitted, while the terminal events of runs
that ended while the agent was down are emitted now.

The state database may refuse a write for a while (locked by another process, its disk
full). Events are then held, not dropped and not emitted unclaimed (`Claims`): an
application whose events cannot be claimed is not read further until the database takes
them, so memory stays bounded, and a failure on one log (a bug, whatever the input) never
stops the others. Stale in-progress logs and `job stop` are `liveness`'s business.

Directories on a store (S3, GCS, Azure, HDFS: `eventlog.stores`) have no inotify and every
look costs requests: they are listed, and their unfinished logs read, once per
`spark.store_poll_interval`; finished applications are not listed again.

With a state several agents share (PostgreSQL), an application is followed only under this
agent's lease on it (`Leasing`, whose heartbeat keeps the leases): a lease found lost lets
the application go, an application whose owner is gone is taken at the next listing, which
the heartbeat asks for at once, and stops other agents recorded apply here.

This module holds the loop, discovery and leases; what a pass does with each followed
application is `pumping`'s, the answers to the control socket are `control`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Final

import structlog

from agent.config.model import AgentConfig, LivenessConfig, SparkConfig
from agent.source import Sink, SourceContext, StoreStatus
from agent.spark.eventlog import stores
from agent.spark.eventlog.inotify import DirectoryWatch
from agent.spark.eventlog.layout import LogRef
from agent.spark.follow import verdicts
from agent.spark.follow.application import ApplicationLog, translate_options
from agent.spark.follow.claims import Claims
from agent.spark.follow.control import Control
from agent.spark.follow.directories import Directories
from agent.spark.follow.driver.outbound import Guard
from agent.spark.follow.followed import Followed
from agent.spark.follow.leasing import Leasing
from agent.spark.follow.problems import LogProblems
from agent.spark.follow.storewatch import StoreDirectory
from agent.spark.tables.metadata import DiskTableMetadata
from agent.state.db import LogPosition
from agent.state.store import LeaseLost, Leases, StateStore, Term, call
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")

RESCAN_EVERY: Final = 30.0  # seconds between full directory scans when inotify is working


class SparkSource(Control):
    """Follows every Spark application logged under `spark.event_log_dirs`."""

    name = "spark"

    def __init__(
        self,
        spark: SparkConfig,
        namespace: str,
        state: StateStore,
        metrics: Metrics,
        health: HealthTracker | None = None,
        *,
        use_inotify: bool = True,
        liveness: LivenessConfig | None = None,
    ) -> None:
        self.spark = spark
        lookups = liveness or LivenessConfig()
        self.guard = Guard.of(
            lookups.allowed_hosts,
            lookups.max_requests_per_second,
            lambda reason: metrics.liveness_refused.labels(reason=reason).inc(),
        )
        self.options = translate_options(spark, spark.namespace or namespace, await_verdict=True)
        self.state = state
        self.metrics = metrics
        self.health = health or HealthTracker()
        self.claims = Claims(state)
        # A state several agents share: follow only the applications this agent leases.
        self.leasing = (
            Leasing(state, state, metrics, wanted=self._orphan_wanted, wake=self.wake)
            if isinstance(state, Leases)
            else None
        )
        self.problems = LogProblems(metrics, self.health)
        # One for all applications: a table they all name is read once per version.
        self.tables = DiskTableMetadata()
        self.apps: dict[str, Followed] = {}
        self._finished: set[str] = state.finished_keys()
        self._abandoned: set[str] = set()  # of those, finished in memory only (`pumping`)
        self._stops = state.stop_requests()  # kept in step by request_stop
        local = [d for d in spark.event_log_dirs if not stores.is_url(d)]
        ignored = metrics.eventlog_files_ignored.inc
        self._dirs = Directories(local, ignored)
        stores.configure(spark.store_request_timeout)
        self._stores = [
            StoreDirectory(d, spark.store_horizon, metrics, ignored, state)
            for d in spark.event_log_dirs
            if stores.is_url(d)
        ]
        self._unreadable: dict[str, str] = {}  # key -> the error logged (again if it changes)
        self._store_requests = stores.requests()
        self._skipped_by_horizon = 0
        self._recreation_told = False
        self._use_inotify = use_inotify
        self._wake = asyncio.Event()
        self._fs = DirectoryWatch(local, self._wake)
        self._sink: Sink | None = None
        self._local_first = True  # the first scan of the local directories is to come

    @classmethod
    def from_config(cls, config: AgentConfig, context: SourceContext) -> SparkSource:
        return cls(
            config.spark,
            config.lineage.namespace,
            context.state_db,
            context.metrics,
            context.health,
            liveness=config.liveness,
        )

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        self._sink = sink
        loop = asyncio.get_running_loop()
        if self._use_inotify:
            self._fs.start(loop, self.spark.poll_interval)
        last_scan = 0.0
        beats = None
        if self.leasing is not None:
            beats = asyncio.create_task(self.leasing.run(self._terms_held, stop), name="leases")
        # Each store on its own task: one that hangs holds nothing else up.
        followers = [
            asyncio.create_task(self._follow_store(store, stop), name=f"store {store.label}")
            for store in self._stores
        ]
        try:
            while not stop.is_set():
                # Cleared before reading, so a change notified during the read wakes the
                # next pass at once instead of waiting for Spark's next write.
                self._wake.clear()
                # Applications of an agent that died are taken once their lease expires.
                orphaned = self.leasing is not None and self.leasing.take_orphaned()
                self._let_go_of_lost()
                if orphaned:
                    for store in self._stores:
                        store.wake.set()
                now = time.monotonic()
                if (
                    not self._fs.available
                    or self._fs.rescan
                    or self._local_first
                    or bool(self._dirs.missing)  # not watchable yet: look each poll interval
                    or now - last_scan >= RESCAN_EVERY
                    or (orphaned and bool(self._dirs.paths))
                ):  # a bool, not the set itself: listing empties that set
                    self._fs.rescan = False
                    await self._discover(await self._dirs.list(), first=self._local_first)
                    self._local_first = False
                    last_scan = now
                self.claims.new_pass()
                await self._pump_all(stop, _is_local)
                await self._check_stale(_is_local)
                self._count()
                await _until(self._wake, stop, self.spark.poll_interval)
        finally:
            self._fs.stop(loop)
            for task in [*followers, *([beats] if beats is not None else [])]:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.claims.new_pass()
            for app in list(self.apps.values()):
                with contextlib.suppress(LeaseLost):
                    await self._save(app)
                app.log.close()
                await self._release(app)  # another agent may take it at once

    async def _follow_store(self, store: StoreDirectory, stop: asyncio.Event) -> None:
        """List one directory on a store, discover and read its logs, once per
        `store_poll_interval` (sooner when woken); a failure is this store's alone."""
        while not stop.is_set():
            store.wake.clear()
            refs = await store.list(self._finished, self._abandoned)
            if refs is not None:
                await self._discover({store.url: refs}, first=store.first)
                store.first = False
            await self._pump_all(stop, store.holds)
            await self._check_stale(store.holds)
            self._count()
            await _until(store.wake, stop, self.spark.store_poll_interval)

    @property
    def _first_scan(self) -> bool:
        """Some directory was not scanned yet (a store that cannot be listed stays so)."""
        return self._local_first or any(store.first for store in self._stores)

    def wake(self) -> None:
        self._wake.set()
        for store in self._stores:
            store.wake.set()

    def stores(self) -> list[StoreStatus]:
        return [store.status() for store in self._stores]

    def _count(self) -> None:
        self.metrics.applications.set(sum(1 for a in self.apps.values() if not a.closed))
        self.metrics.leases_held.set(sum(1 for a in self.apps.values() if a.token is not None))
        self._count_store_requests()

    def _count_store_requests(self) -> None:
        now = stores.requests()
        for kind, count in now.items():
            if count > self._store_requests[kind]:
                self.metrics.store_requests.labels(request=kind).inc(
                    count - self._store_requests[kind]
                )
        self._store_requests = now

    def _watch(self, path: str) -> None:
        if not stores.is_url(path):  # a store has no inotify: polled instead
            self._fs.watch(path)

    # -- discovery ---------------------------------------------------------------------------

    async def _discover(self, listed: Mapping[str, list[LogRef]], *, first: bool) -> None:
        """Follow the applications `listed` newly shows; at a directory's `first` scan, take
        the finished ones older than the horizon as handled."""
        horizon = self.spark.replay_horizon
        now_ns = time.time_ns()
        lost_state = first and self.state.recreated and not self.spark.replay_existing
        skipped_as_handled = 0
        for directory, refs in listed.items():
            self._watch(directory)
            for ref in refs:
                key = f"{directory.rstrip('/')}/{ref.key}"
                if key in self._finished:
                    continue
                if key in self.apps:
                    if ref.layout == "rolling":
                        self._watch(ref.path)
                    continue
                if ref.error is not None:
                    # Derived again at each scan from the files as they are: logged once.
                    if self._unreadable.get(key) != ref.error:
                        self._unreadable[key] = ref.error
                        if ref.special:
                            self.metrics.eventlog_lines_skipped.labels(reason="special_file").inc()
                        log.error("eventlog_unreadable", log=ref.path, error=ref.error)
                    continue
                self._unreadable.pop(key, None)
                old = horizon > 0 and (now_ns - ref.mtime_ns) / 1e9 > horizon
                # After a lost state database, logs finished before it was made were handled.
                lost = lost_state and ref.mtime_ns < self.state.opened_ns
                if first and ref.complete and (old or lost):
                    # A finished application: not replayed unless the horizon says so.
                    skipped = await self._skip(key, ref)
                    if skipped is not None:
                        if skipped and old:
                            self._skipped_by_horizon += 1
                        elif skipped:
                            skipped_as_handled += 1
                        continue
                term = await self.leasing.take(key) if self.leasing is not None else None
                if term is False:
                    continue
                # An application still running when the database was lost: what its log
                # holds already was handled too; only what it writes from now on is sent.
                quiet = lost and await self._position(key) is None
                self._follow(key, ref, quiet=quiet)
                self.apps[key].term = term
        if first and self._skipped_by_horizon:
            log.info(
                "eventlogs_skipped_by_horizon",
                count=self._skipped_by_horizon,
                horizon_seconds=horizon,
            )
        if lost_state and not self._recreation_told:
            self._recreation_told = True
            log.warning(
                "state_database_recreated",
                path=str(self.state.path),
                found=self.state.lost_as,
                eventlogs_skipped=skipped_as_handled,
                detail="the state database was lost: completed event logs older than it are "
                "taken as already emitted (spark.replay_existing: true replays them)",
            )

    # -- leases (a state several agents share) --------------------------------------------------

    async def _position(self, key: str) -> LogPosition | None:
        try:
            return await call(self.state, self.state.position, key)
        except self.state.write_errors:
            return None

    async def _skip(self, key: str, ref: LogRef) -> bool | None:
        """Remember an old finished log as finished without reading it: True when done now,
        False when the database refused (the next start tries again), None when it is not
        to be skipped after all (read before, or another agent holds it)."""
        if await self._position(key) is not None:
            return None
        term = await self.leasing.take(key) if self.leasing is not None else None
        if term is False:  # with leases: never marked under another agent's feet
            return None
        position = LogPosition(key, ref.path, None, None, 0, True)
        token = None if term is None else term.token
        try:
            stored = await self.claims.store(self.state.save_position, position, token=token)
        except LeaseLost:
            return None
        finally:
            if term is not None and self.leasing is not None:  # a term comes with leasing
                await self.leasing.release(term)
        if stored:
            self._finished.add(key)
        return stored

    def _terms_held(self) -> list[Term]:
        return [app.term for app in self.apps.values() if app.term is not None]

    def _orphan_wanted(self, key: str) -> bool:
        """An application whose owner is gone, under one of this agent's directories."""
        if key in self.apps or key in self._finished:
            return False
        return any(key.startswith(d.rstrip("/") + "/") for d in self.spark.event_log_dirs)

    def _let_go_of_lost(self) -> None:
        """Applications whose lease the heartbeat found taken; stops other agents recorded."""
        for app in list(self.apps.values()):
            if app.term is not None and app.term.lost:
                self._lose(app)
        if self.leasing is None:
            return
        for app_id, (reason, requested_by) in self.leasing.stops.items():
            if app_id in self._stops:
                continue
            self._stops[app_id] = (reason, requested_by)
            stopped = self.find(app_id)
            if stopped is not None:
                stopped.log.translator.request_stop(reason=reason, requested_by=requested_by)

    def _follow(self, key: str, ref: LogRef, *, quiet: bool = False) -> None:
        app_log = ApplicationLog(
            ref,
            self.options,
            max_line_bytes=self.spark.max_line_bytes,
            # Read in the worker thread that translates: a dict, not the database.
            stop_lookup=self._stops.get,
            verdict_lookup=verdicts.lookup(self.state),
            table_metadata=self.tables,
        )
        # Spark makes a rolling log's directory before its first event file, whose name
        # alone tells the codec: until then the codec is not known (not "none").
        pending = ref.layout == "rolling" and not ref.files and ref.error is None
        self.apps[key] = Followed(key, app_log, quiet=quiet, codec_pending=pending)
        if ref.layout == "rolling":
            self._watch(ref.path)
        log.info(
            "eventlog_followed",
            log=ref.path,
            layout=ref.layout,
            codec="pending" if pending else ref.codec,
            complete=ref.complete,
        )


def _is_local(key: str) -> bool:
    """The application's log is on this node's file system (not on a store)."""
    return not stores.is_url(key)


async def _until(wake: asyncio.Event, stop: asyncio.Event, seconds: float) -> None:
    """Wait until `wake` or `stop` is set, or `seconds` passed."""
    waiter = asyncio.create_task(wake.wait())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({waiter, stopper}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    stopper.cancel()
