"""Which runs a completed stage's task metrics and a failed task count toward. Pure.

A stage belongs to the job that ran it (`Jobs`), the job to an RDD run or to the run of a
SQL execution (`SqlRuns`). The application counts everything; the open child run that owns
the stage counts its share too (and, for a streaming micro-batch, its query's run), and a run
that has ended counts nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.spark.translate.model import Execution, Run, count_stage
from agent.spark.translate.runs.executions import SqlRuns
from agent.spark.translate.runs.jobs import Jobs
from agent.spark.translate.values import as_int, mappings


def owners(jobs: Jobs, sql: SqlRuns, stage: int | None) -> tuple[list[Run], Execution | None]:
    """The open child runs (the run whose job ran this stage, and that run's streaming query)
    and the SQL execution of that job."""
    job = jobs.of_stage(stage)
    if job is None:
        return [], None
    if job.run is not None:
        return ([job.run] if job.run.state == "RUNNING" else []), None
    execution = sql.execution(job.execution)
    if execution is None:
        return [], None
    run = sql.run_of(execution)
    return ([run, run.query] if run.query is not None else [run]), execution


def completed_stage(app: Run, jobs: Jobs, sql: SqlRuns, info: Mapping[str, Any]) -> None:
    """Count a StageCompleted's `Stage Info` toward the application and the stage's run."""
    runs, execution = owners(jobs, sql, as_int(info.get("Stage ID")))
    tallies = [app.tally] + [run.tally for run in runs]
    count_stage(mappings(info.get("Accumulables")), tallies, execution)


def failed_task(app: Run, jobs: Jobs, sql: SqlRuns, event: Mapping[str, Any]) -> bool:
    """Count a TaskEnd that failed (not a success, not a killed attempt such as speculation
    or cancellation) toward the application and the stage's run; whether it was one."""
    reason = event.get("Task End Reason")
    reason = reason.get("Reason") if isinstance(reason, Mapping) else None
    if not isinstance(reason, str) or reason in ("Success", "TaskKilled"):
        return False
    runs, _ = owners(jobs, sql, as_int(event.get("Stage ID")))
    for run in (app, *runs):
        run.tally.failed_tasks += 1
    return True
