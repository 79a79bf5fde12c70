"""The Spark source: discover event logs, tail them, translate, claim and hand events on.

One loop, woken by inotify (or by the poll interval on file systems without it): for every
application log that is not finished it reads the new complete lines, parses only the lines
the translator needs, feeds them in order, claims the resulting events in the state
database (so none is ever emitted twice, across restarts too) and passes the fresh ones to
the pipeline. A finished log (complete and read to the end) is remembered and not read
again. After a restart an unfinished log is read again from its start: translation is pure,
so the same events come out and the claims drop those already emitted, while the terminal
events of runs that ended while the agent was down are emitted now.

The state database may refuse a write for a while (locked by another process, its disk
full). Events are then held, not dropped and not emitted unclaimed: an application whose
events cannot be claimed is not read further until the database takes them, so memory stays
bounded, and a failure on one log (a bug, whatever the input) never stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from agent.config import AgentConfig, SparkConfig
from agent.health import HealthTracker, LineageError
from agent.metrics import Metrics
from agent.source import Sink
from agent.spark import liveness as driver
from agent.spark.eventlog.layout import LogRef, scan
from agent.spark.eventlog.reader import LogReader
from agent.spark.translate.listener import wanted
from agent.spark.translate.translator import ApplicationTranslator, TranslateOptions
from agent.state import LogPosition, StateDB

if TYPE_CHECKING:
    from agent.daemon import Daemon

log = structlog.get_logger("agent.spark")

READ_BATCH = 4 * 1024 * 1024  # decoded bytes per read before yielding to the event loop
RESCAN_EVERY = 30.0  # seconds between full directory scans when inotify is working
STOPPED_GRACE = 2.0  # seconds without growth after `job stop` before runs are ended ABORT
_ENV = b'"Event":"SparkListenerEnvironmentUpdate"'


@dataclass
class _App:
    """One application log being followed."""

    key: str  # directory + "/" + log name: the state database's key
    ref: LogRef
    reader: LogReader
    translator: ApplicationTranslator
    last_size: int = -1
    last_growth: float = field(default_factory=time.monotonic)
    ui_port: int | None = None
    stop_checked: bool = False
    closed: bool = False  # ended as driver lost; followed lazily in case it grows again
    stop_pending: float | None = None  # monotonic time a `job stop` ended its driver
    corrupt: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)  # translated, not yet claimed

    @property
    def execution(self) -> str:
        return self.translator.app_id or self.ref.key


class SparkSource:
    """Follows every Spark application logged under `spark.event_log_dirs`."""

    name = "spark"

    def __init__(
        self,
        spark: SparkConfig,
        namespace: str,
        state: StateDB,
        metrics: Metrics,
        health: HealthTracker | None = None,
        *,
        use_inotify: bool = True,
    ) -> None:
        self.spark = spark
        self.options = TranslateOptions(
            namespace=spark.namespace or namespace,
            emit_empty_executions=spark.emit_empty_executions,
            running_interval_ms=int(spark.running_interval * 1000),
            column_lineage_max_fields=spark.column_lineage_max_fields,
        )
        self.state = state
        self.metrics = metrics
        self.health = health or HealthTracker()
        self.apps: dict[str, _App] = {}
        self._finished: set[str] = state.finished_keys()
        self._missing_logged: set[str] = set()
        self._skipped_by_horizon = 0
        self._use_inotify = use_inotify
        self._inotify: Any = None
        self._watches: dict[int, str] = {}
        self._watched: set[str] = set()
        self._wake = asyncio.Event()
        self._sink: Sink | None = None
        self._first_scan = True
        self._rescan_now = False
        self._state_error: str | None = None  # the state database refuses writes
        # A refused write in this pass: try no more this pass (a locked database costs a
        # busy wait per attempt, and the deliveries share this thread).
        self._refused_this_pass = False

    @classmethod
    def from_config(cls, config: AgentConfig, daemon: Daemon) -> SparkSource:
        assert daemon.state_db is not None
        source = cls(
            config.spark, config.lineage.namespace, daemon.state_db, daemon.metrics, daemon.health
        )
        daemon.spark_source = source
        return source

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        self._sink = sink
        loop = asyncio.get_running_loop()
        self._start_inotify(loop)
        last_scan = 0.0
        try:
            while not stop.is_set():
                # Cleared before reading, so a change notified during the read wakes the
                # next pass at once instead of waiting for Spark's next write.
                self._wake.clear()
                now = time.monotonic()
                if (
                    self._inotify is None
                    or self._rescan_now
                    or self._first_scan
                    or self._missing_logged  # not watchable yet: look each poll interval
                    or now - last_scan >= RESCAN_EVERY
                ):
                    self._rescan_now = False
                    self._discover()
                    last_scan = now
                self._refused_this_pass = False
                await self._pump_all(stop)
                await self._check_stale()
                self.metrics.applications.set(sum(1 for a in self.apps.values() if not a.closed))
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
            self._stop_inotify(loop)
            self._refused_this_pass = False
            for app in self.apps.values():
                self._stored(self._save, app)
                app.reader.close()

    def wake(self) -> None:
        self._wake.set()

    # -- discovery ---------------------------------------------------------------------------

    def _discover(self) -> None:
        horizon = self.spark.replay_horizon
        now_ns = time.time_ns()
        for directory in self.spark.event_log_dirs:
            try:
                refs = scan(directory)
            except FileNotFoundError:
                if directory not in self._missing_logged:
                    log.warning(
                        "eventlog_dir_missing",
                        directory=directory,
                        detail="waiting for it to appear",
                    )
                    self._missing_logged.add(directory)
                continue
            except OSError as error:
                if directory not in self._missing_logged:
                    log.error("eventlog_dir_unreadable", directory=directory, error=error.strerror)
                    self._missing_logged.add(directory)
                continue
            if directory in self._missing_logged:
                self._missing_logged.discard(directory)
                log.info("eventlog_dir_found", directory=directory)
            self._watch(directory)
            for ref in refs:
                key = f"{directory.rstrip('/')}/{ref.key}"
                if key in self._finished:
                    continue
                app = self.apps.get(key)
                if app is not None:
                    if ref.layout == "rolling":
                        self._watch(ref.path)
                    continue
                if ref.error is not None:
                    self._finished.add(key)
                    log.error("eventlog_unreadable", log=ref.path, error=ref.error)
                    continue
                first_sight = self.state.position(key) is None
                if (
                    self._first_scan
                    and first_sight
                    and ref.complete
                    and horizon > 0
                    and (now_ns - ref.mtime_ns) / 1e9 > horizon
                ):
                    # An old, finished application: not replayed unless the horizon says so.
                    position = LogPosition(key, ref.path, None, None, 0, True)
                    if self._stored(self.state.save_position, position):
                        self._finished.add(key)
                        self._skipped_by_horizon += 1
                    continue
                self._follow(key, ref)
        if self._first_scan and self._skipped_by_horizon:
            log.info(
                "eventlogs_skipped_by_horizon",
                count=self._skipped_by_horizon,
                horizon_seconds=horizon,
            )
        self._first_scan = False

    def _follow(self, key: str, ref: LogRef) -> None:
        reader = LogReader(ref, max_line_bytes=self.spark.max_line_bytes)
        self.apps[key] = _App(key, ref, reader, ApplicationTranslator(self.options))
        if ref.layout == "rolling":
            self._watch(ref.path)
        log.info(
            "eventlog_followed",
            log=ref.path,
            layout=ref.layout,
            codec=ref.codec,
            complete=ref.complete,
        )

    # -- reading -----------------------------------------------------------------------------

    async def _pump_all(self, stop: asyncio.Event) -> None:
        # Iterate over keys, not a list of apps: a finished app must be freed during the pass.
        for key in list(self.apps):
            app = self.apps.get(key)
            if app is None:
                continue
            if stop.is_set() or self._refused_this_pass:
                return
            try:
                await self._pump(app)
            except Exception as error:  # one log must never stop the others
                self._abandon(app, error)

    def _abandon(self, app: _App, error: Exception) -> None:
        """A failure nothing else handled: stop following this log until the next start."""
        log.error("eventlog_failed", log=app.ref.path, error=repr(error), exc_info=error)
        self._health(app, "internal", f"{type(error).__name__}: {error}")
        app.reader.close()
        self.apps.pop(app.key, None)
        self._finished.add(app.key)  # in memory only: the next start tries it again

    async def _pump(self, app: _App) -> None:
        reader = app.reader
        if not self._claim_pending(app):
            return  # read no further while its events cannot be claimed
        while True:
            before = reader.bytes_read
            lines = await asyncio.to_thread(reader.read_available, READ_BATCH)
            self.metrics.eventlog_bytes.inc(reader.bytes_read - before)
            if lines:
                app.last_growth = time.monotonic()
                self._translate(app, lines)
            self._report_reader(app)
            if reader.caught_up or reader.gone or not lines or app.pending:
                break
            await asyncio.sleep(0)  # a large log must not starve the deliveries
        if reader.exhausted or reader.gone:
            self._finish(app)

    def _translate(self, app: _App, lines: list[bytes]) -> None:
        translator = app.translator
        events: list[dict[str, Any]] = []
        for line in lines:
            if not wanted(line):
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                self._corrupt(app, str(error))
                continue
            if app.ui_port is None and _ENV in line[:64]:
                app.ui_port = _ui_port(record)
            events.extend(translator.feed(record))
            if not app.stop_checked and translator.app_id is not None:
                app.stop_checked = True
                request = self.state.stop_request(translator.app_id)
                if request is not None:
                    translator.request_stop(reason=request[0], requested_by=request[1])
        for warning in translator.warnings:
            log.warning("translate_warning", log=app.ref.path, detail=warning)
        translator.warnings.clear()
        self._emit(app, events)

    def _emit(self, app: _App, events: list[dict[str, Any]]) -> bool:
        """Claim and hand on `events` after those still pending; False if they are held."""
        app.pending.extend(events)
        return self._claim_pending(app)

    def _claim_pending(self, app: _App) -> bool:
        """Claim the held events of `app` and pass the fresh ones on; False while the state
        database refuses (the events stay held, in order, for the next try)."""
        if not app.pending or self._sink is None:
            return True
        if self._refused_this_pass:
            return False
        try:
            fresh = self.state.claim(app.key, app.pending)
        except sqlite3.Error as error:
            self._state_failed(error, len(app.pending))
            return False
        app.pending = []
        self._state_recovered()
        for event in fresh:
            self._sink(app.execution, event)
        return True

    def _stored(self, write: Any, *args: Any) -> bool:
        """Run one state-database write; False (logged) when the database refuses it."""
        if self._refused_this_pass:
            return False
        try:
            write(*args)
        except sqlite3.Error as error:
            self._state_failed(error, 0)
            return False
        return True

    def _state_failed(self, error: sqlite3.Error, held: int) -> None:
        self._refused_this_pass = True
        if self._state_error is None:  # logged once per outage
            log.error(
                "state_write_failed",
                path=str(self.state.path),
                error=str(error),
                held_events=held,
                detail="events are held and claimed once the state database takes writes",
            )
        self._state_error = str(error)

    def _state_recovered(self) -> None:
        if self._state_error is not None:
            log.info("state_write_recovered", path=str(self.state.path), after=self._state_error)
            self._state_error = None

    def _corrupt(self, app: _App, detail: str) -> None:
        app.corrupt += 1
        self.metrics.eventlog_lines_skipped.labels(reason="corrupt_json").inc()
        position = app.reader.position
        if app.corrupt == 1:  # logged once per log; the metric counts every one
            log.warning(
                "eventlog_corrupt_line",
                log=position.path if position else app.ref.path,
                near_line=position.lines if position else None,
                detail=detail[:200],
            )
        self._health(app, "corrupt_json", detail[:200])

    def _report_reader(self, app: _App) -> None:
        for skipped in app.reader.take_skipped():
            self.metrics.eventlog_lines_skipped.labels(reason="too_long").inc()
            log.warning(
                "eventlog_line_skipped",
                log=skipped.path,
                line=skipped.line_no,
                reason=skipped.reason,
            )
            self._health(app, "line_too_long", f"{skipped.path}:{skipped.line_no}")
        for error in app.reader.take_errors():
            self.metrics.eventlog_lines_skipped.labels(reason="read_error").inc()
            log.error(
                "eventlog_read_error", log=error.path, offset=error.offset, detail=error.detail
            )
            self._health(app, "read_error", f"{error.path}@{error.offset}: {error.detail}")

    def _health(self, app: _App, reason: str, detail: str) -> None:
        self.health.record(
            app.execution,
            LineageError(time.time(), reason, "eventlog", "", "", detail, component="eventlog"),
        )

    def _finish(self, app: _App) -> None:
        """The log will not grow: close what is still open, remember it as finished."""
        if app.reader.gone:
            log.warning("eventlog_gone", log=app.ref.path)
        ended = app.translator.close(
            cause="driver_lost",
            time_ms=app.reader.ref.mtime_ns // 1_000_000,
            message="the event log ended without ApplicationEnd for this run",
        )
        # Both must reach the database before the log counts as finished; until then the
        # next pass tries again (closing twice ends nothing twice).
        if not self._emit(app, ended) or not self._stored(self._save, app, True):
            return
        self._finished.add(app.key)
        app.reader.close()
        del self.apps[app.key]
        log.info("eventlog_finished", log=app.ref.path, app_id=app.translator.app_id)

    def _save(self, app: _App, finished: bool = False) -> None:
        position = app.reader.position
        self.state.save_position(
            LogPosition(
                app.key,
                position.path if position else app.ref.path,
                position.dev if position else None,
                position.ino if position else None,
                position.consumed if position else 0,
                finished,
            )
        )

    # -- stale in-progress logs ----------------------------------------------------------------

    async def _check_stale(self) -> None:
        now = time.monotonic()
        for app in list(self.apps.values()):
            if app.stop_pending is not None and not app.closed and not app.reader.complete:
                if now - max(app.stop_pending, app.last_growth) >= STOPPED_GRACE:
                    self._close_stopped(app)
                continue
            if app.closed or app.reader.complete or now - app.last_growth < self.spark.stale_after:
                continue
            paths = app.reader.ref.paths
            alive = await asyncio.to_thread(
                driver.driver_alive, paths, app.ui_port, app.translator.app_id
            )
            if alive:
                app.last_growth = now  # check again after another stale_after
                continue
            app.closed = True
            message = (
                f"the driver is gone: the event log has not grown for "
                f"{self.spark.stale_after:g}s, no process holds it open and the driver UI "
                f"does not answer"
            )
            ended = app.translator.close(
                cause="driver_lost", time_ms=app.reader.ref.mtime_ns // 1_000_000, message=message
            )
            log.warning(
                "driver_lost", log=app.ref.path, app_id=app.translator.app_id, runs_ended=len(ended)
            )
            self._emit(app, ended)

    def _close_stopped(self, app: _App) -> None:
        """The driver was stopped from outside and wrote no ApplicationEnd: end runs ABORT."""
        app.closed = True
        request = self.state.stop_request(app.execution)
        reason = request[0] if request else "stopped from outside"
        ended = app.translator.close(
            cause="stopped",
            time_ms=app.reader.ref.mtime_ns // 1_000_000,
            message=f"stopped with lineage-agent job stop: {reason}",
        )
        log.info(
            "application_stopped",
            log=app.ref.path,
            app_id=app.translator.app_id,
            runs_ended=len(ended),
        )
        self._emit(app, ended)

    # -- control -------------------------------------------------------------------------------

    def find(self, app_id: str) -> _App | None:
        for app in self.apps.values():
            if app.translator.app_id == app_id or app.ref.key == app_id.lower():
                return app
        return None

    def stopped_by_agent(self, app_id: str) -> None:
        """`job stop` ended the driver: if no ApplicationEnd follows soon, end its runs ABORT."""
        app = self.find(app_id)
        if app is not None:
            app.stop_pending = time.monotonic()
        self.wake()

    def request_stop(self, app_id: str, reason: str, requested_by: str) -> _App | None:
        """Record a stop request: the application's runs will end ABORT with `reason`."""
        self.state.record_stop(app_id, reason, requested_by)
        app = self.find(app_id)
        if app is not None:
            app.translator.request_stop(reason=reason, requested_by=requested_by)
        return app

    # -- inotify -------------------------------------------------------------------------------

    def _start_inotify(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._use_inotify:
            return
        try:
            from inotify_simple import INotify
        except ImportError:  # pragma: no cover - a declared dependency
            return
        try:
            self._inotify = INotify(nonblocking=True)
        except OSError as error:
            log.warning(
                "inotify_unavailable",
                error=error.strerror,
                detail=f"polling every {self.spark.poll_interval:g}s",
            )
            return
        loop.add_reader(self._inotify.fileno(), self._on_inotify)

    def _stop_inotify(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._inotify is not None:
            loop.remove_reader(self._inotify.fileno())
            self._inotify.close()
            self._inotify = None

    def _watch(self, path: str) -> None:
        if self._inotify is None or path in self._watched:
            return
        from inotify_simple import flags

        mask = (
            flags.CREATE
            | flags.MODIFY
            | flags.MOVED_TO
            | flags.CLOSE_WRITE
            | flags.DELETE
            | flags.MOVED_FROM
        )
        try:
            wd = self._inotify.add_watch(path, mask)
        except OSError as error:
            log.warning("inotify_watch_failed", path=path, error=error.strerror)
            return
        self._watches[wd] = path
        self._watched.add(path)

    def _on_inotify(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            events = []
        from inotify_simple import flags

        for event in events:
            if event.mask & flags.Q_OVERFLOW or (
                event.mask & (flags.CREATE | flags.MOVED_TO)
                and self._watches.get(event.wd) in self.spark.event_log_dirs
            ):
                self._rescan_now = True  # a new log, or events were lost: rescan now
            if event.mask & flags.IGNORED:
                path = self._watches.pop(event.wd, None)
                if path is not None:
                    self._watched.discard(path)
        self._wake.set()


def _ui_port(record: Any) -> int | None:
    # Any JSON value can sit on a line that merely contains the event's name.
    props = record.get("Spark Properties") if isinstance(record, dict) else None
    if isinstance(props, dict):
        with contextlib.suppress(TypeError, ValueError):
            return int(props.get("spark.ui.port", 0)) or None
    return None
