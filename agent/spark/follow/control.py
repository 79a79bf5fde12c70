"""The Spark source's answers to the control socket (`ApplicationControl`): the applications
followed now, a stop request applied to one, a verdict of `exec` arrived, and `job stop`,
which signals a driver running on this node and waits for it to end (`driver.stopping`,
`liveness.end_driver`).

`Control` is the part of `SparkSource` (`source`) that answers them, on top of `Pumping`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import structlog

from agent.errors import ControlError
from agent.source import ApplicationStatus, StopOutcome
from agent.spark.follow import liveness
from agent.spark.follow.driver import stopping
from agent.spark.follow.followed import Followed
from agent.spark.follow.pumping import Pumping
from agent.state.store import call

log = structlog.get_logger("agent.spark")


class Control(Pumping):
    """What `status`, `describe`, `job stop` and `exec` ask of the source."""

    _wake: asyncio.Event  # set to run the next pass at once

    def wake(self) -> None:
        self._wake.set()

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
