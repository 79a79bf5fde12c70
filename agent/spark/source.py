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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Mapping
from typing import Any, Final

import structlog

from agent.config.model import AgentConfig, SparkConfig
from agent.errors import ControlError
from agent.source import ApplicationStatus, Sink, SourceContext, StopOutcome
from agent.spark import liveness, verdicts
from agent.spark.application import LOG_ENDED, ApplicationLog, translate_options
from agent.spark.claims import Claims
from agent.spark.directories import Directories
from agent.spark.driver import stopping
from agent.spark.driver.manager import ManagerSettings
from agent.spark.eventlog import stores
from agent.spark.eventlog.inotify import DirectoryWatch
from agent.spark.eventlog.layout import LogRef
from agent.spark.eventlog.records import RecordBatch
from agent.spark.followed import Followed
from agent.spark.leasing import Leasing
from agent.spark.problems import LogProblems
from agent.spark.tablemeta import DiskTableMetadata
from agent.state.db import LogPosition
from agent.state.store import LeaseLost, Leases, StateStore, Term, call
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")

RESCAN_EVERY: Final = 30.0  # seconds between full directory scans when inotify is working


class SparkSource:
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
    ) -> None:
        self.spark = spark
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
        self._stops = state.stop_requests()  # kept in step by request_stop
        local = [d for d in spark.event_log_dirs if not stores.is_url(d)]
        self._dirs = Directories(local)
        self._store_dirs = Directories([d for d in spark.event_log_dirs if stores.is_url(d)])
        self._store_pass = False  # this pass lists and reads the logs on stores
        self._store_requests = stores.requests()
        self._skipped_by_horizon = 0
        self._use_inotify = use_inotify
        self._wake = asyncio.Event()
        self._fs = DirectoryWatch(local, self._wake)
        self._sink: Sink | None = None
        self._first_scan = True

    @classmethod
    def from_config(cls, config: AgentConfig, context: SourceContext) -> SparkSource:
        return cls(
            config.spark,
            config.lineage.namespace,
            context.state_db,
            context.metrics,
            context.health,
        )

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        self._sink = sink
        loop = asyncio.get_running_loop()
        if self._use_inotify:
            self._fs.start(loop, self.spark.poll_interval)
        last_scan = 0.0
        last_store_scan = -self.spark.store_poll_interval
        beats = None
        if self.leasing is not None:
            beats = asyncio.create_task(self.leasing.run(self._terms_held, stop), name="leases")
        try:
            while not stop.is_set():
                # Cleared before reading, so a change notified during the read wakes the
                # next pass at once instead of waiting for Spark's next write.
                self._wake.clear()
                # Applications of an agent that died are taken once their lease expires.
                orphaned = self.leasing is not None and self.leasing.take_orphaned()
                self._let_go_of_lost()
                now = time.monotonic()
                local_pass = (
                    not self._fs.available
                    or self._fs.rescan
                    or self._first_scan
                    or bool(self._dirs.missing)  # not watchable yet: look each poll interval
                    or now - last_scan >= RESCAN_EVERY
                    or (orphaned and bool(self._dirs.paths))
                )  # a bool, not the set itself: listing empties that set
                self._store_pass = bool(self._store_dirs.paths) and (
                    now - last_store_scan >= self.spark.store_poll_interval or orphaned
                )
                listed: dict[str, list[LogRef]] = {}
                if local_pass:
                    self._fs.rescan = False
                    listed.update(await self._dirs.list())
                    last_scan = now
                if self._store_pass:
                    listed.update(await self._store_dirs.list(self._finished))
                    last_store_scan = now
                if local_pass or self._store_pass:  # one discovery: the first sees all
                    await self._discover(listed)
                self.claims.new_pass()
                await self._pump_all(stop)
                await self._check_stale()
                self.metrics.applications.set(sum(1 for a in self.apps.values() if not a.closed))
                self.metrics.leases_held.set(
                    sum(1 for a in self.apps.values() if a.token is not None)
                )
                self._count_store_requests()
                waiter = asyncio.create_task(self._wake.wait())
                stopper = asyncio.create_task(stop.wait())
                await asyncio.wait(
                    {waiter, stopper},
                    timeout=self.spark.poll_interval,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
                stopper.cancel()
        finally:
            self._fs.stop(loop)
            if beats is not None:
                beats.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beats
            self.claims.new_pass()
            for app in list(self.apps.values()):
                with contextlib.suppress(LeaseLost):
                    await self._save(app)
                app.log.close()
                await self._release(app)  # another agent may take it at once

    def wake(self) -> None:
        self._wake.set()

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

    async def _discover(self, listed: Mapping[str, list[LogRef]]) -> None:
        horizon = self.spark.replay_horizon
        now_ns = time.time_ns()
        lost_state = self._first_scan and self.state.recreated and not self.spark.replay_existing
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
                    self._finished.add(key)
                    if ref.special:
                        self.metrics.eventlog_lines_skipped.labels(reason="special_file").inc()
                    log.error("eventlog_unreadable", log=ref.path, error=ref.error)
                    continue
                old = horizon > 0 and (now_ns - ref.mtime_ns) / 1e9 > horizon
                # After a lost state database, logs finished before it was made were handled.
                lost = lost_state and ref.mtime_ns < self.state.opened_ns
                if self._first_scan and ref.complete and (old or lost):
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
        if self._first_scan and self._skipped_by_horizon:
            log.info(
                "eventlogs_skipped_by_horizon",
                count=self._skipped_by_horizon,
                horizon_seconds=horizon,
            )
        if self._first_scan and lost_state:
            log.warning(
                "state_database_recreated",
                path=str(self.state.path),
                found=self.state.lost_as,
                eventlogs_skipped=skipped_as_handled,
                detail="the state database was lost: completed event logs older than it are "
                "taken as already emitted (spark.replay_existing: true replays them)",
            )
        self._first_scan = False

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

    def _lose(self, app: Followed) -> None:
        """Stop following an application whose lease this agent lost; what it still held
        unclaimed is another agent's to emit (never this one's: its writes are fenced), and
        what it claimed and did not send yet never leaves (`Term.lost`)."""
        if app.term is not None:
            app.term.lost = True
        if self.apps.get(app.key) is not app:
            return
        del self.apps[app.key]
        app.log.close()
        log.warning(
            "lease_lost",
            key=app.key,
            owner=self.leasing.owner if self.leasing else None,
            token=app.token,
            held_events=len(app.pending),
            detail="another agent continues this application from the events claimed",
        )

    async def _release(self, app: Followed) -> None:
        if self.leasing is not None and app.term is not None:
            await self.leasing.release(app.term)

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

    # -- reading -----------------------------------------------------------------------------

    async def _pump_all(self, stop: asyncio.Event) -> None:
        # Iterate over keys, not a list of apps: a finished app must be freed during the pass.
        for key in list(self.apps):
            app = self.apps.get(key)
            if app is None:
                continue
            if stop.is_set() or self.claims.refused:
                return
            if app.term is not None and app.term.lost:
                self._lose(app)
                continue
            if app.remote and not self._store_pass:
                continue  # read at the store's own interval
            try:
                await self._pump(app)
            except Exception as error:  # one log must never stop the others
                self._abandon(app, error)

    def _abandon(self, app: Followed, error: Exception) -> None:
        """A failure nothing else handled: stop following this log until the next start."""
        log.error("eventlog_failed", log=app.log.ref.path, error=repr(error), exc_info=error)
        self.problems.record(app, "internal", f"{type(error).__name__}: {error}")
        app.log.close()
        self.apps.pop(app.key, None)
        self._finished.add(app.key)  # in memory only: the next start tries it again

    async def _pump(self, app: Followed) -> None:
        reader = app.log.reader
        if not await self._emit(app, []):
            return  # read no further while its events cannot be claimed
        while True:
            batch = await asyncio.to_thread(app.log.read)
            self.metrics.eventlog_bytes.inc(batch.bytes_read)
            if app.codec_pending and reader.ref.files:
                app.codec_pending = False
                log.info("eventlog_codec", log=reader.ref.path, codec=reader.ref.codec)
            if batch.lines:
                app.last_growth = time.monotonic()
            self.problems.report(app, batch)
            events = await self._translate(app, batch)
            events += verdicts.overdue(app, self.spark.exec_verdict_wait)
            if app.log.table_metadata_wanted:  # table metadata on disk: off the event loop
                events = await asyncio.to_thread(app.log.finish, events)
            else:
                events = app.log.finish(events)
            self.problems.report_malformed(app, app.log.take_malformed())
            for warning in app.log.take_warnings():
                log.warning("translate_warning", log=app.log.ref.path, detail=warning)
            held = not await self._emit(app, events)
            if app.quiet and (reader.caught_up or reader.gone) and not held:
                app.quiet = False
                log.info(
                    "eventlog_caught_up",
                    log=app.log.ref.path,
                    events_taken_as_emitted=app.quieted,
                    detail="the state database was lost: the events of what this log held "
                    "at the start are taken as already emitted; later ones are sent",
                )
            if reader.caught_up or reader.gone or held:  # else it stopped at its batch size
                break
            await asyncio.sleep(0)  # a large log must not starve the deliveries
            if app.term is not None and app.term.lost:
                self._lose(app)
                return
        if self.apps.get(app.key) is not app:
            return  # its lease was lost meanwhile
        if (reader.exhausted or reader.gone) and not app.log.translator.awaiting_verdict:
            await self._finish(app)

    async def _translate(self, app: Followed, batch: RecordBatch) -> list[dict[str, Any]]:
        """Translate in a worker thread, so that no log, however large or hostile its lines,
        holds the event loop (metrics, health, control and the watchdog answer meanwhile);
        the verdict look-up in the state database stays on the loop."""
        if batch.records:
            app.summary = app.log.translator.snapshot()
            app.busy = True
            try:
                events = await asyncio.to_thread(app.log.translate, batch)
            finally:
                app.busy = False
        else:
            events = []
        return events + app.log.settle()

    async def _emit(self, app: Followed, events: list[dict[str, Any]]) -> bool:
        """Claim `events` (after those still held) and hand the fresh ones on; False while
        the state database refuses them (they stay held, in order)."""
        app.pending.extend(events)
        if self._sink is None:
            return True
        try:
            fresh = await self.claims.claim(app.key, list(app.pending), app.token)
        except LeaseLost:
            self._lose(app)
            return False
        if fresh is None:
            return False
        app.pending = []
        term = app.term
        if term is not None:
            term.claimed += len(fresh)
        if app.quiet:  # claimed, so never sent later either, but not sent now
            app.quieted += len(fresh)
            if term is not None:
                term.resolved += len(fresh)
            return True
        for event in fresh:
            self._sink(app.app_id, event, term)
        return True

    async def _finish(self, app: Followed) -> None:
        """The log will not grow: close what is still open, remember it as finished."""
        if app.log.reader.gone:
            log.warning("eventlog_gone", log=app.log.ref.path)
        ended = app.log.end(cause="driver_lost", message=LOG_ENDED)
        if ended:
            self.metrics.applications_ended.labels(cause="log_ended").inc()
        # Both must reach the database before the log counts as finished; until then the
        # next pass tries again (closing twice ends nothing twice).
        if not await self._emit(app, ended):
            return
        try:
            if not await self._save(app, True):
                return
        except LeaseLost:
            self._lose(app)
            return
        self._finished.add(app.key)
        app.log.close()
        del self.apps[app.key]
        await self._release(app)
        log.info("eventlog_finished", log=app.log.ref.path, app_id=app.log.translator.app_id)

    async def _save(self, app: Followed, finished: bool = False) -> bool:
        """Remember how far the log was read (fenced by its lease): False while refused."""
        position = app.log.reader.position
        saved = LogPosition(
            app.key,
            position.path if position else app.log.ref.path,
            position.dev if position else None,
            position.ino if position else None,
            position.consumed if position else 0,
            finished,
        )
        return await self.claims.store(self.state.save_position, saved, token=app.token)

    # -- stale in-progress logs ----------------------------------------------------------------

    async def _check_stale(self) -> None:
        ended = await liveness.close_dead(
            list(self.apps.values()),
            stale_after=self.spark.stale_after,
            stops=self._stops.get,
            on_lost=self.metrics.applications_ended.labels(cause="driver_lost").inc,
            managers=self._managers(),
        )
        for app, events in ended:
            await self._emit(app, events)

    def _managers(self) -> ManagerSettings:
        return ManagerSettings(self.spark.master_ui_port, self.spark.yarn_resourcemanager_url)

    # -- control (ApplicationControl) ------------------------------------------------------------

    def find(self, app_id: str) -> Followed | None:
        for app in self.apps.values():
            if app.log.translator.app_id == app_id or app.log.ref.key == app_id.lower():
                return app
        return None

    def applications(self) -> list[ApplicationStatus]:
        return [app.status() for app in self.apps.values()]

    def application(self, app_id: str) -> ApplicationStatus | None:
        app = self.find(app_id)
        return None if app is None else app.status()

    def request_stop(self, app_id: str, reason: str, requested_by: str) -> None:
        """Apply a stop request: the application's runs will end ABORT with `reason`
        (`record_stop` keeps it in the state database, for restarts and other agents)."""
        self._stops[app_id] = (reason, requested_by)
        app = self.find(app_id)
        if app is not None:
            app.log.translator.request_stop(reason=reason, requested_by=requested_by)
            if app.busy and app.summary is not None:  # the view taken before the thread
                app.summary = dataclasses.replace(app.summary, stop_requested=True)

    def verdict_arrived(self, exec_id: str) -> list[str]:
        """A verdict of `lineage-agent exec` is in the state database: look at once; the
        applications followed now that this run of `exec` started."""
        self.wake()
        return [a.app_id for a in self.apps.values() if a.log.translator.exec_id == exec_id]

    async def stop_application(
        self, app_id: str, *, reason: str, requested_by: str, grace: float
    ) -> StopOutcome:
        app = self.find(app_id)
        if app is None or app.log.reader.complete or app.closed:
            raise ControlError(f"application {app_id} is not running on this node")
        if app.remote:
            raise ControlError(
                f"application {app_id} logs to a shared store and its driver runs elsewhere: "
                "job stop cannot reach it from here; stop it through the cluster manager"
            )
        pids = await asyncio.to_thread(
            stopping.driver_pids,
            app.log.driver,
            app.live_paths(),
            app_id,
            managers=self._managers(),
        )
        began = time.monotonic()
        stopping.terminate(
            pids, otherwise=stopping.through_manager(app.log.driver, app_id, self._managers())
        )
        # No await since the signal: the log cannot have been read past ApplicationEnd yet.
        self.request_stop(app_id, reason, requested_by)
        try:
            await call(self.state, self.state.record_stop, app_id, reason, requested_by)
        except self.state.write_errors as error:  # applied here all the same
            log.error("stop_not_recorded", app_id=app_id, error=str(error))
        log.info("job_stop", app_id=app_id, pids=pids, reason=reason, requested_by=requested_by)
        used = await liveness.end_driver(pids, grace)
        # Without ApplicationEnd (SIGKILL), the runs end ABORT once the log stops growing.
        app.stop_pending = time.monotonic()
        self.wake()
        return StopOutcome(
            app_id, tuple(pids), used, round(time.monotonic() - began, 3), requested_by, reason
        )
