"""Which top-level SQL executions are steps of the user's program, and what each one is. Pure.

Every `SparkListenerSQLExecutionStart` carries `details`, the JVM call site of the API call
that started the execution (its first line is the Spark method the program called, e.g.
`org.apache.spark.sql.classic.DataFrameReader.csv(DataFrameReader.scala:266)`), and
`description`, that call site's short form or the job description the program set.

Spark-internal executions (`internal`): executions started by a *reader* method
(`DataFrameReader.csv/json/parquet/load/table/...`, `DataStreamReader.*`). A reader only
returns a DataFrame: it never runs the program's work, so whatever it executes is Spark's
own, measured on real PySpark 4.x logs (tests/test_steps.py):

* CSV with `header` and/or `inferSchema` (and CSV without either: Spark still reads the
  first line to count the columns): two executions, `CollectLimit` over `Scan text` (the
  first line) and `DeserializeToObject` over `Scan text` (the inference pass; with
  `inferSchema` it also runs a job outside any execution, through `SQLExecutionRDD`);
* JSON without a schema: one Spark job outside any SQL execution (no run: it reads through
  `SQLExecutionRDD`, which is no file RDD);
* parquet footers and `mergeSchema`: Spark jobs over a `ParallelCollectionRDD` of the file
  list, outside any SQL execution (no run either);
* format-internal reads at `load()` (a Delta log read) likewise carry the reader's call site.

Only top-level executions are judged: a nested execution (same `rootExecutionId` as a user
statement) stays inside its statement's run whatever its call site.

Read-only actions (`action`): a top-level execution started by one of the `Dataset` actions
that hand rows back to the program (`count`, `collect`, `show`, `toPandas`, `take`, ...;
`_ACTIONS`), read from `details` (`collectToPython` -> `collect`, `showString` -> `show`,
`collectAsArrowToPython` -> `to_pandas`). A run is read-only when its root execution is
such an action and it writes nothing; statements (`spark.sql("UPDATE ...")`, Delta's
`DeltaTable.update`) and writers are never read-only, whether or not their writes are
understood.

SQL text (`sql_text`): Spark puts the statement itself into `description` only where a SQL
shell runs it: the `spark-sql` CLI (`SparkSQLCLIDriver`) and the Thrift server
(`SparkExecuteStatementOperation`, what beeline and JDBC clients reach). `spark.sql(...)`
from a program logs no query text (its description is `sql at <file>:<line>`), so its runs
carry no `sql` facet.

Job names (`step_name`): a run is named after the first execution that writes (else its
root) and that execution's first output, a read-only run after its action and its first
input; the step it is, for `naming.JobNames`, is the command, the API call that ran it and
its datasets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agent import linear
from agent.spark.plan.touched import read as plans
from agent.spark.translate.datasets.rundatasets import RunDatasets
from agent.spark.translate.model import Run
from agent.spark.translate.naming import Step, job_name

#: `details`' first line: the Spark API method the program called.
_FRAME: Final = linear.compile(
    rf"^[{linear.SPACE}]*(?:at[{linear.SPACE}]+)?org\.apache\.spark\.sql\.(?:classic\.)?"
    rf"(?P<cls>[{linear.WORD}]+)\.(?P<method>[{linear.WORD}]+)\("
)
_READERS: Final = frozenset({"DataFrameReader", "DataStreamReader"})
_SQL_SHELLS: Final = (
    "org.apache.spark.sql.hive.thriftserver.SparkSQLCLIDriver",
    "org.apache.spark.sql.hive.thriftserver.SparkSQLDriver",
    "org.apache.spark.sql.hive.thriftserver.SparkExecuteStatementOperation",
)
#: Dataset methods behind the actions a program calls, by the name a user knows them by.
_ACTIONS: Final = {
    "collectToPython": "collect",
    "collectAsList": "collect",
    "collect": "collect",
    "executeCollect": "collect",
    "collectAsArrowToPython": "to_pandas",
    "collectAsArrowToR": "collect",
    "toPythonIterator": "to_local_iterator",
    "toLocalIterator": "to_local_iterator",
    "showString": "show",
    "count": "count",
    "head": "take",
    "take": "take",
    "takeAsList": "take",
    "first": "take",
    "tail": "tail",
    "tailToPython": "tail",
    "isEmpty": "is_empty",
    "foreach": "foreach",
    "foreachPartition": "foreach",
    "reduce": "reduce",
}


def _frame(event: Mapping[str, Any]) -> tuple[str, str] | None:
    details = event.get("details")
    if not isinstance(details, str):
        return None
    match = _FRAME.match(details.split("\n", 1)[0])
    return (match["cls"], match["method"]) if match else None


def site(event: Mapping[str, Any]) -> str:
    """The Spark API call that started an execution (`SparkSession.sql`,
    `DataFrameWriterV2.append`), or "" when the call site names none: two statements of a
    program that run the same command on the same datasets through different calls are
    different steps."""
    frame = _frame(event)
    return f"{frame[0]}.{frame[1]}" if frame else ""


def internal(event: Mapping[str, Any]) -> bool:
    """Whether a SQLExecutionStart is Spark's own work for a reader (module docstring)."""
    frame = _frame(event)
    return frame is not None and frame[0] in _READERS


