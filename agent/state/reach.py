"""Whether a state server answers, as its calls found it: read from memory by `status` and
/healthz, so that neither ever waits on a server that does not answer.

A server is unreachable from the first call that failed to reach it (connection refused,
cut, timed out) until a call succeeds again, and while a call has been waiting longer than
`HUNG` for its answer: a server stopped without closing its connections (SIGSTOP, a hung
host) lets the kernel acknowledge every request, so no socket timeout fires and the call
waits until it resumes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: A call without an answer for this long says the server does not answer (seconds).
HUNG = 2.0


@dataclass(frozen=True, slots=True)
class Reach:
    """What the state's calls found: `since` is the Unix time it last changed."""

    reachable: bool
    since: float | None
    error: str | None


class Reachability:
    """Kept by the calls (any thread), read by `status` and /healthz (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: tuple[float, str] | None = None  # (since, error) of the outage
        self._calling: float | None = None  # monotonic start of the call in flight
        self._calling_wall = 0.0

    def begin(self) -> None:
        with self._lock:
            self._calling = time.monotonic()
            self._calling_wall = time.time()

    def succeeded(self) -> None:
        with self._lock:
            self._calling = None
            self._failed = None

    def failed(self, error: str) -> None:
        with self._lock:
            since = self._calling_wall if self._calling is not None else time.time()
            self._calling = None
            if self._failed is None:
                self._failed = (since, error)

    def done(self) -> None:
        """The call ended in something that says nothing of the server (a bug, LeaseLost)."""
        with self._lock:
            self._calling = None

    def now(self) -> Reach:
        with self._lock:
            if self._failed is not None:
                return Reach(False, round(self._failed[0], 3), self._failed[1])
            calling = self._calling
            if calling is not None and time.monotonic() - calling > HUNG:
                waited = time.monotonic() - calling
                return Reach(
                    False,
                    round(self._calling_wall, 3),
                    f"no answer for {waited:.0f} s (the server does not respond)",
                )
            return Reach(True, None, None)


@runtime_checkable
class Reachable(Protocol):
    """A state on a server, which says whether it answers (`PostgresState`)."""

    @property
    def reach(self) -> Reachability: ...
