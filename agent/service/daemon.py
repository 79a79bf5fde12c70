"""Startup -> run -> drain -> shutdown; signals, reloads and sd_notify.

Raises StartError (`agent.errors`) when the agent cannot start as configured (what
`agent.service.preflight` checks, the state database, a transport lock, another agent answering on
the control socket); `commands/run.py` maps it, like ConfigError, to exit 78 so that systemd does
not restart in a loop.

`Daemon.run` returns "stopped" after a stop request (or when a finite source ran out), and
"source_failed" when the source died of an error: the queue is still drained and the
accounting logged, and `run` exits non-zero so that systemd's `Restart=on-failure` starts
the agent again, which picks the event logs up where the claims say it left them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import structlog
from prometheus_client import CollectorRegistry

from agent import __version__
from agent.config.loader import load_config
from agent.config.model import AgentConfig
from agent.delivery.deliveries import Deliveries, open_spool
from agent.delivery.pipeline import Pipeline
from agent.delivery.shaping import shaping
from agent.delivery.signing import Signer
from agent.delivery.transports.base import Transport
from agent.delivery.transports.factory import build_transports
from agent.errors import AgentError, StartError, StateError
from agent.fsutil import raise_open_files_limit
from agent.service.control.connections import ControlLimits
from agent.service.control.server import ControlServer
from agent.service.owned import OwnedFiles
from agent.service.preflight import check_startup
from agent.service.reload import apply_config, signer_of
from agent.service.sdnotify import Notifier, watchdog_interval
from agent.source import ApplicationControl, Source, SourceContext, StoreReport, StoreStatus
from agent.state.opening import open_state
from agent.state.reach import Reachable
from agent.state.store import StateStore, call
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics, MetricsServer

log = structlog.get_logger("agent.daemon")

SourceFactory = Callable[[AgentConfig, SourceContext], Source]
#: How a run of the agent ended.
Outcome = Literal["stopped", "source_failed"]
#: Where the agent is in its life, as `status` and /healthz show it.
Phase = Literal["starting", "running", "stopping", "stopped", "disabled"]


@dataclass
class Daemon:
    """The running agent: owns the pipeline, its deliveries, the source and the endpoints."""

    config: AgentConfig
    source_factory: SourceFactory
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    notifier: Notifier = field(default_factory=Notifier)
    control_limits: ControlLimits = field(default_factory=ControlLimits)

    def __post_init__(self) -> None:
        self.metrics = Metrics(self.registry)
        self.health = HealthTracker()
        self.owned = OwnedFiles()
        self.started = time.time()
        self.phase: Phase = "starting"
        self._stop = asyncio.Event()
        self._reload = asyncio.Event()
        self._intake_stop = asyncio.Event()
        self.pipeline: Pipeline | None = None
        self.metrics_server: MetricsServer | None = None
        self.state_db: StateStore | None = None
        self.applications: ApplicationControl | None = None  # the source's, if it follows any
        self.deliveries: Deliveries | None = None
        self.control: ControlServer | None = None
        # The socket bound at start; a reload may rebind it, a new path needs a restart.
        self._control_path = self.config.control_socket

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self) -> Outcome:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, self._reload.set)
        # A file-size limit must fail a write (EFBIG), not kill the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        raise_open_files_limit()
        try:
            if not self.config.lineage.enabled:
                return await self._run_disabled()
            return await self._run_enabled()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(signum)
            self.notifier.close()

    def request_stop(self) -> None:
        self._stop.set()

    def request_reload(self) -> None:
        self._reload.set()

    async def _run_disabled(self) -> Outcome:
        log.info(
            "lineage_disabled",
            config=self.config.source,
            detail="lineage.enabled is false; nothing is watched or shipped",
        )
        self.phase = "disabled"
        self.notifier.ready("lineage disabled")
        watchdog = asyncio.create_task(self._watchdog(), name="watchdog")
        await self._stop.wait()
        watchdog.cancel()
        self.notifier.stopping()
        return "stopped"

    async def _run_enabled(self) -> Outcome:
        config = self.config
        # What `config check` checks too (key, endpoints, token, CA bundle, events file), before
        # anything is opened.
        # A node's first start makes its signing key (agent.service.nodekey).
        signer = signer_of(check_startup(config, make_missing_key=True))
        # Then the control socket: a second agent configured with a live agent's socket
        # refuses (StartError) before it opens anything else. It answers `status` while the
        # rest starts.
        await self._start_control()
        try:
            transports, source = await self._open(config, signer)
        except BaseException:
            if self.control is not None:
                await self.control.stop()
            raise
        pipeline = self.pipeline
        assert pipeline is not None
        for delivery in pipeline.deliveries.values():
            delivery.start()
        source_task = asyncio.create_task(
            source.run(pipeline.submit, self._intake_stop), name=f"source-{source.name}"
        )
        watchdog = asyncio.create_task(self._watchdog(), name="watchdog")
        flusher = asyncio.create_task(self._flush_state(), name="state-flush")
        self.phase = "running"
        log.info(
            "agent_started",
            version=__version__,
            config=config.source,
            transports=list(transports),
            key_id=signer.key_id,
            metrics=("{}:{}".format(*self.metrics_server.address) if self.metrics_server else None),
            source=source.name,
        )
        self.notifier.ready(f"shipping to {', '.join(transports)}")
        try:
            failed = await self._serve(source_task)
        finally:
            watchdog.cancel()
            flusher.cancel()
            await self._shutdown(source_task)
        return "source_failed" if failed else "stopped"

    async def _open(
        self, config: AgentConfig, signer: Signer
    ) -> tuple[dict[str, Transport], Source]:
        """State database, transports, metrics endpoint and source, in that order."""
        try:
            self.state_db = open_state(config)
        except StateError as error:
            raise StartError(str(error)) from error
        try:
            spool, kept = open_spool(config.lineage, config.state_dir)
            transports = await build_transports(config.lineage, metrics=self.metrics)
        except BaseException:
            self.state_db.close()
            raise
        self.pipeline = Pipeline(signer.sign_event, self.metrics, self.health, spool)
        self.pipeline.set_shape(shaping(config.lineage))
        deliveries = self.deliveries = Deliveries(
            self.pipeline, self.metrics, self.health, self.state_db
        )
        for name, transport in transports.items():
            deliveries.add(name, transport, config.lineage)
        deliveries.restore(kept)
        if config.metrics.listen:
            try:
                self.metrics_server = MetricsServer(
                    self.registry, config.metrics.listen, self.healthz
                )
            except OSError as error:
                await deliveries.close()
                raise StartError(
                    f"metrics.listen: cannot listen on {config.metrics.listen}: {error.strerror}"
                ) from error
            self.metrics_server.start()
        source = self.source_factory(
            config, SourceContext(self.state_db, self.metrics, self.health)
        )
        if isinstance(source, ApplicationControl):
            self.applications = source
        return transports, source

    async def _serve(self, source_task: asyncio.Task[None]) -> bool:
        """Handle reloads until a stop request or the source's end; True if the source failed."""
        stop = asyncio.create_task(self._stop.wait())
        try:
            while not self._stop.is_set():
                reload = asyncio.create_task(self._reload.wait())
                done, _ = await asyncio.wait(
                    {stop, reload, source_task}, return_when=asyncio.FIRST_COMPLETED
                )
                if source_task in done:
                    reload.cancel()
                    error = source_task.exception()
                    if error is not None:
                        log.error("source_failed", error=repr(error), exc_info=error)
                        return True
                    # A finite source (replay, tests) ends the agent like a stop request.
                    return False
                if reload in done:
                    self._reload.clear()
                    await self.reload()
                else:
                    reload.cancel()
        finally:
            stop.cancel()
        return False

    async def _shutdown(self, source_task: asyncio.Task[None]) -> None:
        self.phase = "stopping"
        self.notifier.stopping()
        assert self.pipeline is not None
        deadline = time.monotonic() + self.config.lineage.drain_timeout
        self._intake_stop.set()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(source_task, timeout=max(0.0, deadline - time.monotonic()))
        self.pipeline.accepting = False
        assert self.deliveries is not None
        await self.deliveries.retired()
        left = await asyncio.gather(
            *(d.drain(deadline, keep=True) for d in self.pipeline.deliveries.values())
        )
        await self.deliveries.close()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.control is not None:
            await self.control.stop()
        if self.state_db is not None:
            try:
                self.state_db.close()
            except Exception as error:  # the accounting below must still be told
                log.error("state_close_failed", error=str(error))
        log.info(
            "agent_stopped",
            undelivered=dict(zip(self.pipeline.deliveries, left, strict=True)),
            kept={name: d.kept for name, d in self.pipeline.deliveries.items()},
            accounting=self.pipeline.accounting(),
        )
        self.phase = "stopped"

    async def _start_control(self, *, at_reload: bool = False) -> None:
        """Bind the control socket. At start, StartError when another agent answers on it;
        at a reload, that is logged like any other reason the socket is unavailable."""
        path = self._control_path
        control = ControlServer(self, path, self.control_limits)
        try:
            await control.start()
        except StartError as error:
            if not at_reload:
                raise
            log.error("control_socket_unavailable", path=path, error=str(error))
            return
        except OSError as error:
            # Lineage matters more than the operator's commands: carry on without them.
            log.error("control_socket_unavailable", path=path, error=error.strerror or str(error))
            return
        self.control = control
        if at_reload:
            log.info("control_socket_restored", path=path)

    async def _restore_control(self) -> None:
        """At a reload: bind the control socket again when its file was removed or replaced
        by a socket nobody listens on (never over one another agent answers on)."""
        if self.control is not None:
            if self.control.bound():
                return
            await self.control.stop()  # closes it; removes nothing it did not bind
            self.control = None
        await self._start_control(at_reload=True)

    async def _flush_state(self) -> None:
        """Write the delivery ledger in batches, off the per-event path."""
        failing: str | None = None
        while self.state_db is not None:
            await asyncio.sleep(1.0)
            self.owned.check(self.state_db, self.pipeline)
            if self.deliveries is not None:
                await self.deliveries.sync()
            try:
                await call(self.state_db, self.state_db.flush)
            except Exception as error:  # a full disk must not stop delivery
                if failing is None:  # once per outage; the rows are kept and retried
                    log.error("state_flush_failed", error=str(error))
                failing = str(error)
            else:
                if failing is not None:
                    log.info(
                        "state_flush_recovered",
                        after=failing,
                        ledger_rows_lost=self.state_db.ledger_rows_lost,
                    )
                failing = None

    async def _watchdog(self) -> None:
        interval = watchdog_interval()
        if interval is None:
            return
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval)

    # -- reload ----------------------------------------------------------------------------

    async def reload(self) -> bool:
        """Load the config file again and apply it; a bad one keeps the old config running."""
        self.notifier.reloading()
        try:
            await self._restore_control()
        except Exception as error:  # the socket is a convenience; the reload goes on
            log.error("control_socket_unavailable", path=self._control_path, error=repr(error))
        try:
            # In a thread: no file-system call may hold up the loop (or SIGTERM).
            new = await asyncio.to_thread(load_config, self.config.source)
            assert self.pipeline is not None and self.deliveries is not None
            await apply_config(self.config, new, self.pipeline, self.deliveries)
            self.config = new
        except Exception as error:
            # Whatever went wrong, a reload never ends the agent: the running configuration
            # stays. An error of the agent's own tree is the operator's to fix and needs no
            # traceback; anything else is a bug, logged with its traceback.
            self.metrics.reloads.labels(result="error").inc()
            known = isinstance(error, AgentError)
            log.error(
                "reload_failed",
                config=self.config.source,
                error=str(error) if known else f"internal error: {error!r}",
                detail="keeping the running configuration",
                exc_info=None if known else error,
            )
            return False
        finally:
            self.notifier.ready()
        self.metrics.reloads.labels(result="ok").inc()
        log.info("reload_ok", config=new.source, transports=list(new.lineage.transport))
        return True

    # -- views -----------------------------------------------------------------------------

    def healthz(self) -> bytes:
        pipeline = self.pipeline
        status: str = "ok" if self.phase == "running" else self.phase
        problems = self.owned.described()
        apps = self.applications
        stores: list[StoreStatus] = list(apps.stores()) if isinstance(apps, StoreReport) else []
        problems += [problem for problem in (s.problem() for s in stores) if problem]
        state = self.state_db
        reach = state.reach.now() if isinstance(state, Reachable) else None
        if reach is not None and not reach.reachable:  # from memory: never waits on it
            since = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(reach.since or 0))
            problems.append(f"state database {state.path} unreachable since {since}: {reach.error}")
        if status == "ok" and problems:
            status = "degraded"
        body = {
            "status": status,
            "version": __version__,
            "uptime_seconds": round(time.time() - self.started, 3),
            "transports": {
                name: {
                    "depth": d.queue.depth,
                    "capacity": d.queue.capacity,
                    "last_error": d.last_error,
                }
                for name, d in (pipeline.snapshot() if pipeline else ())
            },
            "unhealthy_executions": len(self.health.unhealthy()),
            "problems": problems,
            **({"stores": [asdict(s) for s in stores]} if stores else {}),
            **({} if reach is None else {"state_store": asdict(reach)}),
        }
        return json.dumps(body).encode()