def reader(event: Mapping[str, Any]) -> str | None:
    """The `DataFrameReader` method (`csv`) behind an execution of Spark's own for a reader
    (its schema inference), else None."""
    frame = _frame(event)
    return frame[1] if frame is not None and frame[0] == "DataFrameReader" else None


def action(event: Mapping[str, Any]) -> str | None:
    """The action (`count`, `collect`, `show`, ...) a SQLExecutionStart ran, if a Dataset
    method started it."""
    frame = _frame(event)
    if frame is None or frame[0] != "Dataset":
        return None
    return _ACTIONS.get(frame[1])


def sql_text(event: Mapping[str, Any]) -> str | None:
    """The SQL statement of an execution a SQL shell ran (module docstring), else None."""
    details = event.get("details")
    description = event.get("description")
    if not isinstance(details, str) or not isinstance(description, str):
        return None
    first = details.split("\n", 1)[0].strip().removeprefix("at ")
    if not first.startswith(_SQL_SHELLS) or not description.strip():
        return None
    return description.strip()


def read_only(run: Run) -> bool:
    """A run of an action (`count`, `show`: see `action`) that reads datasets and writes
    none; one that names no dataset is an empty execution (`emit_empty_executions`)."""
    named = any(e.refs for e in run.executions)
    return (
        run.action is not None
        and named
        and not any(e.writes or any(r.feeds_write for r in e.refs.values()) for e in run.executions)
    )


def step_name(run: Run, app_job: str, datasets: RunDatasets) -> tuple[str, Step]:
    """A SQL run's plain job name and the step it is (module docstring)."""
    if run.action is not None and read_only(run):
        writer = run.executions[0]
        command = run.action
        suffix = datasets.first_input_suffix
    else:
        writer = next((e for e in run.executions if e.writes), run.executions[0])
        command = plans.command_name(writer.command) or "sql_execution"
        suffix = datasets.first_output_suffix
    ins, outs = frozenset(datasets.inputs), frozenset(datasets.outputs)
    return job_name(app_job, command, suffix), (writer.command or "", run.site, ins, outs)


def mark(run: Run, event: Mapping[str, Any], *, root: bool) -> None:
    """What an execution's SQLExecutionStart tells of its run's step: the statement a SQL
    shell ran and, from the root execution, the action and the API call that started it."""
    run.sql = run.sql or sql_text(event)
    if root:
        run.action = action(event)
        run.site = site(event)


def wanted(run: Run, *, emit_read_only_runs: bool) -> bool:
    """Whether a run that names datasets is emitted: a read-only one only when asked."""
    return emit_read_only_runs or not read_only(run)
