"""Claiming events in the state database before they leave, through its outages.

The state database may refuse writes for a while (locked by another process, its disk full).
Then nothing is emitted unclaimed and nothing is dropped: the caller holds the events and
offers them again. After the first refusal in a pass no other write is tried in that pass (a
locked database costs a busy wait per attempt, and the deliveries share this thread). An
outage is logged once, at its start, and once at its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from agent.state.postgres import LeaseLost
from agent.state.store import Leases, StateStore

log = structlog.get_logger("agent.spark")

Event = dict[str, Any]


class Claims:
    """The state database's claims and position writes, with the outage policy above."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self._leases = state if isinstance(state, Leases) else None
        self.refused = False  # a write was refused in this pass: try no more this pass
        self._error: str | None = None  # the outage in progress, if any

    def new_pass(self) -> None:
        self.refused = False

    def claim(
        self, key: str, events: Sequence[Event], token: int | None = None
    ) -> list[Event] | None:
        """The events of `events` not emitted before (claimed now); None while refused.
        With the `token` of a lease, LeaseLost when this agent no longer holds it."""
        if not events:
            return []
        if self.refused:
            return None
        try:
            if token is not None and self._leases is not None:
                fresh = self._leases.claim(key, events, token=token)
            else:
                fresh = self.state.claim(key, events)
        except LeaseLost:
            raise
        except self.state.write_errors as error:
            self._failed(error, len(events))
            return None
        self._recovered()
        return fresh

    def store(self, write: Callable[..., None], *args: Any) -> bool:
        """Run one state-database write; False (logged) when the database refuses it."""
        if self.refused:
            return False
        try:
            write(*args)
        except self.state.write_errors as error:
            self._failed(error, 0)
            return False
        return True

    def _failed(self, error: Exception, held: int) -> None:
        self.refused = True
        if self._error is None:  # logged once per outage
            log.error(
                "state_write_failed",
                path=str(self.state.path),
                error=str(error),
                held_events=held,
                detail="events are held and claimed once the state database takes writes",
            )
        self._error = str(error)

    def _recovered(self) -> None:
        if self._error is not None:
            log.info("state_write_recovered", path=str(self.state.path), after=self._error)
            self._error = None
