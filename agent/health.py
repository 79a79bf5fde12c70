"""Per-execution lineage health: which events of which Spark application were lost, and why."""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

COMPONENT = "lineage"


@dataclass(frozen=True, slots=True)
class LineageError:
    """One event that did not reach one transport."""

    time: float  # unix seconds
    reason: str
    transport: str
    event_type: str
    run_id: str
    detail: str
    component: str = COMPONENT

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "time": self.time,
            "reason": self.reason,
            "transport": self.transport,
            "eventType": self.event_type,
            "runId": self.run_id,
            "detail": self.detail,
        }


@dataclass(slots=True)
class ExecutionHealth:
    """What went wrong for one execution: totals by reason and the most recent errors."""

    dropped: Counter[str] = field(default_factory=Counter)
    recent: deque[LineageError] = field(default_factory=lambda: deque(maxlen=50))

    @property
    def healthy(self) -> bool:
        return not self.dropped

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "dropped": dict(self.dropped),
            "recent": [error.as_dict() for error in self.recent],
        }


class HealthTracker:
    """Bounded map from execution key to its lineage errors; the oldest executions age out."""

    def __init__(self, max_executions: int = 10_000) -> None:
        self._max = max_executions
        self._executions: OrderedDict[str, ExecutionHealth] = OrderedDict()

    def record(self, execution: str, error: LineageError) -> None:
        health = self._executions.get(execution)
        if health is None:
            health = self._executions[execution] = ExecutionHealth()
            if len(self._executions) > self._max:
                self._executions.popitem(last=False)
        else:
            self._executions.move_to_end(execution)
        health.dropped[error.reason] += 1
        health.recent.append(error)

    def get(self, execution: str) -> ExecutionHealth:
        return self._executions.get(execution) or ExecutionHealth()

    def unhealthy(self) -> list[str]:
        return [key for key, health in self._executions.items() if not health.healthy]
