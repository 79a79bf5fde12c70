"""Answers that came after the request's timeout, while the transport waited for them on the
open connection (`HttpConfig.late_answer_wait`): counted, and logged once per change (the
collector turns slow, or answers in time again), never once per request."""

from __future__ import annotations

from collections.abc import Callable

import structlog

log = structlog.get_logger("agent.transport.http")


class LateAnswers:
    """Watches how long answers take against the timeout."""

    __slots__ = ("_count", "_origin", "_timeout", "slow")

    def __init__(self, origin: str, timeout: float, count: Callable[[], None] | None) -> None:
        self._origin = origin
        self._timeout = timeout
        self._count = count
        self.slow = False  # the last answer came late

    def answered(self, seconds: float) -> None:
        """An answer came `seconds` after its request began."""
        late = seconds - self._timeout
        if late > 0:
            if self._count is not None:
                self._count()
            if not self.slow:
                self.slow = True
                log.warning(
                    "collector_slow",
                    collector=self._origin,
                    late=round(late, 3),
                    timeout=self._timeout,
                )
        elif self.slow:
            self.slow = False
            log.info("collector_in_time", collector=self._origin, timeout=self._timeout)
