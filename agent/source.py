"""The source seam: whatever produces RunEvents for the pipeline, and what the control socket
may ask of a source that follows applications."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agent.delivery.envelope import Fence
from agent.state.store import StateStore
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics


class Sink(Protocol):
    """Called once per RunEvent: its Spark application id, the event and, with a state
    several agents share, the lease it was claimed under. Never blocks, never raises."""

    def __call__(
        self, app_id: str, event: Mapping[str, Any], fence: Fence | None = None, /
    ) -> None: ...


class Source(Protocol):
    """Produces OpenLineage RunEvent dicts until `stop` is set."""

    name: str

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        """Feed every event to `sink` in order; return soon after `stop` is set."""


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What the daemon lends a source it builds: the state database, metrics and health."""

    state_db: StateStore
    metrics: Metrics
    health: HealthTracker


@dataclass(frozen=True, slots=True)
class ApplicationStatus:
    """One followed application as `status` and `describe` show it."""

    app_id: str  # the Spark application id (the log's name until ApplicationStart is read)
    key: str  # the state database's key of its log
    log: str
    complete: bool  # Spark finished writing the log
    summary: Any  # the translator's snapshot: runs, datasets, counters


@dataclass(frozen=True, slots=True)
class StoreStatus:
    """One followed directory on a store (S3, GCS, Azure, HDFS) as `status`, `describe` and
    /healthz show it: when it was last listed whole, and what failed since."""

    directory: str  # its URL, without a password
    last_listing: float | None  # unix time the last whole listing ended; None: none yet
    applications: int  # applications that listing found
    last_error: str | None  # why the looks since then failed; None while they succeed
    error_since: float | None  # unix time of the first of those failures

    def problem(self) -> str | None:
        """What /healthz says of it while it fails."""
        if self.last_error is None:
            return None
        since = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.error_since or 0))
        return f"event-log store {self.directory} failing since {since}: {self.last_error}"


@runtime_checkable
class StoreReport(Protocol):
    """A source that follows directories on stores."""

    def stores(self) -> Sequence[StoreStatus]:
        """Each followed directory on a store, as it stands now."""


@dataclass(frozen=True, slots=True)
class StopOutcome:
    """What `job stop` did to a driver."""

    app_id: str
    pids: tuple[int, ...]
    signal: str  # SIGTERM, or SIGKILL when the driver outlived the grace period
    seconds: float
    requested_by: str
    reason: str


@runtime_checkable
class ApplicationControl(Protocol):
    """A source's answers to `status`, `describe`, `job stop` and `exec`."""

    def applications(self) -> Sequence[ApplicationStatus]:
        """Every application followed now."""

    def application(self, app_id: str) -> ApplicationStatus | None:
        """The followed application with that id (or log name), if any."""

    def verdict_arrived(self, exec_id: str) -> list[str]:
        """A verdict of that run of `lineage-agent exec` was recorded in the state database:
        apply it soon; the ids of the applications followed now that it started."""

    async def stop_application(
        self, app_id: str, *, reason: str, requested_by: str, grace: float
    ) -> StopOutcome:
        """Stop the driver (SIGTERM, SIGKILL after `grace`) and end its runs ABORT with
        `reason`; ControlError when it does not run on this node or cannot be signalled."""
