"""One application log the Spark source follows: its reader and translator, and what the
source keeps about it between passes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agent.source import ApplicationStatus
from agent.spark.eventlog import stores
from agent.spark.follow.application import ApplicationLog
from agent.state.store import Term


@dataclass
class Followed:
    """One application log being followed."""

    key: str  # directory + "/" + log name: the state database's key
    log: ApplicationLog
    last_growth: float = field(default_factory=time.monotonic)
    closed: bool = False  # ended as driver lost; followed lazily in case it grows again
    stop_pending: float | None = None  # monotonic time a `job stop` ended its driver
    verdict_since: float | None = None  # monotonic time its end began to wait for a verdict
    corrupt: int = 0
    malformed: set[tuple[str, str]] = field(default_factory=set)  # (event, field) logged
    pending: list[dict[str, Any]] = field(default_factory=list)  # translated, not yet claimed
    # Catching up after a lost state database: events are claimed but not sent (see source).
    quiet: bool = False
    quieted: int = 0  # events taken as already emitted that way
    ui_port: int | None = None  # where the driver's UI last answered for this application
    # While a worker thread translates, `status` shows the summary taken before it began.
    busy: bool = False
    summary: Any = None
    alive_signal: str | None = None  # what `driver_idle_alive` last said proved life
    # A rolling log found before its first event file: its codec is told once that file is.
    codec_pending: bool = False
    # With a shared state database: this agent's lease on it (its token, its deadline).
    term: Term | None = None

    @property
    def token(self) -> int | None:
        """The fencing token of this agent's lease on it, with a shared state database."""
        return None if self.term is None else self.term.token

    @property
    def remote(self) -> bool:
        """The log is on a shared store: its driver runs elsewhere (no /proc, no local port)."""
        return stores.is_url(self.log.ref.path)

    @property
    def app_id(self) -> str:
        return self.log.app_id

    def status(self) -> ApplicationStatus:
        reader = self.log.reader
        return ApplicationStatus(
            self.app_id,
            self.key,
            self.log.ref.path,
            reader.complete,
            self.summary if self.busy else self.log.translator.snapshot(),
        )

    def live_paths(self) -> list[str]:
        """Every path the driver may hold open: the log's files and the one being read."""
        position = self.log.reader.position
        return [*self.log.reader.ref.paths, *([position.path] if position else [])]
