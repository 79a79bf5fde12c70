"""What the Spark source does with each followed application on a pass: read its new lines
(in a worker thread), translate them (in a worker thread too), complete them from tables'
metadata, claim the events in the state database and hand the fresh ones to the sink; end a
log that will not grow and remember it as finished; end the runs of stale drivers
(`liveness`); let go of an application whose lease was lost.

`Pumping` is the part of `SparkSource` (`source`) that does this; the source's loop decides
which applications are followed and when a pass runs. Events that cannot be claimed stay
held, in order, and the application is read no further until the database takes them; a
failure on one log stops following that log only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from agent.config.model import SparkConfig
from agent.source import Sink
from agent.spark.eventlog.records import RecordBatch
from agent.spark.follow import liveness, verdicts
from agent.spark.follow.application import LOG_ENDED
from agent.spark.follow.claims import Claims
from agent.spark.follow.driver.manager import ManagerSettings
from agent.spark.follow.driver.outbound import Guard
from agent.spark.follow.followed import Followed
from agent.spark.follow.leasing import Leasing
from agent.spark.follow.problems import LogProblems
from agent.state.db import LogPosition
from agent.state.store import LeaseLost, StateStore
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")


class Pumping:
    """Reads, translates, claims and hands on each followed application's events."""

    spark: SparkConfig
    state: StateStore
    metrics: Metrics
    claims: Claims
    leasing: Leasing | None
    problems: LogProblems
    apps: dict[str, Followed]  # log key -> the application followed
    _finished: set[str]  # log keys not to read again
    _abandoned: set[str]  # of those, the ones the state does not hold as finished
    _stops: dict[str, tuple[str, str]]  # app id -> (reason, requested by)
    _sink: Sink | None
    guard: Guard  # what liveness lookups may ask, and how often

    # -- reading -----------------------------------------------------------------------------

    async def _pump_all(self, stop: asyncio.Event, which: Callable[[str], bool]) -> None:
        """Pump the applications whose key `which` takes (the local ones, or one store's:
        each is pumped by one task only)."""
        # Iterate over keys, not a list of apps: a finished app must be freed during the pass.
        for key in list(self.apps):
            app = self.apps.get(key)
            if app is None or not which(key):
                continue
            if stop.is_set() or self.claims.refused:
                return
            if app.term is not None and app.term.lost:
                self._lose(app)
                continue
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
        self._abandoned.add(app.key)

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

    async def _check_stale(self, which: Callable[[str], bool]) -> None:
        ended = await liveness.close_dead(
            [app for key, app in self.apps.items() if which(key)],
            stale_after=self.spark.stale_after,
            stops=self._stops.get,
            on_lost=self.metrics.applications_ended.labels(cause="driver_lost").inc,
            managers=self._managers(),
            guard=self.guard,
        )
        for app, events in ended:
            await self._emit(app, events)

    def _managers(self) -> ManagerSettings:
        return ManagerSettings(self.spark.master_ui_port, self.spark.yarn_resourcemanager_url)

    # -- letting go -------------------------------------------------------------------------

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
