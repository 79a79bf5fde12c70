"""The harness's own table of known differences between the agent and the listener.

Every `Difference` the comparison finds is matched against `CLASSES` in order; the first
class whose aspect and rule match explains it. Each class carries a verdict, judged by the
OpenLineage spec (2-0-2 and its facets), the naming doc (spec/Naming.md upstream) and what
the job did:

* `agent_right`: the listener is wrong or incomplete here;
* `listener_right`: the agent is wrong: an agent defect, counted until it is fixed;
* `both_wrong`: neither is right: an agent defect too;
* `both_valid`: the spec allows both; a choice;
* `by_design`: a documented choice of the agent (README) that the listener does not share.

A difference no class explains is unexplained; the summary counts it, and it is the
harness's signal that something new happened. `fix` says what the agent should change for
the classes where it is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tests.peer.compare import TERMINAL, Difference

Verdict = Literal["agent_right", "listener_right", "both_wrong", "both_valid", "by_design"]
DEFECTS: tuple[Verdict, ...] = ("listener_right", "both_wrong")
Context = Mapping[str, Mapping[str, Any]]  # shape -> its manifest record (app id, error)
Rule = Callable[[Difference, Context], bool]


@dataclass(frozen=True)
class Class:
    """A known kind of difference: which aspects, which rule, who is right and why."""

    id: str
    aspects: tuple[str, ...]
    rule: Rule
    verdict: Verdict
    why: str
    fix: str = ""


def _without_running(counts: Any) -> dict[str, int]:
    return {k: v for k, v in (counts or {}).items() if k != "RUNNING"}


def _raised(d: Difference, ctx: Context) -> bool:
    return bool(ctx.get(d.shape, {}).get("error"))


def _edges(side: Any) -> list[list[str]]:
    return list(side.get("sample", [])) if isinstance(side, dict) else []


def _only(side: Any) -> int:
    if not isinstance(side, dict):
        return 0
    count = side.get("only_agent", side.get("only_listener", 0))
    return int(count) if isinstance(count, int) else 0


def _names(side: Any) -> list[str]:
    return [str(x) for x in side] if isinstance(side, list) else []


def _fields_subset(d: Difference) -> bool:
    """The agent's schema has no field the listener's lacks: the listener has more."""
    return not d.agent and bool(d.listener)


def _last_part(job: Any) -> str:
    return str(job).rsplit(".", 1)[0]


CLASSES: tuple[Class, ...] = (
    # -- events and runs -----------------------------------------------------------------
    Class(
        "running_events",
        ("event_count", "app_event_count"),
        lambda d, _: _without_running(d.agent) == _without_running(d.listener),
        "both_valid",
        "The listener adds RUNNING events at Spark job boundaries; the agent emits one START "
        "and one terminal event per run (RUNNING only with spark.running_interval). The run "
        "cycle allows both.",
    ),
    Class(
        "terminal_counted",
        ("event_count", "app_event_count"),
        lambda d, _: (
            set(_without_running(d.agent)) - {"START"}
            != set(_without_running(d.listener)) - {"START"}
            and sum(_without_running(d.agent).values())
            == sum(_without_running(d.listener).values())
        ),
        "both_valid",
        "Same number of START and terminal events; only the terminal state differs, which "
        "the `terminal` / `app_terminal` difference of the same run judges.",
    ),
    Class(
        "listener_no_start",
        ("event_count",),
        lambda d, _: "START" not in (d.listener or {}) and "START" in (d.agent or {}),
        "agent_right",
        "The listener's run has a COMPLETE event and no START (its START was never written "
        "for this execution): a run seen only at its end.",
    ),
    Class(
        "listener_two_terminals",
        ("event_count",),
        lambda d, _: sum(n for k, n in (d.listener or {}).items() if k in TERMINAL) > 1,
        "agent_right",
        "The listener ends the failed or cancelled run twice: FAIL, then COMPLETE. The run "
        "cycle has one terminal event per run; the agent emits FAIL (ABORT when cancelled).",
    ),
    Class(
        "listener_run_never_ends",
        ("event_count", "terminal"),
        lambda d, _: (
            d.listener is None
            or (isinstance(d.listener, dict) and not any(k in TERMINAL for k in d.listener))
        ),
        "agent_right",
        "The listener's run has a START and no terminal event (an RDD action whose run it "
        "never closes); the agent ends it COMPLETE.",
    ),
    Class(
        "listener_internal_job",
        ("run_only_listener",),
        lambda d, _: d.listener["terminal"] is None and not d.listener["outputs"],
        "agent_right",
        "A Spark-internal job (parquet footer reading, file listing, CSV/JSON schema "
        "inference: `map_partitions_parallel_collection`, `..._file_scan`) reported as a run "
        "that has a START and never ends. Nothing the user asked for; the agent emits nothing.",
    ),
    Class(
        "listener_nested_run",
        ("run_only_listener",),
        lambda d, _: bool(d.listener.get("nested_in")),
        "by_design",
        "A nested execution (the insert a CTAS or saveAsTable runs, the query a JDBC write "
        "runs): the listener emits it as a run of its own; the agent folds it into the root "
        "execution's run, whose datasets cover it (README: nested executions are one run).",
    ),
    Class(
        "listener_empty_run",
        ("run_only_listener",),
        lambda d, _: not d.listener["inputs"] and not d.listener["outputs"],
        "by_design",
        "An execution without datasets (`execute_save_as_v1_table_command`, the "
        "`deserialize_to_object` of a JDBC write): the agent emits nothing for it unless "
        "spark.emit_empty_executions.",
    ),
    Class(
        "rdd_save_output",
        ("run_only_listener",),
        lambda d, _: d.shape == "rdd" and bool(d.listener["outputs"]),
        "listener_right",
        "An RDD saveAsTextFile: the listener sees the output path in the JVM; the event log "
        "does not carry it, so the agent reports no run for the save (documented limit).",
        "Accept a path hint the job can set without a jar (the job description or a job "
        "group id carrying `path=`), and say in the README that without it RDD outputs are "
        "lost; nothing in the log itself names the path.",
    ),
    Class(
        "read_only_action",
        ("run_only_agent",),
        lambda d, _: bool(d.agent["inputs"]) and not d.agent["outputs"],
        "by_design",
        "A read-only action (count of a cached frame): the agent emits a run for an "
        "execution that reads a dataset and writes none; the listener emits nothing for it.",
    ),
    # -- job names -------------------------------------------------------------------------
    Class(
        "listener_adaptive_name",
        ("job_name",),
        lambda d, _: ".adaptive_spark_plan." in str(d.listener),
        "agent_right",
        "The listener names the job after the physical root node when adaptive execution "
        "wraps the plan (`adaptive_spark_plan`), so the same step changes name with AQE; the "
        "agent names it by the command that writes (`execute_insert_into_...`).",
    ),
    Class(
        "output_part_of_name",
        ("job_name",),
        lambda d, _: _last_part(d.agent) == _last_part(d.listener),
        "both_valid",
        "Same command; the output part differs: the agent uses the catalog identifier "
        "(`default_sales`, `lineage_public_orders`), the listener the location's last two "
        "path segments or the table without its database. Job names are free-form.",
    ),
    Class(
        "listener_unknown_app",
        ("app_job_name",),
        lambda d, _: d.listener == "unknown",
        "agent_right",
        "The listener's application START is sometimes named `unknown` and lacks "
        "spark_applicationDetails (a race at start; different applications from run to run), "
        "its COMPLETE then carries the real name: one run under two job names. The agent "
        "uses spark.app.name in both.",
    ),
    # -- terminal states -------------------------------------------------------------------
    Class(
        "listener_misses_failure",
        ("terminal",),
        lambda d, ctx: (
            _raised(d, ctx) and d.agent in ("FAIL", "ABORT") and d.listener == "COMPLETE"
        ),
        "agent_right",
        "The query failed (the job raised: DIVIDE_BY_ZERO, a Python UDF error) or its job "
        "group was cancelled; the listener's last event for the run is COMPLETE (after a "
        "FAIL), the agent ends it FAIL with errorMessage (ABORT for the cancellation).",
    ),
    Class(
        "cancel_abort_or_fail",
        ("terminal",),
        lambda d, ctx: _raised(d, ctx) and d.agent == "ABORT" and d.listener == "FAIL",
        "both_valid",
        "A cancelled job group: the agent ends the run ABORT, the listener FAIL (in other "
        "runs of the same shape COMPLETE, see listener_misses_failure). The run was stopped, "
        "not failed by its own error; the run cycle's ABORT and FAIL both describe that.",
    ),
    Class(
        "caught_failure_app",
        ("app_terminal",),
        lambda d, ctx: _raised(d, ctx) and d.agent == "FAIL" and d.listener == "COMPLETE",
        "both_valid",
        "The program caught the failing query's exception and stopped Spark normally. The "
        "agent's rule 4 (the last execution failed) ends the application FAIL; the listener "
        "COMPLETE. Neither sees the Python side; `lineage-agent exec` settles it.",
    ),
    # -- datasets --------------------------------------------------------------------------
    Class(
        "jdbc_url_not_in_log",
        ("inputs", "outputs"),
        lambda d, _: (
            any(n.startswith("unknown:") for n in _names(d.agent))
            and any(n.startswith("postgres://") for n in _names(d.listener))
        ),
        "listener_right",
        "A JDBC read (the plan shows only `JDBCRelation(table)`) or a write under Spark's "
        "default redaction of `url`: the agent names the dataset `unknown:schema.table`, the "
        "listener `postgres://host:port` + `database.schema.table` as the naming doc asks.",
        "For reads, take the url from the JDBC write or read of the same table whose url the "
        "log shows (same application), else from `spark.sql.catalog.<name>.url` or the "
        "`url` option in the SQLExecutionStart `modifiedConfigs`; keep `unknown` only when "
        "no event names it.",
    ),
    Class(
        "listener_derby_path",
        ("inputs", "outputs"),
        lambda d, _: (
            any("metastore_db" in n for n in _names(d.listener))
            and not any(n.startswith("unknown:") for n in _names(d.agent))
        ),
        "agent_right",
        "A JDBC write to in-memory Derby (`jdbc:derby:memory:peer`; Naming.md has no Derby "
        "entry, but a name must identify the datasource): the agent names it "
        "`derby:memory:peer`, the listener by a file path that does not exist (the working "
        "directory's `metastore_db`).",
    ),
    Class(
        "derby_in_memory_naming",
        ("inputs", "outputs"),
        lambda d, _: any("metastore_db" in n for n in _names(d.listener)),
        "both_wrong",
        "A JDBC read of in-memory Derby and a write through the V2 JDBC catalog: the agent "
        "names them `unknown:APP.PEOPLE`, the listener by the nonexistent `metastore_db` path "
        "of the working directory.",
        "Resolve a V2 JDBC catalog's url from `spark.sql.catalog.<catalog>.url` in the "
        "environment update; name reads as for jdbc_url_not_in_log.",
    ),
    Class(
        "subquery_inputs",
        ("inputs",),
        lambda d, _: bool(_names(d.agent)) and not _names(d.listener),
        "agent_right",
        "Scalar subqueries read two more datasets (orders, people_b); the agent reports them "
        "as inputs, the listener leaves them out.",
    ),
    Class(
        "rdd_file_or_directory",
        ("inputs",),
        lambda d, _: d.shape == "rdd",
        "both_valid",
        "sc.textFile of one file: the agent names the file read, the listener its directory. "
        "The naming doc allows a file or a directory path as the name.",
    ),
    # -- schemas ---------------------------------------------------------------------------
    Class(
        "pruned_input_schema",
        ("schema_fields",),
        lambda d, _: d.role == "inputs" and _fields_subset(d),
        "listener_right",
        "The agent's input schema lists only the columns the scan read (Spark's pruned "
        "`ReadSchema` in the plan); the listener lists the dataset's whole schema, which is "
        "what the schema facet describes.",
        "For file scans, read the full schema from the source (parquet/ORC footer, CSV header "
        "with the inferred types in the plan's `Relation [...]`), or for catalog tables from "
        "the table's schema in the plan; when only the pruned schema is known, mark it (a "
        "`lineageAgent_` facet) instead of presenting it as the dataset's schema.",
    ),
    Class(
        "hive_scan_untyped",
        ("schema_types",),
        lambda d, _: d.shape == "hive" and all(t == "" for _, t in d.agent),
        "listener_right",
        "A Hive table scan prints its attributes without types (`HiveTableRelation [..., "
        "Data Cols: [id#9L, s#10]]`: only `L` marks a long), so the agent leaves `type` out "
        "for the string column `s` of the scanned table and of the parquet copy made from "
        "it; the listener, which asks the catalog, says `string`. Written Hive columns are "
        "typed from the query (a bare literal `x AS s#8` is a string).",
        "Remember per application the schema of the tables its executions wrote (the CTAS "
        "typed `s` string) and type later scans of the same table from it: no event of the "
        "log carries a Hive table's column types otherwise.",
    ),
    # -- column lineage --------------------------------------------------------------------
    Class(
        "jdbc_columns",
        ("columns_direct", "columns_indirect"),
        lambda d, _: any(e[1] == "unknown" for e in _edges(d.agent)),
        "listener_right",
        "Column lineage from a JDBC read follows its dataset name (`unknown` in the agent). "
        "The filter pushed into the PostgreSQL scan (`*GreaterThan(amount,30)`, no Filter node "
        "left) is a dataset-level input in both: INDIRECT FILTER in the agent, DIRECT IDENTITY "
        "in the listener. "
        "For Derby the agent's TRANSFORMATION (lower) is right where the listener says "
        "IDENTITY.",
        "Name JDBC reads (see jdbc_url_not_in_log).",
    ),
    Class(
        "partition_sort",
        ("columns_indirect",),
        lambda d, _: _only(d.agent) == 0 and all(e[5] == "SORT" for e in _edges(d.listener)),
        "both_valid",
        "partitionBy: Spark's writer sorts by the partition column; the listener reports that "
        "sort as INDIRECT SORT, the agent does not (the user asked for no sort).",
    ),
    Class(
        "listener_misses_expand",
        ("columns_direct", "columns_indirect"),
        lambda d, _: d.shape == "rollup" and _only(d.listener) == 0,
        "agent_right",
        "rollup: the output's city and age are the input's (IDENTITY) and group the rows "
        "(GROUP_BY); the listener loses both through Spark's Expand node.",
    ),
    Class(
        "listener_misses_subqueries",
        ("columns_direct", "columns_indirect"),
        lambda d, _: d.shape == "scalar_subquery" and _only(d.listener) == 0,
        "agent_right",
        "Scalar subqueries: `above` depends on orders.amount (AGGREGATION) and the rows on "
        "people_b.age (FILTER); the listener reports neither.",
    ),
    Class(
        "inferred_join_filters",
        ("columns_indirect",),
        lambda d, _: _only(d.listener) == 0 and all(e[5] == "FILTER" for e in _edges(d.agent)),
        "both_valid",
        "The optimizer adds isnotnull filters on inner-join keys; the agent reports them as "
        "INDIRECT FILTER. The listener does the same in its nested insert run but not in the "
        "CTAS run it pairs with here.",
    ),
    Class(
        "udf_lineage",
        ("columns_direct",),
        lambda d, _: d.shape == "udf_failure" and _only(d.listener) == 0,
        "agent_right",
        "A Python UDF over `id`: the agent reports id <- id TRANSFORMATION; the listener has "
        "no column lineage through the UDF.",
    ),
    Class(
        "plan_string_cut",
        ("columns_direct",),
        lambda d, _: d.shape == "wide" and d.dataset.endswith("wide_hash"),
        "listener_right",
        "A row hash over 500 columns: Spark cuts the expression in the plan text "
        "(spark.sql.debug.maxToStringFields), so the agent sees 24 of the 500 inputs and "
        "says so in `lineageAgent_truncation`; the listener has all 500.",
        "When an expression is cut (`... N more fields`), fall back to every column of the "
        "child's output as DIRECT inputs and mark them in the truncation facet as inferred.",
    ),
    Class(
        "column_cap",
        ("columns_direct", "columns_indirect"),
        lambda d, _: d.shape == "wide" and d.dataset.endswith("wide_mix"),
        "by_design",
        "2,000 input-field entries: the agent keeps at most spark.column_lineage_max_fields "
        "(1,000) and records the cut in `lineageAgent_truncation`; the listener carries all "
        "(its events for this shape are 4 times larger).",
    ),
)


def classify(difference: Difference, context: Context) -> Class | None:
    """The first class that explains the difference, or None (unexplained)."""
    for known in CLASSES:
        if difference.aspect in known.aspects and known.rule(difference, context):
            return known
    return None
