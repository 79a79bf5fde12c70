"""Which runs a completed stage's task metrics and a failed task count toward. Pure.

A stage belongs to the job that ran it (`Jobs`), the job to an RDD run or to the run of a
SQL execution (`SqlRuns`). The application counts everything; the open child run that owns
the stage counts its share too, and a run that has ended counts nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.spark.translate.executions import SqlRuns
from agent.spark.translate.jobs import Jobs
from agent.spark.translate.runs import Execution, Run, count_stage
from agent.spark.translate.values import as_int, mappings


def owner(jobs: Jobs, sql: SqlRuns, stage: int | None) -> tuple[Run | None, Execution | None]:
    """The open child run (and SQL execution) whose job ran this stage."""
    job = jobs.of_stage(stage)
    if job is None:
        return None, None
    if job.run is not None:
        return (job.run if job.run.state == "RUNNING" else None), None
    execution = sql.execution(job.execution)
    if execution is None:
        return None, None
    return sql.run_of(execution), execution


def completed_stage(app: Run, jobs: Jobs, sql: SqlRuns, info: Mapping[str, Any]) -> None:
    """Count a StageCompleted's `Stage Info` toward the application and the stage's run."""
    run, execution = owner(jobs, sql, as_int(info.get("Stage ID")))
    tallies = [app.tally] + ([run.tally] if run else [])
    count_stage(mappings(info.get("Accumulables")), tallies, execution)


def failed_task(app: Run, jobs: Jobs, sql: SqlRuns, event: Mapping[str, Any]) -> bool:
    """Count a TaskEnd that failed (not a success, not a killed attempt such as speculation
    or cancellation) toward the application and the stage's run; whether it was one."""
    reason = event.get("Task End Reason")
    reason = reason.get("Reason") if isinstance(reason, Mapping) else None
    if not isinstance(reason, str) or reason in ("Success", "TaskKilled"):
        return False
    run, _ = owner(jobs, sql, as_int(event.get("Stage ID")))
    app.tally.failed_tasks += 1
    if run is not None:
        run.tally.failed_tasks += 1
    return True
