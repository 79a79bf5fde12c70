"""What a replay reports: every application replayed, its runs and the digests of its events,
and what each transport did with them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

_TERMINAL: Final = frozenset({"COMPLETE", "FAIL", "ABORT"})
_FAILED: Final = frozenset({"FAIL", "ABORT"})
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run as the replay left it; `state` stays RUNNING until its terminal event."""

    job_name: str
    run_id: str
    job_type: str  # APPLICATION | SQL_JOB | RDD_JOB | STREAMING_QUERY
    state: str  # RUNNING | COMPLETE | FAIL | ABORT
    error: str | None = None  # the errorMessage of a FAIL or ABORT event


@dataclass(frozen=True, slots=True)
class AppResult:
    """One application log: its runs in START order (the application run first) and the
    SHA-256 (hex) of every signed event, in emission order."""

    app_id: str  # from ApplicationStart; the log's name when the log has none yet
    attempt_id: str | None
    name: str | None  # spark.app.name
    log: str
    complete: bool  # Spark finished writing the log
    runs: tuple[RunResult, ...]
    digests: tuple[str, ...]
    errors: tuple[str, ...] = ()  # the log (or the output file) could not be handled fully
    warnings: tuple[str, ...] = ()  # skipped lines, translator notes
    output: str | None = None  # the JSON-lines file written

    @property
    def application(self) -> RunResult | None:
        return next((r for r in self.runs if r.job_type == "APPLICATION"), None)

    @property
    def failed(self) -> tuple[RunResult, ...]:
        """The runs that ended FAIL or ABORT."""
        return tuple(r for r in self.runs if r.state in _FAILED)

    @property
    def file_name(self) -> str:
        """`<app_id>[_<attempt>].jsonl`, reduced to characters safe in a file name."""
        base = self.app_id + (f"_{self.attempt_id}" if self.attempt_id else "")
        return (_UNSAFE_NAME.sub("_", base).lstrip(".") or "application") + ".jsonl"


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """What one transport did with the replayed events (`--send`)."""

    transport: str
    offered: int
    delivered: int
    dropped: int
    dropped_by_reason: Mapping[str, int] = field(default_factory=dict)
    unconfirmed: int = 0  # left without an answer: the collector may have them


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """Every application replayed, in the order the paths named them, and (`--send`) what
    each transport did with their events."""

    applications: tuple[AppResult, ...]
    deliveries: tuple[DeliveryResult, ...] = ()

    @property
    def runs(self) -> tuple[RunResult, ...]:
        return tuple(run for app in self.applications for run in app.runs)

    @property
    def passed(self) -> bool:
        """No run ended FAIL or ABORT (runs of in-progress logs may still be RUNNING)."""
        return not any(app.failed for app in self.applications)

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(f"{app.log}: {e}" for app in self.applications for e in app.errors)

    @property
    def dropped(self) -> int:
        return sum(d.dropped for d in self.deliveries)

    @property
    def unconfirmed(self) -> int:
        return sum(d.unconfirmed for d in self.deliveries)

    def to_json(self, exit_code: int) -> dict[str, Any]:
        """The report as JSON values (`--json`): every field, the derived counts and the exit
        status the command gives it."""
        apps = [
            asdict(a)
            | {
                "state": a.application.state if a.application else None,
                "events": len(a.digests),
                "failed_runs": len(a.failed),
            }
            for a in self.applications
        ]
        return {
            "passed": self.passed,
            "exit_code": exit_code,
            "applications": apps,
            "deliveries": [asdict(d) for d in self.deliveries],
            "errors": list(self.errors),
        }


def runs_of(events: Iterable[Mapping[str, Any]]) -> tuple[RunResult, ...]:
    """Every run of `events` in START order, with the state its last event left it in."""
    runs: dict[str, RunResult] = {}
    for event in events:
        run, job = event["run"], event["job"]
        run_id = str(run["runId"])
        if run_id not in runs:
            job_type = job.get("facets", {}).get("jobType", {}).get("jobType", "")
            runs[run_id] = RunResult(str(job["name"]), run_id, str(job_type), "RUNNING")
        state = event.get("eventType")
        if state in _TERMINAL:
            message = run.get("facets", {}).get("errorMessage", {}).get("message")
            error = str(message) if state in _FAILED and message is not None else None
            runs[run_id] = replace(runs[run_id], state=str(state), error=error)
    return tuple(runs.values())
