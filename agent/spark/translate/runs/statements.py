"""The program's SQL statements: SQL executions, grouped into runs by their root. Pure.

A root execution is one statement of the program (`spark.sql(...)`, a write, an action);
nested executions (CTAS and the insert it runs, a format's own reads) share its run
(`executions.SqlRuns`). A run STARTs at the first execution of its group that names a
dataset (a CTAS alone only knows its table; the nested insert knows the path) and ends at
the root's SQLExecutionEnd. Which ones become runs and under which job names: `steps` (Spark's
own work for a reader never does; read-only actions when asked; executions without datasets
with `emit_empty_executions`, then START and terminal together at their end); micro-batches
of streaming queries: `queries`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.spark.plan.touched.read import file_reads
from agent.spark.translate.datasets.jdbc import JdbcUrls
from agent.spark.translate.datasets.places import TablePlaces
from agent.spark.translate.datasets.relations import FileRelations
from agent.spark.translate.model import (
    Execution,
    Failure,
    Run,
    classify,
    remember,
    task_error,
    terminal_state,
)
from agent.spark.translate.naming import JobNames
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.runs import runids, steps
from agent.spark.translate.runs.executions import SqlRuns, add_metrics, add_plan
from agent.spark.translate.runs.lifecycle import Lifecycle
from agent.spark.translate.runs.queries import Queries
from agent.spark.translate.values import as_int, as_str

Event = dict[str, Any]
Handler = Callable[[Mapping[str, Any], list[Event]], None]


class Statements:
    """The SQL runs of one application; see the module docstring."""

    def __init__(
        self,
        options: TranslateOptions,
        life: Lifecycle,
        queries: Queries,
        names: JobNames,
        warnings: list[str],
    ) -> None:
        self.options = options
        self.sql = SqlRuns()
        self._life = life
        self._queries = queries
        self._names = names
        self._warnings = warnings
        self._internal: set[int] = set()  # recent root executions that are Spark's own
        self._jdbc = JdbcUrls(life.props)  # the JDBC urls the log showed so far
        self._places = TablePlaces(life.props)  # where the log showed its tables so far
        self._files = FileRelations()  # where the log showed relations' files so far

    def handlers(self) -> dict[str, Handler]:
        """The translator's handlers for the SQL execution events."""
        return {
            "SparkListenerSQLExecutionStart": self._started,
            "SparkListenerSQLAdaptiveExecutionUpdate": self._updated,
            "SparkListenerDriverAccumUpdates": self._accumulated,
            "SparkListenerSQLExecutionEnd": self._ended,
        }

    def finish(
        self, run: Run, end: int, state: str, failure: Failure | None, out: list[Event]
    ) -> None:
        """A SQL run's one terminal event; a run never STARTed starts now if it is wanted."""
        if run.state != "RUNNING":
            return
        self.sql.close(run)
        if not run.started:
            named = any(e.refs for e in run.executions)
            wanted = (named or self.options.emit_empty_executions) and self._queries.own(run)
            if not wanted or (named and not self._wanted(run)):
                run.state = state
                return
            self._start(run, out)
        self._life.end(run, end, state, failure, out)

    def _started(self, event: Mapping[str, Any], out: list[Event]) -> None:
        exec_id, app = as_int(event.get("executionId")), self._life.app_ids
        if self._life.app is None or app is None or exec_id is None:
            return
        if self.sql.execution(exec_id) is not None:
            return
        start = self._life.tick(as_int(event.get("time")))
        self._jdbc.configure(event.get("modifiedConfigs"))
        root = as_int(event.get("rootExecutionId"))
        root = exec_id if root is None or not 0 <= root <= exec_id else root
        if root in self._internal or (root == exec_id and steps.internal(event)):
            remember(self._internal, root)  # Spark's own work for a reader: never a run
            text = event.get("physicalPlanDescription")
            self._files.learn(*file_reads(text), steps.reader(event))
            return
        if self.sql.ended(root):
            self._warnings.append(f"execution {exec_id} started after its root {root} ended")
            return
        run_id = runids.run_id(start, app[0], app[1], "sql", root)
        run, execution = self.sql.open(
            exec_id, root, lambda: Run("sql", run_id, "SQL_JOB", start, key=root)
        )
        steps.mark(run, event, root=exec_id == root)
        if exec_id == root:
            self._queries.link(run, event)
        self._read_plan(execution, event, run, out)

    def _updated(self, event: Mapping[str, Any], out: list[Event]) -> None:
        execution = self.sql.execution(as_int(event.get("executionId")))
        if execution is not None:
            self._read_plan(execution, event, self.sql.run_of(execution), out)

    def _read_plan(
        self, execution: Execution, event: Mapping[str, Any], run: Run, out: list[Event]
    ) -> None:
        kafka = self._life.kafka_servers
        notes, names_data = add_plan(
            execution, event, self._jdbc, run, kafka, self._places, self._files
        )
        self._warnings += [f"{note} in execution {execution.exec_id}" for note in notes]
        self._queries.absorb(run, execution, event)
        if not run.started and names_data and self._queries.own(run) and self._wanted(run):
            self._start(run, out)

    def _accumulated(self, event: Mapping[str, Any], out: list[Event]) -> None:
        execution = self.sql.execution(as_int(event.get("executionId")))
        if execution is not None:
            add_metrics(execution, event.get("accumUpdates"))

    def _ended(self, event: Mapping[str, Any], out: list[Event]) -> None:
        execution = self.sql.execution(as_int(event.get("executionId")))
        if execution is None or execution.exec_id != execution.root:
            return  # a nested execution: its root's end follows with the same error
        end = self._life.tick(as_int(event.get("time")))
        run = self.sql.run_of(execution)
        error = as_str(event.get("errorMessage"))
        if not error:
            self._life.last = Failure("ok", "")
            self.finish(run, end, "COMPLETE", None, out)
            return
        message = task_error(error)
        inside = error if message != error else None  # Spark 3.5: the stack is in the text
        last = Failure(classify(error), message, run.failure.stack if run.failure else inside)
        if run.query is None:  # a micro-batch's failure ends its query, not the program
            self._life.last = last
        self.finish(run, end, terminal_state(last), last, out)

    def _wanted(self, run: Run) -> bool:
        return steps.wanted(run, emit_read_only_runs=self.options.emit_read_only_runs)

    def _start(self, run: Run, out: list[Event]) -> None:
        """Name the run (`steps.step_name`; a micro-batch has its query's name), START it."""
        assert self._life.app is not None
        if run.query is None:  # a micro-batch is named after its query (`Queries.link`)
            named = steps.step_name(run, self._life.app.job_name, self._life.datasets(run))
            run.job_name = self._names.assign(*named)
        self._life.start(run, out)
