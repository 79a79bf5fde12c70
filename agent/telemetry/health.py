"""Per-application lineage health: which events of which Spark application were lost, or left
without an answer, and why."""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

COMPONENT = "lineage"


@dataclass(frozen=True, slots=True)
class Incident:
    """One event that did not reach one transport, or one problem reading an application's log."""

    time: float  # unix seconds
    reason: str
    transport: str
    event_type: str
    run_id: str
    detail: str
    outcome: str = "dropped"  # or "unconfirmed": the collector may have it
    component: str = COMPONENT

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "time": self.time,
            "reason": self.reason,
            "outcome": self.outcome,
            "transport": self.transport,
            "eventType": self.event_type,
            "runId": self.run_id,
            "detail": self.detail,
        }


@dataclass(slots=True)
class AppHealth:
    """What went wrong for one application: totals by reason and the most recent incidents."""

    dropped: Counter[str] = field(default_factory=Counter)
    unconfirmed: Counter[str] = field(default_factory=Counter)
    recent: deque[Incident] = field(default_factory=lambda: deque(maxlen=50))

    @property
    def healthy(self) -> bool:
        return not self.dropped and not self.unconfirmed

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "dropped": dict(self.dropped),
            "unconfirmed": dict(self.unconfirmed),
            "recent": [error.as_dict() for error in self.recent],
        }


class HealthTracker:
    """Bounded map from Spark application id to its incidents; the oldest applications age out."""

    def __init__(self, max_apps: int = 10_000) -> None:
        self._max = max_apps
        self._apps: OrderedDict[str, AppHealth] = OrderedDict()

    def record(self, app_id: str, incident: Incident) -> None:
        health = self._apps.get(app_id)
        if health is None:
            health = self._apps[app_id] = AppHealth()
            if len(self._apps) > self._max:
                self._apps.popitem(last=False)
        else:
            self._apps.move_to_end(app_id)
        counts = health.unconfirmed if incident.outcome == "unconfirmed" else health.dropped
        counts[incident.reason] += 1
        health.recent.append(incident)

    def get(self, app_id: str) -> AppHealth:
        return self._apps.get(app_id) or AppHealth()

    def unhealthy(self) -> list[str]:
        return [key for key, health in self._apps.items() if not health.healthy]
