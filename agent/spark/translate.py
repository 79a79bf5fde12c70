"""SparkListener events of one application attempt -> OpenLineage RunEvents. Pure.

`ApplicationTranslator.feed` takes parsed event-log lines in order and returns the RunEvents
each one completes. No I/O, no clock, no randomness: times come from Spark's timestamps, run
ids from `runids`, so replaying a log yields byte-identical events.

Runs (job namespace from the options):

* the application: job `{app}` (normalized `spark.app.name`, or `spark.openlineage.appName`),
  jobType APPLICATION; START at ApplicationStart, terminal at ApplicationEnd;
* each SQL execution that reads or writes datasets: job `{app}.{command}.{output}`,
  jobType SQL_JOB, `parent` facet -> the application run (`root` -> the application, or the
  scheduler run that launched it when `spark.openlineage.parent*` properties say so).
  Nested executions (CTAS, `saveAsTable` and the inserts they run share `rootExecutionId`)
  form ONE run keyed by the root execution: it STARTs at the first execution of the group that
  names a dataset (a CTAS alone only knows its table; the nested insert knows the path) and
  ends at the root's SQLExecutionEnd. Executions without datasets emit nothing unless
  `emit_empty_executions` (then START and terminal together at their end);
* each RDD job outside SQL that reads files (`sc.textFile`): jobType RDD_JOB, named after its
  RDD lineage like the OpenLineage integration does. An RDD save's output path is not in the
  event log, so RDD outputs are never reported.

Exactly one START and one terminal event per run, START first; RUNNING events in between when
`running_interval_ms` > 0, triggered by events whose timestamp passed the interval.

Terminal state of a child run:
  COMPLETE  the execution / job succeeded;
  FAIL      it failed (`errorMessage`: Spark's message and the failed job's stack trace);
  ABORT     its jobs were cancelled (`[SPARK_JOB_CANCELLED]`, "cancelled because SparkContext
            was shut down"), it was still running when the application ended, or it ended
            unsuccessfully after `request_stop`.

Terminal state of the application, first rule that applies:
  1. ABORT  after `request_stop` (`lineage-agent job stop`);
  2. FAIL   ApplicationEnd carries a non-zero ExitCode;
  3. ABORT  work was in flight at ApplicationEnd: Spark cancels it right after, "because
            SparkContext was shut down" (SIGTERM, spark.stop() from another thread);
  4. FAIL   the last job or SQL execution to finish failed; one cancelled by a user or an
            operator does not count as a failure;
  5. COMPLETE otherwise.
  `close(cause="driver_lost")` (no ApplicationEnd will come: the driver died) ends every open
  run FAIL, `close(cause="stopped")` ABORT. At ApplicationEnd every open child run is ended
  first, so the application's terminal event is always the last one; events that follow it
  (late JobEnd / SQLExecutionEnd of cancelled work) are ignored. A failed job whose JobEnd is
  logged after ApplicationEnd is therefore reported as aborted.

Counters (`lineageAgent_run`): records and bytes read and written from StageCompleted task
metrics, `failedTasks` from TaskEnd with a failure reason (killed attempts, e.g. speculation
or cancellation, are not failures); per dataset, `inputStatistics` / `outputStatistics` from
the plan nodes' SQL metrics, on terminal events.
"""

from __future__ import annotations

import collections
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from agent import __version__
from agent.facets import OPENLINEAGE_SCHEMA_URL, PRODUCER, RUN_SCHEMA_URL
from agent.spark import naming, plans, runids
from agent.spark.naming import Catalog, DatasetName, RunDatasets
from agent.spark.plans import DatasetRef

Event = dict[str, Any]
Outcome = Literal["ok", "failed", "cancelled", "shutdown"]

