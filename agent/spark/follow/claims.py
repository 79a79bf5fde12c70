"""Claiming events in the state database before they leave, through its outages.

The state database may refuse writes for a while (locked by another process, its disk full).
Then nothing is emitted unclaimed and nothing is dropped: the caller holds the events and
offers them again. After the first refusal in a pass no other write is tried in that pass (a
locked database costs a busy wait per attempt, and the deliveries share this thread). An
outage is logged once, at its start, and once at its end.

A server's state (PostgreSQL) is written from a worker thread (`agent.state.store.call`):
a restarting server slows the source's pass, never the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from agent.state.store import LeaseLost, StateStore, call

log = structlog.get_logger("agent.spark")

Event = dict[str, Any]


class Claims:
    """The state database's claims and position writes, with the outage policy above."""

    def __init__(self, state: StateStore) -> None:
        self.state = state
        self.refused = False  # a write was refused in this pass: try no more this pass
        self._error: str | None = None  # the outage in progress, if any

    def new_pass(self) -> None:
        self.refused = False

    async def claim(
        self, key: str, events: Sequence[Event], token: int | None = None
    ) -> list[Event] | None:
        """The events of `events` not emitted before (claimed now); None while refused.
        With the `token` of a lease, LeaseLost when this agent no longer holds it."""
        if not events:
            return []
        if self.refused:
            return None
        try:
            fresh = await call(self.state, self.state.claim, key, events, token=token)
        except LeaseLost:
            raise
        except self.state.write_errors as error:
            self._failed(error, len(events))
            return None
        self._recovered()
        return fresh

    async def store(self, write: Callable[..., None], *args: Any, **kwargs: Any) -> bool:
        """Run one state-database write; False (logged) when the database refuses it.
        LeaseLost passes through: the caller lets the application go."""
        if self.refused:
            return False
        try:
            await call(self.state, write, *args, **kwargs)
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
