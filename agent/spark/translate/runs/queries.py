"""Streaming query runs: one run per query start, its micro-batches folded in. Pure.

* `QueryStartedEvent` STARTs a run (jobType STREAMING_QUERY, processingType STREAMING), job
  `{app}.streaming_query.{query name}` (the query id when it has no name): the same job for
  every run of the query, restarts (same id, new runId) included. The run id is derived from
  the application and Spark's runId.
* `QueryProgressEvent` updates the `lineageAgent_stream` facet (batch id, rows, rates,
  offsets) and the datasets, and emits RUNNING at the lifecycle's interval; so does
  `QueryIdleEvent`, which an idle query posts instead of progress events.
* `QueryTerminatedEvent` ends it: COMPLETE without an exception, else FAIL (ABORT for a
  cancellation) with the exception in `errorMessage` and the error class in the facet.
* A query still open when the application ends (SIGTERM to the driver writes no terminated
  event) or when the driver is lost ends like the application's other open runs: ABORT, or
  FAIL for a lost driver.

Micro-batch SQL executions stay SQL runs of the translator's, linked here to their query
(`link`): their datasets go to the query run, their task counters too (the translator adds
them), and they are STARTed as runs of their own, children of the query run, only with
`streaming_batch_runs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, ValuesView
from typing import Any, Final

from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.tables import normalize
from agent.spark.plan.touched.read import micro_batch_sink, micro_batch_tables, returned_rows
from agent.spark.translate.datasets import streaming
from agent.spark.translate.datasets.descriptions import Tables
from agent.spark.translate.model import Execution, Failure, Run, StreamQuery, terminal_state
from agent.spark.translate.naming import job_name
from agent.spark.translate.options import catalog_of
from agent.spark.translate.runs import runids
from agent.spark.translate.runs.lifecycle import Lifecycle

Event = dict[str, Any]
Handler = Callable[[Mapping[str, Any], list[Event]], None]

_PREFIX: Final = "StreamingQueryListener$"
_ENDED_KEPT: Final = 4096  # ended query runs remembered to refuse a repeated start
#: The errorMessage of a query still running when its application ended.
APP_ENDED: Final = (
    "the application ended while the streaming query was running (no QueryTerminatedEvent: "
    "the driver was stopped)"
)


class Queries:
    """The open streaming query runs of one application, by Spark's runId."""

    def __init__(self, life: Lifecycle, warnings: list[str], batch_runs: bool) -> None:
        self._life = life
        self._warnings = warnings
        self.batch_runs = batch_runs  # micro-batches as child runs of their query run
        self._open: dict[str, Run] = {}
        self._ended: dict[str, None] = {}  # recent runIds that ended, oldest first

    @property
    def _tables(self) -> Tables:
        """The catalog tables streaming names, located from the application's properties."""
        return Tables(catalog_of(self._life.props))

    def __bool__(self) -> bool:
        return bool(self._open)

    def runs(self) -> ValuesView[Run]:
        return self._open.values()

    def handlers(self) -> dict[str, Handler]:
        """The translator's handlers for the listener's query events."""
        return {
            _PREFIX + "QueryStartedEvent": self._started,
            _PREFIX + "QueryProgressEvent": self._progress,
            _PREFIX + "QueryIdleEvent": self._idle,
            _PREFIX + "QueryTerminatedEvent": self._terminated,
        }

    def link(self, run: Run, event: Mapping[str, Any]) -> None:
        """Make a new SQL run a micro-batch of its query when its SQLExecutionStart says so:
        its description (`<name>\nid = …\nrunId = …\nbatch = N`), else its job group (the
        query's runId), which a description set by the user would leave."""
        found = streaming.micro_batch_of(event.get("description"))
        group = event.get("jobGroupId")
        spark_run_id = found[1] if found else group.lower() if isinstance(group, str) else None
        query = self._open.get(spark_run_id) if spark_run_id else None
        if query is not None:
            run.query = query
            run.job_name = job_name(query.job_name, "micro_batch")

    def runs_group(self, group: object) -> bool:
        """Whether a job group is an open query's (its runId): the query's jobs outside SQL."""
        return isinstance(group, str) and group.lower() in self._open

    def own(self, run: Run) -> bool:
        """Whether a SQL run is a run of its own: not a micro-batch folded into its query."""
        return run.query is None or self.batch_runs

    def absorb(self, run: Run, execution: Execution, event: Mapping[str, Any]) -> None:
        """A micro-batch execution's datasets join its query run; the rows the batch's root
        returns are what a sink outside the plan writes (their schema and lineage)."""
        query = run.query.stream if run.query is not None else None
        if query is None:
            return
        plan = event.get("physicalPlanDescription")
        if execution.exec_id == execution.root and not execution.writes:
            rows = returned_rows(plan)
            # a batch with no new input plans its source as empty local rows: what the
            # sink writes still comes from the source, as a batch that read it showed
            if rows is not None and (rows.columns is not None or query.rows is None):
                query.rows = rows
            servers = self._life.kafka_servers.servers  # a sink's, like a source's: learned
            sink = [_on(r, servers) for r in micro_batch_sink(plan)]
            query.plan_sink = tuple(sink) or query.plan_sink
        scanned = streaming.add_scanned_tables(query, micro_batch_tables(plan), self._tables)
        self._note(query, scanned)
        if not streaming.absorb(query, execution.refs.values()):
            self._warnings.append(
                f"streaming query {query.name or query.query_id}: more than "
                f"{streaming.MAX_REFS} datasets in its micro-batches; from execution "
                f"{execution.exec_id} on, new ones are left out"
            )

    def end_all(self, end: int, state: str, failure: Failure, out: list[Event]) -> None:
        """End every open query run: the application ends or its driver is gone."""
        for run in list(self._open.values()):
            if failure.outcome == "shutdown":
                failure = Failure("shutdown", APP_ENDED)
            self._end(run, end, state, failure, out)

    # -- the listener's events ---------------------------------------------------------------

    def _started(self, event: Mapping[str, Any], out: list[Event]) -> None:
        ids = self._life.app_ids
        if ids is None or self._life.app is None:
            return
        query = streaming.new_query(event)
        if query.spark_run_id in self._open or query.spark_run_id in self._ended:
            self._warnings.append(f"QueryStartedEvent ignored: run {query.spark_run_id} seen")
            return
        start = self._life.tick(streaming.iso_ms(event.get("timestamp")))
        app_id, attempt = ids
        suffix = normalize(query.name or "") or query.query_id
        run = Run(
            "stream",
            runids.run_id(start, app_id, attempt, "stream", query.spark_run_id),
            streaming.JOB_TYPE,
            start,
            job_name(self._life.app.job_name, "streaming_query", suffix),
            stream=query,
        )
        self._open[query.spark_run_id] = run
        self._life.start(run, out)

    def _progress(self, event: Mapping[str, Any], out: list[Event]) -> None:
        progress = event["progress"]
        run = self._open.get(str(progress["runId"]).lower())
        if run is None or run.stream is None:
            return
        self._life.tick(streaming.iso_ms(progress.get("timestamp")))
        kafka = self._life.kafka_servers.servers
        self._note(run.stream, streaming.add_progress(run.stream, progress, kafka, self._tables))
        self._life.running([run], out)

    def _idle(self, event: Mapping[str, Any], out: list[Event]) -> None:
        """No new data for `spark.sql.streaming.noDataProgressEventInterval` (10 s): no
        progress event comes, but the query lives, so RUNNING still follows the interval."""
        run = self._open.get(str(event["runId"]).lower())
        if run is not None:
            self._life.tick(streaming.iso_ms(event.get("timestamp")))
            self._life.running([run], out)

    def _terminated(self, event: Mapping[str, Any], out: list[Event]) -> None:
        run = self._open.get(str(event["runId"]).lower())
        if run is None or run.stream is None:
            return
        failure = streaming.terminated(event, run.stream)
        if run.stream.sink is None and run.stream.batches == 0:  # no progress event came
            # then the sink its micro-batch's write names, if it names one
            planned = any(r.unknown_reason is None and not r.pattern for r in run.stream.plan_sink)
            self._note(
                run.stream, [streaming.NO_PROGRESS_PLANNED if planned else streaming.NO_PROGRESS]
            )
        self._end(run, self._life.clock, terminal_state(failure), failure, out)

    def _note(self, query: StreamQuery, notes: list[str]) -> None:
        name = query.name or query.query_id
        self._warnings += [f"streaming query {name}: {note}" for note in notes]

    def _end(
        self, run: Run, end: int, state: str, failure: Failure | None, out: list[Event]
    ) -> None:
        assert run.stream is not None
        del self._open[run.stream.spark_run_id]
        self._ended[run.stream.spark_run_id] = None
        if len(self._ended) > _ENDED_KEPT:  # a months-long application restarts queries
            del self._ended[next(iter(self._ended))]
        self._life.end(run, end, state, failure, out)


def _on(ref: DatasetRef, servers: str | None) -> DatasetRef:
    """A Kafka topic a plan names without its servers, on the servers the log showed."""
    if ref.kafka is None or ref.kafka[0] is not None:
        return ref
    return dataclasses.replace(ref, kafka=(servers, ref.kafka[1]))