_OL: Final = "https://openlineage.io/spec/facets/"
RUN_FACET_URLS: Final = {
    "processing_engine": _OL
    + "1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
    "parent": _OL + "1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet",
    "errorMessage": _OL + "1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
    "jobType": _OL + "2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
}
_PREFIX: Final = b'{"Event":"'
_WANTED_PREFIXES: Final = tuple(
    _PREFIX + name.encode() + b'"'
    for name in (
        "SparkListenerLogStart",
        "SparkListenerEnvironmentUpdate",
        "SparkListenerApplicationStart",
        "SparkListenerApplicationEnd",
        "SparkListenerJobStart",
        "SparkListenerJobEnd",
        "SparkListenerStageCompleted",
        "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
        "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd",
        "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate",
        "org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates",
    )
)
_TASK_END: Final = _PREFIX + b'SparkListenerTaskEnd"'
_TASK_SUCCESS: Final = b'"Task End Reason":{"Reason":"Success"'
_COUNTER_METRICS: Final = {
    "internal.metrics.input.recordsRead": "records_in",
    "internal.metrics.input.bytesRead": "bytes_in",
    "internal.metrics.output.recordsWritten": "records_out",
    "internal.metrics.output.bytesWritten": "bytes_out",
}
_PROPERTIES: Final = frozenset(
    {
        "spark.app.name",
        "spark.sql.warehouse.dir",
        "spark.hadoop.hive.metastore.uris",
        "hive.metastore.uris",
        "spark.openlineage.appName",
        "spark.openlineage.parentJobNamespace",
        "spark.openlineage.parentJobName",
        "spark.openlineage.parentRunId",
        "spark.openlineage.rootParentJobNamespace",
        "spark.openlineage.rootParentJobName",
        "spark.openlineage.rootParentRunId",
    }
)
_CANCELLED: Final = re.compile(r"^(?:\[SPARK_JOB_CANCELLED\] )?Job \d+ cancelled")
_SHUTDOWN: Final = "cancelled because SparkContext was shut down"
_FINISHED_KEPT: Final = 256  # finished child runs that `snapshot` still shows
_REMEMBERED: Final = 8192  # ended executions and seen jobs kept to refuse duplicates
_MAX_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def wanted(line: bytes) -> bool:
    """Cheap byte-level test: does this raw log line need json parsing at all?

    Spark writes compact JSON with `Event` first, so the first bytes name the event. Task
    starts, successful task ends, stage submissions, executor and block-manager events (most
    of a log) are skipped. Lines in any other shape are passed on for the parser to judge.
    """
    if not line.startswith(_PREFIX):
        return True
    if line.startswith(_TASK_END):
        # the reason sits ~130 bytes in; were a later Spark to move it, every TaskEnd is wanted
        return line.find(_TASK_SUCCESS, 0, 512) < 0
    return line.startswith(_WANTED_PREFIXES)


@dataclass(frozen=True, slots=True)
class TranslateOptions:
    namespace: str  # job namespace
    emit_empty_executions: bool = False  # SQL executions with no datasets
    running_interval_ms: int = 0  # RUNNING events, 0 = off (driven by Spark timestamps)


