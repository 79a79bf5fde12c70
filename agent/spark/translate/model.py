"""The translator's model of one application: its runs, their executions and jobs, counters
and how each job or execution ended. Plain data plus pure helpers; `translate` drives it.

Outcomes of a job or execution, from Spark's failure message:
  ok         it succeeded;
  cancelled  `[SPARK_JOB_CANCELLED] Job N cancelled ...`: a user or an operator stopped it;
  shutdown   `... cancelled because SparkContext was shut down`: the application stopped;
  failed     anything else (`[DIVIDE_BY_ZERO] ...`, `Job aborted due to stage failure ...`).

Terminal state of a child run:
  COMPLETE  the execution / job succeeded;
  FAIL      it failed (`errorMessage`: Spark's message and the failed job's stack trace);
  ABORT     its jobs were cancelled (`[SPARK_JOB_CANCELLED]`, "cancelled because SparkContext
            was shut down"), it was still running when the application ended, or it ended
            unsuccessfully after `request_stop`.

Counters (`lineageAgent_run`): records and bytes read and written from StageCompleted task
metrics, `failedTasks` from TaskEnd with a failure reason (killed attempts, e.g. speculation
or cancellation, are not failures); per dataset, `inputStatistics` / `outputStatistics` from
the plan nodes' SQL metrics, on terminal events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from agent import linear
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.touched.lineage import Resolved
from agent.spark.translate.naming import DatasetName
from agent.spark.translate.values import as_int, as_number, as_str

Outcome = Literal["ok", "failed", "cancelled", "shutdown"]

_CANCELLED: Final = linear.compile(r"^(?:\[SPARK_JOB_CANCELLED\] )?Job \d+ cancelled")
_SHUTDOWN: Final = "cancelled because SparkContext was shut down"
#: Spark 3.5 reports a task's failure as the job's abort text, the executor's stack trace
#: inside; Spark 4 reports the task's error itself (`[DIVIDE_BY_ZERO] ...`).
_LOST_TASK: Final = linear.compile(
    r"^(?:[A-Za-z0-9_.$]+: )?Job aborted due to stage failure: "
    r"Task [^ ]+ in stage [^ ]+ failed [0-9]+ times, "
    r"most recent failure: Lost task [^ ]+ in stage [^ ]+ \(TID [0-9]+\) \([^()]*\): "
)
#: The Java class that prints before a Spark error's message: `org.apache...Exception: [`.
_THROWABLE: Final = linear.compile(r"^[A-Za-z0-9_.$]+: \[")
REMEMBERED: Final = 8192  # ended executions and seen jobs kept to refuse duplicates
_COUNTER_METRICS: Final = {
    "internal.metrics.input.recordsRead": "records_in",
    "internal.metrics.input.bytesRead": "bytes_in",
    "internal.metrics.output.recordsWritten": "records_out",
    "internal.metrics.output.bytesWritten": "bytes_out",
}
_SHUTDOWN_CHILD: Final = (
    "the application ended with jobs still running: Spark cancels them because SparkContext "
    "was shut down"
)


@dataclass(slots=True)
class Counters:
    """A run's counters (`lineageAgent_run`): live on its `Run`, a copy in its summary."""

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
    job_type: str  # APPLICATION | SQL_JOB | RDD_JOB | STREAMING_QUERY
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
    exec_id: str | None = None  # the `lineage-agent exec` run that started it
    awaiting_verdict: bool = False  # its end waits for that command's verdict


@dataclass(slots=True)
class Failure:
    outcome: Outcome
    message: str
    stack: str | None = None


@dataclass(slots=True)
class Execution:
    """One SQL execution; nested ones (CTAS and its insert) share their root's run."""

    exec_id: int
    root: int
    command: str | None = None  # the plan node that names it
    writes: bool = False
    # AQE re-plans keep an execution's datasets but renumber their metrics: latest wins
    refs: dict[tuple[object, ...], DatasetRef] = field(default_factory=dict)
    values: dict[int, int] = field(default_factory=dict)  # accumulator id -> value
    notes: set[str] = field(default_factory=set)
    #: attributes a Delta MERGE of its run assigns from, resolved in this execution's plan
    attributes: dict[int, Resolved] = field(default_factory=dict)
    #: a Delta MERGE's "materialize source" execution: the source rows its root returns
    source_rows: tuple[int, ...] = ()
    #: and the dataset fields that decide which of those rows exist (filters, joins, windows)
    source_filters: Resolved = ()
    #: the attributes of the scans of that materialized source in this execution's plans
    source_scans: set[tuple[int, ...]] = field(default_factory=set)
    #: Delta table location -> the snapshot version this (nested) execution computed
    snapshots: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CatalogTable:
    """A table a streaming sink or micro-batch scan names by catalog identifier: the
    reference to name it by (its location when the catalog's configuration tells it) and
    the namespace of its `symlinks` entry."""

    ref: DatasetRef
    symlink_namespace: str
    symlink_name: str  # `namespace.table`, as the integration names catalog tables


