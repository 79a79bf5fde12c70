"""SparkListener events of one application attempt -> OpenLineage RunEvents. Pure.

`ApplicationTranslator.feed` takes parsed event-log lines in order and returns the RunEvents
each one completes. No I/O, no clock, no randomness: times come from Spark's timestamps, run
ids from `runids`, so replaying a log yields byte-identical events.

A malformed event (one of a kind it acts on, without a field Spark always writes in it: see
`required`) is a corrupt line, not a state change: it is skipped whole and listed in
`malformed` as (event kind, missing field) for the caller to count and log.

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
  RDD lineage like the OpenLineage integration does (RDD outputs are not in the event log);
* each start of a Structured Streaming query: jobType STREAMING_QUERY (`queries`); its
  micro-batch executions are runs only with `streaming_batch_runs`.

Events, RUNNING, `job stop`: `lifecycle`; schemas completed from what the application showed:
`schemas`; what tables' metadata adds (versions, schemas): `versions`; end states and
counters: `runs`.

Terminal state of the application: ABORT after `request_stop` (`lineage-agent job stop`),
else the rules of `model.application_end` (non-zero ExitCode, work in flight, the last job or
execution failed, else COMPLETE), amended by the verdict of `lineage-agent exec` (`verdict`):
with `await_verdict`, an application run by it is held at ApplicationEnd until `settle`.
`close(cause="driver_lost")` (no ApplicationEnd will come: the driver died) ends every open
run FAIL, `close(cause="stopped")` ABORT. At ApplicationEnd every open child run is ended
first, so the application's terminal event is always the last one; events that follow it
(late JobEnd / SQLExecutionEnd of cancelled work) are ignored. A failed job whose JobEnd is
logged after ApplicationEnd is therefore reported as aborted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from agent.spark.plan.syntax.tables import normalize
from agent.spark.translate.execprops import EXEC
from agent.spark.translate.facets.appfacets import DETAIL_PROPERTIES
from agent.spark.translate.facets.events import MAX_MS
from agent.spark.translate.facets.verdict import (
    CANCELLED_AT_END,
    AppEnd,
    Verdict,
    application_state,
    lost_driver,
)
from agent.spark.translate.model import (
    AppSummary,
    Failure,
    Run,
    job_failure,
    summary,
    terminal_state,
)
from agent.spark.translate.naming import JobNames, job_name
from agent.spark.translate.options import PROPERTIES, PROPERTY_PREFIXES, TranslateOptions
from agent.spark.translate.required import missing_field
from agent.spark.translate.runs import charges, runids
from agent.spark.translate.runs.jobs import Jobs, rdd_run
from agent.spark.translate.runs.lifecycle import Lifecycle
from agent.spark.translate.runs.queries import Queries
from agent.spark.translate.runs.statements import Statements
from agent.spark.translate.values import as_int, as_str, properties

Event = dict[str, Any]


class ApplicationTranslator:
    """Translates one Spark application attempt; feed it the event log in order."""

    def __init__(self, options: TranslateOptions) -> None:
        self.options = options
        self.warnings: list[str] = []  # the caller drains and logs these
        self.malformed: list[tuple[str, str]] = []  # (event, missing field); drained likewise
        self._app_ids: tuple[str, str | None, str] | None = None  # app id, attempt, name
        self._props: dict[str, str] = {}
        self._wanted_props = PROPERTIES | DETAIL_PROPERTIES | set(options.properties_facet)
        self._names = JobNames()
        self._life = Lifecycle(options, self._props, self.warnings)
        self.tables = self._life.tables  # table versions and schemas to look up
        self._finished = False
        self._rdd_runs: dict[int, Run] = {}  # open, by job id
        self._jobs = Jobs()
        self._ending: AppEnd | None = None  # ApplicationEnd, held for the command's verdict
        self._handlers: dict[str, Callable[[Mapping[str, Any], list[Event]], None]] = {
            "SparkListenerLogStart": self._on_log_start,
            "SparkListenerEnvironmentUpdate": self._on_environment,
            "SparkListenerApplicationStart": self._on_app_start,
            "SparkListenerApplicationEnd": self._on_app_end,
            "SparkListenerJobStart": self._on_job_start,
            "SparkListenerJobEnd": self._on_job_end,
            "SparkListenerStageCompleted": self._on_stage_completed,
            "SparkListenerTaskEnd": self._on_task_end,
        }
        self._queries = Queries(self._life, self.warnings, options.streaming_batch_runs)
        self._statements = Statements(
            options, self._life, self._queries, self._names, self.warnings
        )
        self._sql = self._statements.sql
        for part in (self._queries, self._statements):
            self._handlers.update(part.handlers())

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
        if not isinstance(event, Mapping):
            return out
        kind = event.get("Event")
        name = kind.rsplit(".", 1)[-1] if isinstance(kind, str) else ""
        handler = self._handlers.get(name)
        if handler is None:
            return out
        missing = missing_field(name, event)
        if missing is not None:  # counted like a corrupt line, whatever the state
            self.malformed.append((name, missing))
            return out
        if self._finished:
            return out
        try:
            handler(event, out)
            if not self._finished and self._life.app is not None:
                runs = (self._life.app, *self._sql.runs(), *self._rdd_runs.values())
                self._life.running(runs, out)
        except Exception as exc:  # the contract: no event, however malformed, raises
            self.warnings.append(f"internal error on {kind}: {exc!r}")
        return out

    def request_stop(self, *, reason: str, requested_by: str) -> None:
        """Mark the application as stopped from outside (`job stop`): runs then end ABORT."""
        self._life.stop = (reason, requested_by)

    @property
    def stop_requested(self) -> bool:
        return self._life.stop is not None

    @property
    def exec_id(self) -> str | None:
        """The `lineage-agent exec` that ran this application, if one did."""
        return self._props.get(EXEC)

    @property
    def awaiting_verdict(self) -> bool:
        """ApplicationEnd was read; the application's end waits for `settle`."""
        return self._ending is not None

    def settle(self, verdict: Verdict | None) -> list[Event]:
        """End the application held at ApplicationEnd with the verdict of its command (None:
        none came, Spark's log alone decides); see `verdict`."""
        out: list[Event] = []
        ending, self._ending = self._ending, None
        if ending is None:
            return out
        state, failure = application_state(ending, verdict)
        self._end_app(ending.time_ms, state, failure, out, children=("ABORT", CANCELLED_AT_END))
        return out

    def close(
        self,
        *,
        cause: Literal["driver_lost", "stopped"],
        time_ms: int,
        message: str,
        verdict: Verdict | None = None,
    ) -> list[Event]:
        """End every open run (FAIL for driver_lost, ABORT for stopped): the log will not grow.

        `time_ms` is raised to the latest Spark timestamp seen, so no terminal event predates
        its run's START. A lost driver's `verdict` (of `lineage-agent exec`) joins the
        application's error message.
        """
        if self._ending is not None:  # ApplicationEnd came: no verdict will now
            return self.settle(None)
        out: list[Event] = []
        if self._life.app is None or self._finished:
            return out
        end = max(min(time_ms, MAX_MS), self._life.clock)
        state = "FAIL" if cause == "driver_lost" else "ABORT"
        failure = Failure("failed" if state == "FAIL" else "shutdown", message)
        children = (state, failure)
        if state == "FAIL" and verdict is not None:
            failure = lost_driver(message, verdict)
        self._end_app(end, state, failure, out, children=children)
        return out

    def snapshot(self) -> AppSummary:
        """Runs with job names, states, datasets and counters: for status / describe."""
        children = (*self._sql.runs(), *self._rdd_runs.values(), *self._queries.runs())
        open_runs = [r for r in children if r.started]
        return AppSummary(
            app_id=self.app_id,
            attempt_id=self.attempt_id,
            app_name=self.app_name,
            application=summary(self._life.app) if self._life.app else None,
            runs=(*self._life.done, *map(summary, open_runs)),
            stop_requested=self._life.stop is not None,
            exec_id=self.exec_id,
            awaiting_verdict=self.awaiting_verdict,
        )

    # -- the application -------------------------------------------------------------------

    def _on_log_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        self._life.spark_version = as_str(event.get("Spark Version")) or self._life.spark_version

    def _on_environment(self, event: Mapping[str, Any], out: list[Event]) -> None:
        for section in ("Spark Properties", "Hadoop Properties"):
            for key, value in properties(event.get(section), self._wanted_props, PROPERTY_PREFIXES):
                self._props.setdefault(key, value)
        self._life.kafka_servers.environment(event.get("Spark Properties"))

    def _on_app_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        app_id = as_str(event.get("App ID"))
        if self._life.app is not None or not app_id:  # an App ID is required (see `required`)
            self.warnings.append("ApplicationStart ignored: a second one")
            return
        start = self._life.tick(as_int(event.get("Timestamp")))
        name = as_str(event.get("App Name")) or self._props.get("spark.app.name") or app_id
        attempt = as_str(event.get("App Attempt ID"))
        self._app_ids = (app_id, attempt, name)
        self._life.identity = (self._app_ids, as_str(event.get("User")))
        job = normalize(self._props.get("spark.openlineage.appName") or name) or "spark"
        run_id = runids.run_id(start, app_id, attempt, "application")
        self._life.app = Run("application", run_id, "APPLICATION", start, job)
        self._life.start(self._life.app, out)

    def _on_app_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        if self._life.app is None:
            return
        end = self._life.tick(as_int(event.get("Timestamp")))
        in_flight = bool(self._jobs or self._sql or self._queries)
        self._ending = AppEnd(end, as_int(event.get("ExitCode")), in_flight, self._life.last)
        self._finished = True  # what follows ApplicationEnd is ignored, verdict or not
        if not (self.options.await_verdict and self.exec_id):
            out.extend(self.settle(None))

    def _end_app(
        self,
        end: int,
        state: str,
        failure: Failure | None,
        out: list[Event],
        *,
        children: tuple[str, Failure],
    ) -> None:
        """End the open child runs, then the application: its terminal event comes last."""
        assert self._life.app is not None
        for run in (*self._sql.runs(), *self._rdd_runs.values()):
            self._finish(run, end, children[0], children[1], out)
        self._queries.end_all(end, *children, out)
        if self._life.stop is not None:
            state, failure = "ABORT", self._life.stopped(None)
        self._finish(self._life.app, end, state, failure, out)
        self._finished = True

    # -- jobs, stages, tasks ---------------------------------------------------------------

    def _on_job_start(self, event: Mapping[str, Any], out: list[Event]) -> None:
        job_id = as_int(event.get("Job ID"))
        if self._life.app is None or self._app_ids is None or job_id is None:
            return
        job = self._jobs.start(job_id, event)
        if job is None:
            return
        submitted = self._life.tick(as_int(event.get("Submission Time")))
        props = event.get("Properties")
        execution = self._sql.execution(job.execution)
        # Known now, not at JobEnd: Spark may log the execution's end (which forgets it) first.
        job.batch = (execution is not None and self._sql.run_of(execution).query is not None) or (
            isinstance(props, Mapping) and self._queries.runs_group(props.get("spark.jobGroup.id"))
        )
        warehouse = (
            as_str(props.get("spark.sql.warehouse.dir")) if isinstance(props, Mapping) else None
        )
        if warehouse:
            self._props.setdefault("spark.sql.warehouse.dir", warehouse)
        found = rdd_run(job, job_id, event, submitted, self._app_ids[:2])
        if found is not None:
            job.run, suffix = found
            datasets = self._life.datasets(job.run)
            step = (suffix, "", frozenset(datasets.inputs), frozenset(datasets.outputs))
            base = job_name(self._life.app.job_name, suffix)
            job.run.job_name = self._names.assign(base, step)
            self._rdd_runs[job_id] = job.run
            self._life.start(job.run, out)

    def _on_job_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        job = self._jobs.end(as_int(event.get("Job ID")))
        if job is None:
            return
        end = self._life.tick(as_int(event.get("Completion Time")))
        failure = job_failure(event.get("Job Result"))
        execution = self._sql.execution(job.execution)
        if not (job.batch and failure is not None):  # a micro-batch's failure is its query's
            self._life.last = failure or Failure("ok", "")
        if failure is not None and execution is not None:
            self._sql.run_of(execution).failure = failure
        if job.run is not None:
            self._finish(job.run, end, terminal_state(failure), failure, out)

    def _on_stage_completed(self, event: Mapping[str, Any], out: list[Event]) -> None:
        info = event.get("Stage Info")
        if self._life.app is None or not isinstance(info, Mapping):
            return
        self._life.tick(as_int(info.get("Completion Time")))
        charges.completed_stage(self._life.app, self._jobs, self._sql, info)

    def _on_task_end(self, event: Mapping[str, Any], out: list[Event]) -> None:
        app = self._life.app
        if app is None or not charges.failed_task(app, self._jobs, self._sql, event):
            return
        info = event.get("Task Info")
        if isinstance(info, Mapping):
            self._life.tick(as_int(info.get("Finish Time")))

    # -- ending runs ------------------------------------------------------------------------

    def _finish(
        self, run: Run, end: int, state: str, failure: Failure | None, out: list[Event]
    ) -> None:
        """The run's one terminal event (a SQL run's: `Statements.finish`)."""
        if run.kind == "sql":
            self._statements.finish(run, end, state, failure, out)
            return
        if run.state != "RUNNING":
            return
        if run.kind == "rdd":
            self._rdd_runs.pop(run.key, None)
        self._life.end(run, end, state, failure, out)