@dataclass(frozen=True, slots=True)
class Counters:
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    failed_tasks: int = 0


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as `status` / `describe` show it; `state` is RUNNING until its terminal event."""

    run_id: str
    job_name: str
    job_type: str  # APPLICATION | SQL_JOB | RDD_JOB
    state: str  # RUNNING | COMPLETE | FAIL | ABORT
    start_ms: int
    end_ms: int | None
    inputs: tuple[DatasetName, ...]
    outputs: tuple[DatasetName, ...]
    counters: Counters
    error: str | None


@dataclass(frozen=True, slots=True)
class AppSummary:
    app_id: str | None
    attempt_id: str | None
    app_name: str | None
    application: RunSummary | None
    runs: tuple[RunSummary, ...]  # the most recently finished child runs, then the open ones
    stop_requested: bool


@dataclass(slots=True)
class _Tally:
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    failed_tasks: int = 0


@dataclass(slots=True)
class _Failure:
    outcome: Outcome
    message: str
    stack: str | None = None


@dataclass(slots=True)
class _Execution:
    exec_id: int
    root: int
    command: str | None = None  # the plan node that names it
    writes: bool = False
    # AQE re-plans keep an execution's datasets but renumber their metrics: latest wins
    refs: dict[tuple[object, ...], DatasetRef] = field(default_factory=dict)
    values: dict[int, int] = field(default_factory=dict)  # accumulator id -> value
    notes: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Run:
    kind: str  # application | sql | rdd
    run_id: str
    job_type: str
    start_ms: int
    job_name: str = ""
    tally: _Tally = field(default_factory=_Tally)
    started: bool = False
    state: str = "RUNNING"
    end_ms: int | None = None
    error: str | None = None
    last_emit_ms: int = 0
    inputs: tuple[DatasetName, ...] = ()
    outputs: tuple[DatasetName, ...] = ()
    executions: list[_Execution] = field(default_factory=list)  # sql: root first, then nested
    key: int = -1  # sql: root execution id; rdd: job id
    paths: tuple[str, ...] = ()  # rdd: the input paths
    failure: _Failure | None = None  # sql: its last failed job, for the stack trace


@dataclass(slots=True)
class _Job:
    job_id: int
    execution: int | None
    stages: list[int]
    run: _Run | None = None  # an RDD job with file inputs


class ApplicationTranslator:
    """Translates one Spark application attempt; feed it the event log in order."""

    def __init__(self, options: TranslateOptions) -> None:
        self.options = options
        self.warnings: list[str] = []  # the caller drains and logs these
        self._app: _Run | None = None
        self._app_ids: tuple[str, str | None, str] | None = None  # app id, attempt, name
        self._spark_version: str | None = None
        self._props: dict[str, str] = {}
        self._stop: tuple[str, str] | None = None
        self._finished = False
        self._clock = 0  # the latest Spark timestamp seen
        self._executions: dict[int, _Execution] = {}
        self._sql_runs: dict[int, _Run] = {}  # open, by root execution id
        self._rdd_runs: dict[int, _Run] = {}  # open, by job id
        self._ended_roots: set[int] = set()  # recent ones: see _remember
        self._jobs: dict[int, _Job] = {}  # open
        self._seen_jobs: set[int] = set()
        self._stage_job: dict[int, int] = {}
        self._last: _Failure | None = None  # outcome of the last job / execution to finish
        self._done: collections.deque[RunSummary] = collections.deque(maxlen=_FINISHED_KEPT)
        self._handlers: dict[str, Callable[[Mapping[str, Any], list[Event]], None]] = {
            "SparkListenerLogStart": self._on_log_start,
            "SparkListenerEnvironmentUpdate": self._on_environment,
            "SparkListenerApplicationStart": self._on_app_start,
            "SparkListenerApplicationEnd": self._on_app_end,
            "SparkListenerJobStart": self._on_job_start,
            "SparkListenerJobEnd": self._on_job_end,
            "SparkListenerStageCompleted": self._on_stage_completed,
            "SparkListenerTaskEnd": self._on_task_end,
            "SparkListenerSQLExecutionStart": self._on_sql_start,
            "SparkListenerSQLAdaptiveExecutionUpdate": self._on_sql_update,
            "SparkListenerDriverAccumUpdates": self._on_accum_updates,
            "SparkListenerSQLExecutionEnd": self._on_sql_end,
        }

    # -- public API -----------------------------------------------------------------------

    @property
    def app_id(self) -> str | None:
        return self._app_ids[0] if self._app_ids else None

    @property
    def attempt_id(self) -> str | None:
        return self._app_ids[1] if self._app_ids else None

    @property
    def app_name(self) -> str | None:
        return self._app_ids[2] if self._app_ids else None

    def feed(self, event: Mapping[str, Any]) -> list[Event]:
        """One parsed SparkListener event in; the RunEvents it completes, in emission order."""
        out: list[Event] = []
        if self._finished or not isinstance(event, Mapping):
            return out
        kind = event.get("Event")
        handler = self._handlers.get(kind.rsplit(".", 1)[-1]) if isinstance(kind, str) else None
        if handler is None:
            return out
        try:
            handler(event, out)
            self._emit_running(out)
        except Exception as exc:  # the contract: no event, however malformed, raises
            self.warnings.append(f"internal error on {kind}: {exc!r}")
        return out

    def request_stop(self, *, reason: str, requested_by: str) -> None:
        """Mark the application as stopped from outside (`job stop`): runs then end ABORT."""
        self._stop = (reason, requested_by)

    def close(
        self, *, cause: Literal["driver_lost", "stopped"], time_ms: int, message: str
    ) -> list[Event]:
        """End every open run (FAIL for driver_lost, ABORT for stopped): the log will not grow.

        `time_ms` is raised to the latest Spark timestamp seen, so no terminal event predates
        its run's START.
        """
        out: list[Event] = []
        if self._app is None or self._finished:
            return out
        end = max(min(time_ms, _MAX_MS), self._clock)
        state = "FAIL" if cause == "driver_lost" else "ABORT"
        failure = _Failure("failed" if state == "FAIL" else "shutdown", message)
        self._end_app(end, state, failure, out, children=(state, failure))
        return out

    def snapshot(self) -> AppSummary:
        """Runs with job names, states, datasets and counters: for status / describe."""
        open_runs = [r for r in (*self._sql_runs.values(), *self._rdd_runs.values()) if r.started]
        return AppSummary(
            app_id=self.app_id,
            attempt_id=self.attempt_id,
            app_name=self.app_name,
            application=_summary(self._app) if self._app else None,
            runs=(*self._done, *map(_summary, open_runs)),
            stop_requested=self._stop is not None,
        )

    # -- the application -------------------------------------------------------------------

    def _on_log_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        self._spark_version = _str(event.get("Spark Version")) or self._spark_version

    def _on_environment(self, event: Mapping[str, Any], out: list[Event]) -> None:
        for section in ("Spark Properties", "Hadoop Properties"):
            for key, value in _pairs(event.get(section)):
                if key in _PROPERTIES:
                    self._props.setdefault(key, value)

    def _on_app_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        app_id = _str(event.get("App ID"))
        if self._app is not None or not app_id:
            why = "a second one" if self._app is not None else "no App ID"
            self.warnings.append(f"ApplicationStart ignored: {why}")
            return
        start = self._tick(_int(event.get("Timestamp")))
        name = _str(event.get("App Name")) or self._props.get("spark.app.name") or app_id
        attempt = _str(event.get("App Attempt ID"))
        self._app_ids = (app_id, attempt, name)
        job = naming.normalize(self._props.get("spark.openlineage.appName") or name) or "spark"
        run_id = runids.run_id(start, app_id, attempt, "application")
        self._app = _Run("application", run_id, "APPLICATION", start, job)
        self._start(self._app, out)

    def _on_app_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        if self._app is None:
            return
        end = self._tick(_int(event.get("Timestamp")))
        in_flight = bool(self._jobs or self._sql_runs)
        cancelled = _Failure(
            "shutdown",
            "the application ended before this run finished: Spark cancels running jobs "
            "because SparkContext was shut down",
        )
        exit_code = _int(event.get("ExitCode"))
        last = self._last
        if exit_code:
            message = f"Spark application exited with code {exit_code}"
            if last is not None and last.outcome == "failed":
                message = f"{message}: {last.message}"
            state, failure = "FAIL", _Failure("failed", message, last.stack if last else None)
        elif in_flight or (last is not None and last.outcome == "shutdown"):
            state = "ABORT"
            failure = _Failure(
                "shutdown",
                "the application ended with jobs still running: Spark cancels them "
                "because SparkContext was shut down",
            )
        elif last is not None and last.outcome == "failed":
            state, failure = "FAIL", last
        else:
            state, failure = "COMPLETE", None
        self._end_app(end, state, failure, out, children=("ABORT", cancelled))

    def _end_app(
        self,
        end: int,
        state: str,
        failure: _Failure | None,
        out: list[Event],
        *,
        children: tuple[str, _Failure],
    ) -> None:
        """End the open child runs, then the application: its terminal event comes last."""
        assert self._app is not None
        for run in (*self._sql_runs.values(), *self._rdd_runs.values()):
            self._finish(run, end, children[0], children[1], out)
        if self._stop is not None:
            reason, by = self._stop
            state, failure = "ABORT", _Failure("cancelled", f"stopped by {by}: {reason}")
        self._finish(self._app, end, state, failure, out)
        self._finished = True

    # -- SQL executions --------------------------------------------------------------------

    def _on_sql_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        exec_id = _int(event.get("executionId"))
        if self._app is None or self._app_ids is None or exec_id is None:
            return
        if exec_id in self._executions:
            return
        start = self._tick(_int(event.get("time")))
        root = _int(event.get("rootExecutionId"))
        root = exec_id if root is None or not 0 <= root <= exec_id else root
        if root in self._ended_roots:
            self.warnings.append(f"execution {exec_id} started after its root {root} ended")
            return
        run = self._sql_runs.get(root)
        if run is None:
            app_id, attempt, _ = self._app_ids
            run_id = runids.run_id(start, app_id, attempt, "sql", root)
            run = self._sql_runs[root] = _Run("sql", run_id, "SQL_JOB", start, key=root)
        execution = self._executions[exec_id] = _Execution(exec_id, root)
        run.executions.append(execution)
        self._read_plan(execution, event, run, out)

    def _on_sql_update(self, event: Mapping[str, Any], out: list[Event]) -> None:
        execution = self._executions.get(_int(event.get("executionId")))  # type: ignore[arg-type]
        if execution is not None:
            self._read_plan(execution, event, self._sql_runs[execution.root], out)

    def _read_plan(
        self, execution: _Execution, event: Mapping[str, Any], run: _Run, out: list[Event]
    ) -> None:
        summary = plans.read_plan(event.get("sparkPlanInfo"), event.get("physicalPlanDescription"))
        for note in summary.notes:
            if note not in execution.notes:
                execution.notes.add(note)
                self.warnings.append(f"{note} in execution {execution.exec_id}")
        execution.command = execution.command or summary.command
        execution.writes = execution.writes or summary.writes
        for ref in summary.datasets:
            execution.refs[(ref.role, ref.node, ref.location, ref.table, ref.jdbc)] = ref
        if not run.started and any(map(naming.names_dataset, execution.refs.values())):
            self._start_sql(run, out)

    def _on_accum_updates(self, event: Mapping[str, Any], out: list[Event]) -> None:
        execution = self._executions.get(_int(event.get("executionId")))  # type: ignore[arg-type]
        updates = event.get("accumUpdates")
        if execution is None or not isinstance(updates, Sequence):
            return
        for pair in updates:
            if isinstance(pair, Sequence) and len(pair) == 2:
                acc, value = _int(pair[0]), _number(pair[1])
                if acc is not None and value is not None:
                    execution.values[acc] = value

    def _on_sql_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        execution = self._executions.get(_int(event.get("executionId")))  # type: ignore[arg-type]
        if execution is None or execution.exec_id != execution.root:
            return  # a nested execution: its root's end follows with the same error
        end = self._tick(_int(event.get("time")))
        run = self._sql_runs[execution.root]
        error = _str(event.get("errorMessage"))
        if not error:
            self._last = _Failure("ok", "")
            self._finish(run, end, "COMPLETE", None, out)
            return
        outcome = _classify(error)
        self._last = _Failure(outcome, error, run.failure.stack if run.failure else None)
        self._finish(run, end, "FAIL" if outcome == "failed" else "ABORT", self._last, out)

    def _start_sql(self, run: _Run, out: list[Event]) -> None:
        """Name the run after the first execution that writes (else the root) and its first
        output, then START it."""
        assert self._app is not None
        writer = next((e for e in run.executions if e.writes), run.executions[0])
        command = plans.command_name(writer.command) or "sql_execution"
        suffix = self._datasets(run).first_output_suffix
        run.job_name = naming.job_name(self._app.job_name, command, suffix)
        self._start(run, out)

    # -- jobs, stages, tasks ---------------------------------------------------------------

    def _on_job_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        job_id = _int(event.get("Job ID"))
        if self._app is None or self._app_ids is None or job_id is None:
            return
        if job_id in self._seen_jobs:
            return
        _remember(self._seen_jobs, job_id)
        submitted = self._tick(_int(event.get("Submission Time")))
        props = event.get("Properties")
        props = props if isinstance(props, Mapping) else {}
        warehouse = _str(props.get("spark.sql.warehouse.dir"))
        if warehouse:
            self._props.setdefault("spark.sql.warehouse.dir", warehouse)
        infos = event.get("Stage Infos")
        stages = _int_list(event.get("Stage IDs")) or [
            i for s in _dicts(infos) if (i := _int(s.get("Stage ID"))) is not None
        ]
        job = self._jobs[job_id] = _Job(
            job_id, _int_text(props.get("spark.sql.execution.id")), stages
        )
        for stage in stages:
            self._stage_job.setdefault(stage, job_id)
        paths = plans.rdd_inputs(infos) if job.execution is None else ()
        if paths:
            app_id, attempt, _ = self._app_ids
            suffix = plans.rdd_job_suffix(infos) or f"rdd_job_{job_id}"
            job.run = _Run(
                "rdd",
                runids.run_id(submitted, app_id, attempt, "rdd", job_id),
                "RDD_JOB",
                submitted,
                naming.job_name(self._app.job_name, suffix),
                key=job_id,
                paths=paths,
            )
            self._rdd_runs[job_id] = job.run
            self._start(job.run, out)

    def _on_job_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        job = self._jobs.pop(_int(event.get("Job ID")), None)  # type: ignore[arg-type]
        if job is None:
            return
        end = self._tick(_int(event.get("Completion Time")))
        for stage in job.stages:
            if self._stage_job.get(stage) == job.job_id:
                del self._stage_job[stage]
        failure = _job_failure(event.get("Job Result"))
        self._last = failure or _Failure("ok", "")
        execution = self._executions.get(job.execution) if job.execution is not None else None
        if failure is not None and execution is not None:
            self._sql_runs[execution.root].failure = failure
        if job.run is not None:
            state = (
                "COMPLETE"
                if failure is None
                else ("FAIL" if failure.outcome == "failed" else "ABORT")
            )
            self._finish(job.run, end, state, failure, out)

    def _on_stage_completed(self, event: Mapping[str, Any], out: list[Event]) -> None:
        info = event.get("Stage Info")
        if self._app is None or not isinstance(info, Mapping):
            return
        self._tick(_int(info.get("Completion Time")))
        run, execution = self._owner(_int(info.get("Stage ID")))
        accumulables = info.get("Accumulables")
        if not isinstance(accumulables, Sequence):
            return
        metric_ids: set[int] = set()
        if execution is not None:
            metric_ids = {a for r in execution.refs.values() for a in r.metrics.values()}
        tallies = [self._app.tally] + ([run.tally] if run else [])
        for acc in accumulables:
            value = _number(acc.get("Value")) if isinstance(acc, Mapping) else None
            if value is None:
                continue
            name = acc.get("Name")
            counter = _COUNTER_METRICS.get(name) if isinstance(name, str) else None
            acc_id = _int(acc.get("ID"))
            if counter is not None:
                for tally in tallies:
                    setattr(tally, counter, getattr(tally, counter) + value)
            elif execution is not None and acc_id in metric_ids:
                # a SQL metric's value here is its running total over all stages so far
                execution.values[acc_id] = max(value, execution.values.get(acc_id, 0))

    def _on_task_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        reason = event.get("Task End Reason")
        reason = reason.get("Reason") if isinstance(reason, Mapping) else None
        if self._app is None or not isinstance(reason, str) or reason in ("Success", "TaskKilled"):
            return
        info = event.get("Task Info")
        if isinstance(info, Mapping):
            self._tick(_int(info.get("Finish Time")))
        run, _ = self._owner(_int(event.get("Stage ID")))
        self._app.tally.failed_tasks += 1
        if run is not None:
            run.tally.failed_tasks += 1

    def _owner(self, stage: int | None) -> tuple[_Run | None, _Execution | None]:
        """The open child run (and SQL execution) whose job ran this stage."""
        job = self._jobs.get(self._stage_job.get(stage, -1)) if stage is not None else None
        if job is None:
            return None, None
        if job.run is not None:
            return (job.run if job.run.state == "RUNNING" else None), None
        execution = self._executions.get(job.execution) if job.execution is not None else None
        if execution is None:
            return None, None
        return self._sql_runs[execution.root], execution

    # -- RunEvents -------------------------------------------------------------------------

    def _start(self, run: _Run, out: list[Event]) -> None:
        run.started = True
        run.last_emit_ms = run.start_ms
        out.append(self._event("START", run, run.start_ms, None))

    def _finish(
        self, run: _Run, end: int, state: str, failure: _Failure | None, out: list[Event]
    ) -> None:
        """The run's one terminal event; a SQL run never STARTed starts now if it has data."""
        if run.state != "RUNNING":
            return
        if run.kind == "sql":
            del self._sql_runs[run.key]
            _remember(self._ended_roots, run.key)
            for execution in run.executions:
                self._executions.pop(execution.exec_id, None)
            if not run.started:
                if not (any(e.refs for e in run.executions) or self.options.emit_empty_executions):
                    run.state = state
                    return
                self._start_sql(run, out)
        elif run.kind == "rdd":
            self._rdd_runs.pop(run.key, None)
        if self._stop is not None and state == "FAIL":
            state = "ABORT"  # failures after `job stop` are the stop's doing
        run.state = state
        run.end_ms = max(end, run.last_emit_ms)  # never before its START or last RUNNING
        run.error = failure.message if failure and failure.message else None
        out.append(self._event(state, run, run.end_ms, failure))
        if run.kind != "application":
            self._done.append(_summary(run))

    def _emit_running(self, out: list[Event]) -> None:
        interval = self.options.running_interval_ms
        if interval <= 0 or self._app is None or self._finished:
            return
        for run in (self._app, *self._sql_runs.values(), *self._rdd_runs.values()):
            if run.started and self._clock - run.last_emit_ms >= interval:
                run.last_emit_ms = self._clock
                out.append(self._event("RUNNING", run, self._clock, None))

    def _event(self, event_type: str, run: _Run, time_ms: int, failure: _Failure | None) -> Event:
        run_facets: dict[str, Any] = {}
        parent = self._parent_facet(run)
        if parent is not None:
            run_facets["parent"] = parent
        run_facets["processing_engine"] = _facet(
            "processing_engine",
            version=self._spark_version or "unknown",
            name="spark",
            openlineageAdapterVersion=__version__,
        )
        counted = event_type != "START"  # START always reports zeros
        tally = run.tally
        run_facets["lineageAgent_run"] = {
            "_producer": PRODUCER,
            "_schemaURL": RUN_SCHEMA_URL,
            "recordsIn": tally.records_in if counted else 0,
            "recordsOut": tally.records_out if counted else 0,
            "bytesIn": tally.bytes_in if counted else 0,
            "bytesOut": tally.bytes_out if counted else 0,
            "failedTasks": tally.failed_tasks if counted else 0,
        }
        if failure is not None and failure.message:
            error = _facet("errorMessage", message=failure.message, programmingLanguage="JAVA")
            if failure.stack:
                error["stackTrace"] = failure.stack
            run_facets["errorMessage"] = error
        datasets = self._datasets(run)
        run.inputs, run.outputs = tuple(datasets.inputs), tuple(datasets.outputs)
        inputs, outputs = datasets.as_lists(statistics=event_type not in ("START", "RUNNING"))
        job_type = _facet(
            "jobType", processingType="BATCH", integration="SPARK", jobType=run.job_type
        )
        return {
            "eventTime": _iso(time_ms),
            "eventType": event_type,
            "producer": PRODUCER,
            "schemaURL": OPENLINEAGE_SCHEMA_URL,
            "run": {"runId": run.run_id, "facets": run_facets},
            "job": {
                "namespace": self.options.namespace,
                "name": run.job_name,
                "facets": {"jobType": job_type},
            },
            "inputs": inputs,
            "outputs": outputs,
        }

    def _datasets(self, run: _Run) -> RunDatasets:
        catalog = Catalog(
            self._props.get("spark.sql.warehouse.dir"),
            self._props.get("spark.hadoop.hive.metastore.uris")
            or self._props.get("hive.metastore.uris"),
        )
        if run.kind == "sql":
            refs = [(r, e.values) for e in run.executions for r in e.refs.values()]
            return naming.collect(refs, catalog)
        datasets = naming.collect(
            [(DatasetRef("input", "RDD", location=path), {}) for path in run.paths], catalog
        )
        if len(datasets.inputs) == 1:  # the job's read counters are this dataset's
            only = next(iter(datasets.inputs))
            datasets.stats[("input", only)] = {
                "rows": run.tally.records_in,
                "bytes": run.tally.bytes_in,
            }
        return datasets

    def _parent_facet(self, run: _Run) -> dict[str, Any] | None:
        """Children point at the application; the application at the scheduler run that
        launched it, when `spark.openlineage.parent*` / `rootParent*` properties say so."""
        assert self._app is not None
        external = self._external_run("parent")
        root = self._external_run("rootParent") or external
        if run.kind == "application":
            if external is None:
                return None
            parent = external
        else:
            parent = (self.options.namespace, self._app.job_name, self._app.run_id)
        root = root or parent
        return _facet(
            "parent",
            run={"runId": parent[2]},
            job={"namespace": parent[0], "name": parent[1]},
            root={"run": {"runId": root[2]}, "job": {"namespace": root[0], "name": root[1]}},
        )

    def _external_run(self, prefix: str) -> tuple[str, str, str] | None:
        namespace = self._props.get(f"spark.openlineage.{prefix}JobNamespace")
        name = self._props.get(f"spark.openlineage.{prefix}JobName")
        run_id = _uuid(self._props.get(f"spark.openlineage.{prefix}RunId"))
        return (namespace, name, run_id) if namespace and name and run_id else None

    def _tick(self, time_ms: int | None) -> int:
        """Advance the Spark clock to an event's time; an event without one happens 'now'."""
        if time_ms is None:
            return self._clock
        time_ms = min(max(time_ms, 0), _MAX_MS)
        self._clock = max(self._clock, time_ms)
        return time_ms