@dataclass(slots=True)
class StreamQuery:
    """What a streaming query run knows of its query: from QueryStarted, the latest progress
    event and its micro-batches' plans (`streaming` reads them)."""

    query_id: str  # stable across restarts from the same checkpoint
    spark_run_id: str  # Spark's `runId`: new at every start
    name: str | None
    batch_id: int | None = None  # the last completed micro-batch
    batches: int = 0  # progress events seen
    input_rows: int = 0  # summed over every progress event
    output_rows: int | None = None  # summed where the sink knows them (not -1)
    source_rows: dict[str, int] = field(default_factory=dict)  # description -> rows, summed
    input_rows_per_second: float | None = None  # of the last progress event
    processed_rows_per_second: float | None = None
    sources: tuple[Mapping[str, Any], ...] = ()  # the last progress event's sources
    sink: str | None = None  # the sink's description
    error_class: str | None = None
    # datasets the descriptions name: (role, description) -> reference or a Kafka topic
    described: dict[tuple[str, str], tuple[DatasetRef | DatasetName | CatalogTable, ...]] = field(
        default_factory=dict
    )
    # what the micro-batch plans name, file-source scans folded into their directory
    refs: dict[tuple[object, ...], DatasetRef] = field(default_factory=dict)
    rows: DatasetRef | None = None  # what the last micro-batch's plan returned to its sink
    plan_sink: tuple[DatasetRef, ...] = ()  # the sink a micro-batch's V2 write names
    full: bool = False  # `refs` reached its bound: datasets were left out


@dataclass(slots=True)
class Run:
    """One OpenLineage run: the application, a SQL execution group, an RDD job or a
    streaming query."""

    kind: str  # application | sql | rdd | stream
    run_id: str
    job_type: str
    start_ms: int
    job_name: str = ""
    tally: Counters = field(default_factory=Counters)
    started: bool = False
    state: str = "RUNNING"
    end_ms: int | None = None
    error: str | None = None
    last_emit_ms: int = 0
    inputs: tuple[DatasetName, ...] = ()
    outputs: tuple[DatasetName, ...] = ()
    executions: list[Execution] = field(default_factory=list)  # sql: root first, then nested
    key: int = -1  # sql: root execution id; rdd: job id
    paths: tuple[str, ...] = ()  # rdd: the input paths
    output_paths: tuple[str, ...] = ()  # rdd: the path a save writes, as the program named it
    failure: Failure | None = None  # sql: its last failed job, for the stack trace
    action: str | None = None  # sql: the action that ran it (`count`), see `steps`
    site: str = ""  # sql: the API call that started it, see `steps.site`
    sql: str | None = None  # sql: the statement, when a SQL shell ran it
    stream: StreamQuery | None = None  # stream: its query
    query: Run | None = None  # sql: the streaming query run whose micro-batch this is
    kafka_servers: str | None = None  # the servers of its Kafka reads, known at its START


@dataclass(slots=True)
class Job:
    job_id: int
    execution: int | None
    stages: list[int]
    run: Run | None = None  # an RDD job with file inputs
    batch: bool = False  # a streaming query's job: its failure is the query's, not the program's


def summary(run: Run) -> RunSummary:
    return RunSummary(
        run_id=run.run_id,
        job_name=run.job_name,
        job_type=run.job_type,
        state=run.state,
        start_ms=run.start_ms,
        end_ms=run.end_ms,
        inputs=run.inputs,
        outputs=run.outputs,
        counters=replace(run.tally),
        error=run.error,
    )


def classify(message: str) -> Outcome:
    """The outcome a failure message of a job or execution stands for (module docstring)."""
    if _SHUTDOWN in message:
        return "shutdown"
    return "cancelled" if _CANCELLED.match(message) else "failed"