def _remember(ids: set[int], new: int) -> None:
    """Remember an id to refuse its duplicates; only the most recent ids are kept, so a
    streaming application running for months does not grow the set without bound."""
    ids.add(new)
    if len(ids) > _REMEMBERED:
        for old in sorted(ids)[: _REMEMBERED // 2]:
            ids.discard(old)


def _facet(key: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": RUN_FACET_URLS[key], **fields}


def _summary(run: _Run) -> RunSummary:
    tally = run.tally
    return RunSummary(
        run_id=run.run_id,
        job_name=run.job_name,
        job_type=run.job_type,
        state=run.state,
        start_ms=run.start_ms,
        end_ms=run.end_ms,
        inputs=run.inputs,
        outputs=run.outputs,
        counters=Counters(
            tally.records_in,
            tally.records_out,
            tally.bytes_in,
            tally.bytes_out,
            tally.failed_tasks,
        ),
        error=run.error,
    )


def _classify(message: str) -> Outcome:
    if _SHUTDOWN in message:
        return "shutdown"
    return "cancelled" if _CANCELLED.match(message) else "failed"


def _job_failure(result: object) -> _Failure | None:
    """None for JobSucceeded, else the failure with a Java-style stack trace."""
    if not isinstance(result, Mapping) or result.get("Result") != "JobFailed":
        return None
    exception = result.get("Exception")
    exception = exception if isinstance(exception, Mapping) else {}
    message = _str(exception.get("Message")) or "job failed"
    frames = exception.get("Stack Trace")
    lines = [message]
    if isinstance(frames, Sequence) and not isinstance(frames, str):
        lines += [
            f"\tat {f.get('Declaring Class')}.{f.get('Method Name')}"
            f"({f.get('File Name')}:{f.get('Line Number')})"
            for f in frames
            if isinstance(f, Mapping)
        ]
    return _Failure(_classify(message), message, "\n".join(lines) if len(lines) > 1 else None)


def _iso(ms: int) -> str:
    """Unix ms -> ISO-8601 UTC with milliseconds and `Z`."""
    ms = min(max(ms, 0), _MAX_MS)
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _uuid(value: str | None) -> str | None:
    try:
        return str(uuid.UUID(value)) if value else None
    except ValueError:
        return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_text(value: object) -> int | None:
    """Job properties are strings: `spark.sql.execution.id` is "3"."""
    if isinstance(value, str):
        return int(value) if value.isdigit() else None
    return _int(value)


def _number(value: object) -> int | None:
    """Accumulator values: ints for task metrics, decimal strings for SQL metrics."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return _int_text(value)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_list(value: object) -> list[int]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def _dicts(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _pairs(section: object) -> Iterable[tuple[str, str]]:
    """Properties as Spark writes them: an object (4.x) or a list of [key, value] pairs."""
    if isinstance(section, Mapping):  # look up the few wanted keys, not the ~1000 present
        found = ((key, section.get(key)) for key in _PROPERTIES)
        return [(k, v) for k, v in found if isinstance(v, str)]
    if not isinstance(section, Sequence) or isinstance(section, str):
        return []
    return [
        (p[0], p[1])
        for p in section
        if isinstance(p, Sequence) and len(p) == 2 and all(isinstance(x, str) for x in p)
    ]