def terminal_state(failure: Failure | None) -> str:
    """COMPLETE on success, FAIL on a failure, ABORT on a cancellation or shutdown."""
    if failure is None or failure.outcome == "ok":
        return "COMPLETE"
    return "FAIL" if failure.outcome == "failed" else "ABORT"


def task_error(message: str) -> str:
    """Spark's failure message as Spark 4 words it: of a task failure that Spark 3.5 wrapped
    in `[<exception class>: ]Job aborted due to stage failure: ... Lost task ... (TID n)
    (host executor id): `, the task's exception without its stack trace, and without its Java
    class when it is a Spark error whose message starts with its error class; any other
    message unchanged."""
    wrapped = _LOST_TASK.match(message)
    if wrapped is None:
        return message
    cause = message[wrapped.end() :].split("\n\tat ", 1)[0].rstrip()
    throwable = _THROWABLE.match(cause)
    if throwable is not None:
        cause = cause[throwable.end() - 1 :]
    return cause or message


def job_failure(result: object) -> Failure | None:
    """None for JobSucceeded, else the failure with a Java-style stack trace."""
    if not isinstance(result, Mapping) or result.get("Result") != "JobFailed":
        return None
    exception = result.get("Exception")
    exception = exception if isinstance(exception, Mapping) else {}
    message = as_str(exception.get("Message")) or "job failed"
    frames = exception.get("Stack Trace")
    lines = [message]
    if isinstance(frames, Sequence) and not isinstance(frames, str):
        lines += [
            f"\tat {f.get('Declaring Class')}.{f.get('Method Name')}"
            f"({f.get('File Name')}:{f.get('Line Number')})"
            for f in frames
            if isinstance(f, Mapping)
        ]
    told = task_error(message)
    stack = "\n".join(lines) if len(lines) > 1 or told != message else None
    return Failure(classify(message), told, stack)


def application_end(
    exit_code: int | None, in_flight: bool, last: Failure | None
) -> tuple[str, Failure | None]:
    """The application's terminal state at ApplicationEnd, first rule that applies:

    1. FAIL      ApplicationEnd carries a non-zero ExitCode (PySpark never writes one: a
                 Python driver's exit status is not in the log, see docs/how-it-works/runs.md);
    2. ABORT     work was in flight at ApplicationEnd: Spark cancels it right after, "because
                 SparkContext was shut down" (SIGTERM, spark.stop() from another thread);
    3. FAIL      `last`, the last job or SQL execution to finish, failed; one cancelled by a
                 user or an operator does not count as a failure;
    4. COMPLETE  otherwise.
    A stop requested from outside (`job stop`) overrides all of these with ABORT: the
    translator applies it.
    """
    if exit_code:
        message = f"Spark application exited with code {exit_code}"
        if last is not None and last.outcome == "failed":
            message = f"{message}: {last.message}"
        return "FAIL", Failure("failed", message, last.stack if last else None)
    if in_flight or (last is not None and last.outcome == "shutdown"):
        return "ABORT", Failure("shutdown", _SHUTDOWN_CHILD)
    if last is not None and last.outcome == "failed":
        return "FAIL", last
    return "COMPLETE", None


def count_stage(
    accumulables: Sequence[Mapping[str, Any]],
    tallies: Sequence[Counters],
    execution: Execution | None,
) -> None:
    """Add a completed stage's task metrics to `tallies`, and record the SQL metrics of the
    execution's dataset nodes (the values of `inputStatistics` / `outputStatistics`)."""
    metric_ids: set[int] = set()
    if execution is not None:
        metric_ids = {a for r in execution.refs.values() for a in r.metrics.values()}
    for acc in accumulables:
        value = as_number(acc.get("Value"))
        if value is None:
            continue
        name = acc.get("Name")
        counter = _COUNTER_METRICS.get(name) if isinstance(name, str) else None
        acc_id = as_int(acc.get("ID"))
        if counter is not None:
            for tally in tallies:
                setattr(tally, counter, getattr(tally, counter) + value)
        elif execution is not None and acc_id in metric_ids:
            # a SQL metric's value here is its running total over all stages so far
            execution.values[acc_id] = max(value, execution.values.get(acc_id, 0))


def remember(ids: set[int], new: int) -> None:
    """Remember an id to refuse its duplicates; only the most recent ids are kept, so a
    streaming application running for months does not grow the set without bound."""
    ids.add(new)
    if len(ids) > REMEMBERED:
        for old in sorted(ids)[: REMEMBERED // 2]:
            ids.discard(old)
