"""The harness's own table of known differences between the agent and the listener.

Every `Difference` the comparison finds is matched against `CLASSES` in order; the first
class whose aspect and rule match explains it. Each class carries a verdict, judged by the
OpenLineage spec (2-0-2 and its facets), the naming doc (spec/Naming.md upstream) and what
the job did:

* `agent_right`: the listener is wrong or incomplete here;
* `listener_right`: the agent is wrong: an agent defect, counted until it is fixed;
* `both_wrong`: neither is right: an agent defect too;
* `both_valid`: the spec allows both; a choice;
* `by_design`: a documented choice of the agent (docs) that the listener does not share.

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


def _kafka_located(d: Difference) -> bool:
    """The agent names datasets, every one a Kafka topic on known servers."""
    names = _names(d.agent)
    return bool(names) and all(
        n.startswith("kafka://") and not n.startswith("kafka://unknown:") for n in names
    )


def _merge_relabelled(d: Difference, listener: tuple[str, str], agent: tuple[str, str]) -> bool:
    """A MERGE whose listener edges are all of kind `listener`: the agent has each of them,
    as kind `agent`."""
    edges = [tuple(e) for e in _edges(d.listener)]
    return (
        "merge_into_command" in d.listener_job
        and all(e[4:] == listener for e in edges)
        and {(*e[:4], *agent) for e in edges} <= {tuple(e) for e in _edges(d.agent)}
    )


def _fields_subset(d: Difference) -> bool:
    """The agent's schema has no field the listener's lacks: the listener has more."""
    return not d.agent and bool(d.listener)


def _last_part(job: Any) -> str:
    return str(job).rsplit(".", 1)[0]


def _types(side: Any) -> list[tuple[str, str]]:
    return [(str(f[0]), str(f[1])) for f in side] if isinstance(side, list) else []


# Iceberg's copy-on-write scans read these metadata columns to rewrite files; no table has them.
ICEBERG_METADATA = frozenset({"_file", "_pos"})
LAKE_SHAPES = frozenset(
    {"delta_path", "delta_catalog", "iceberg_hadoop", "iceberg_jdbc", "kafka_batch"}
)


def _untyped(d: Difference) -> bool:
    """The agent's fields all lack a type and name no column the listener's lack."""
    agent, listener = _types(d.agent), _types(d.listener)
    names = {n for n, _ in listener} - ICEBERG_METADATA
    return (
        bool(agent)
        and all(t == "" for _, t in agent)
        and {n for n, _ in agent} <= names
        and all(t != "" for _, t in listener)
    )


def _streaming(d: Difference) -> bool:
    return d.shape.startswith("stream_")


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
        "listener_schema_inference_run",
        ("run_only_listener",),
        lambda d, _: (
            str(d.listener["job"]).endswith((".collect_limit", ".deserialize_to_object"))
            and not d.listener["outputs"]
            and bool(d.listener["inputs"])
            and all(str(n).endswith(".csv") for n in d.listener["inputs"])
        ),
        "agent_right",
        "CSV schema inference (Spark reads the header with a `CollectLimit` and infers the "
        "types with a `DeserializeToObject`): the listener reports both as runs reading the "
        "CSV file, ended COMPLETE in some runs of the harness (never ended in others: "
        "listener_internal_job). Nothing the user asked for; the agent emits nothing.",
    ),
    Class(
        "listener_nested_run",
        ("run_only_listener",),
        lambda d, _: bool(d.listener.get("nested_in")),
        "by_design",
        "A nested execution (the insert a CTAS or saveAsTable runs, the query a JDBC write "
        "runs): the listener emits it as a run of its own; the agent folds it into the root "
        "execution's run, whose datasets cover it (docs: nested executions are one run).",
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
        "does not carry it, so the agent reported no run for the save.",
        "Done where the program names the path in the `spark.lineageAgent.output` job "
        "property (docs), as the rdd shape now does; nothing in the log names it otherwise.",
    ),
    Class(
        "stream_query_no_progress",
        ("run_only_agent",),
        lambda d, _: (
            _streaming(d) and ".streaming_query." in str(d.agent["job"]) and not d.agent["outputs"]
        ),
        "by_design",
        "A streaming query that failed in its first micro-batch: no progress event named its "
        "source or sink, so the agent's run names the directory of the batch's files and no "
        "output (the sink is nowhere in the log); the listener's run of the failed batch names "
        "the file itself (stream_micro_batch_run), so the two do not pair.",
    ),
    Class(
        "read_only_action",
        ("run_only_agent",),
        lambda d, _: bool(d.agent["inputs"]) and not d.agent["outputs"],
        "by_design",
        "A read-only action (count of a cached frame): the agent emits a run for an "
        "execution that reads a dataset and writes none; the listener emits nothing for it.",
    ),
    Class(
        "stream_run_per_query",
        ("run_only_agent",),
        lambda d, _: _streaming(d) and ".streaming_query." in str(d.agent["job"]),
        "by_design",
        "A Structured Streaming query: the agent emits one run per query start, from its "
        "source to its sink (docs: one run per query), ended by the query's end; the "
        "listener emits one run per micro-batch execution it reports, none of which names "
        "the query (for the JSON-files-to-parquet query it reports none at all).",
    ),
    Class(
        "stream_micro_batch_run",
        ("run_only_listener",),
        lambda d, _: _streaming(d) and bool(d.listener["inputs"]) and not d.listener["outputs"],
        "by_design",
        "A micro-batch's execution (`project` over the batch's files or Kafka offsets): the "
        "listener's run of it names the source and no sink (the file sink and foreachBatch "
        "are not outputs it sees); the agent covers every batch in the query's one run.",
    ),
    Class(
        "iceberg_ctas_append",
        ("run_only_listener",),
        lambda d, _: (
            d.shape.startswith("iceberg_")
            and ".append_data." in str(d.listener["job"])
            and bool(d.listener["outputs"])
            and not d.listener.get("nested_in")
        ),
        "by_design",
        "The `AppendData` an Iceberg CTAS / saveAsTable / writeTo().create() runs inside "
        "its `AtomicCreateTableAsSelect`: the listener emits it as a run of its own (not "
        "linked to the CTAS), the agent folds it into the CTAS run, as for listener_nested_run.",
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
        "stream_query_name",
        ("job_name",),
        lambda d, _: _streaming(d) and ".streaming_query." in str(d.agent),
        "by_design",
        "The agent's run of a streaming query is named after the query "
        "(`streaming_query.<queryName>`); it pairs with one of the listener's micro-batch "
        "runs, named after that batch's command (the foreachBatch MERGE).",
    ),
    Class(
        "iceberg_replace_data_name",
        ("job_name",),
        lambda d, _: (
            ".replace_data." in str(d.listener)
            and any(
                f".{c}." in str(d.agent)
                for c in ("merge_into_table", "update_table", "delete_from_table")
            )
        ),
        "agent_right",
        "Iceberg MERGE, UPDATE and DELETE all run as a copy-on-write `ReplaceData`: the "
        "listener names the three statements' jobs alike (`replace_data.<table>`), so their "
        "runs share one job; the agent names each by its statement.",
    ),
    Class(
        "kafka_topic_column",
        ("job_name", "outputs"),
        lambda d, _: d.shape == "kafka_batch" and "SaveIntoDataSourceCommand" in str(d.agent),
        "both_wrong",
        "A Kafka write whose topics come from a `topic` column (`CASE WHEN ... THEN "
        "'events-a' ELSE 'events-b'`): the agent names the output after the plan node "
        "(`unknown:SaveIntoDataSourceCommand`, and the job after it); the listener names no "
        "output. The servers are in the command's options; the topics are row values.",
        "Recognise `KafkaSourceProvider` with no `topic` option: name the outputs "
        "`kafka://<kafka.bootstrap.servers>` + each literal topic of the child's `topic` "
        "expression when it is a literal or a CASE of literals, else no output and a "
        "warning; never a node name as a dataset.",
    ),
    Class(
        "listener_command_only_name",
        ("job_name",),
        lambda d, _: str(d.agent).startswith(str(d.listener) + "."),
        "both_valid",
        "The listener's job name is the command alone (it adds no output part for Delta "
        "UPDATE / DELETE, whose output it does not report, for a Kafka topic or for a "
        "second MERGE); the agent appends its output. Job names are free-form; a missing "
        "output is judged by the `outputs` difference.",
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
    Class(
        "stream_failure_app",
        ("app_terminal",),
        lambda d, ctx: (
            _streaming(d) and not _raised(d, ctx) and d.agent == "FAIL" and d.listener == "COMPLETE"
        ),
        "both_valid",
        "The streaming query failed (a bad cast in a batch); the program caught the "
        "exception `awaitTermination` raised and stopped Spark normally. The agent ended the "
        "application FAIL (its last run failed), the listener COMPLETE; as caught_failure_app. "
        "Since a micro-batch's failure is its query's alone (docs/how-it-works/runs.md), the "
        "agent ends it COMPLETE too.",
    ),
    # -- datasets --------------------------------------------------------------------------
    Class(
        "listener_misses_delta_dml",
        ("inputs", "outputs"),
        lambda d, _: (
            not _names(d.listener)
            and bool(_names(d.agent))
            and d.listener_job.endswith(("execute_update_command", "execute_delete_command"))
        ),
        "agent_right",
        "Delta UPDATE / DELETE rewrite the table's files from its own rows: the table is "
        "the input and the output. The agent reports both; the listener's run has neither.",
    ),
    Class(
        "listener_misses_jdbc_catalog",
        ("inputs", "outputs", "columns_direct"),
        lambda d, _: (
            d.shape == "iceberg_jdbc"
            and not any(n.startswith("unknown:") for n in _names(d.agent))
            and not _names(d.listener)
            and _only(d.listener) == 0
        ),
        "agent_right",
        "Tables of the JDBC Iceberg catalog: the listener reports no dataset (and so no "
        "column lineage) for their reads and writes; the agent names them by the catalog's "
        "default location `<warehouse>/<ns>/<table>` from the table name in the plan.",
    ),
    Class(
        "iceberg_create_unnamed",
        ("outputs",),
        lambda d, _: (
            d.shape == "iceberg_hadoop"
            and bool(_names(d.agent))
            and all(n.startswith("unknown:") for n in _names(d.agent))
            and all(n.startswith("/") for n in _names(d.listener))
        ),
        "listener_right",
        "CREATE TABLE and CTAS in Iceberg: the plan says only `SparkCatalog@hash, db.orders` "
        "(no catalog name; no plan of the application prints that hash beside a name), so "
        "with several Iceberg catalogs the agent named the target `unknown:db.orders`; the "
        "listener gives the table's location, which the other statements of the agent use too.",
        "Done: the target is the one Iceberg catalog's `<warehouse>/<ns>/<table>` whose "
        "`metadata/` holds the table on disk (`PlaceRequest`, filled beside the committed "
        "versions; where the application found it before, once it is gone). It stays "
        "`unknown` when none or several hold it, or a catalog's layout is not its warehouse's.",
    ),
    Class(
        "iceberg_jdbc_create_unnamed",
        ("outputs",),
        lambda d, _: (
            d.shape == "iceberg_jdbc"
            and bool(_names(d.agent))
            and all(n.startswith("unknown:") for n in _names(d.agent))
            and not _names(d.listener)
        ),
        "both_wrong",
        "CREATE TABLE and CTAS in the JDBC Iceberg catalog: the agent named the target "
        "`unknown:db.orders` (no catalog name in the plan), the listener names none.",
        "Done as for iceberg_create_unnamed: the one catalog whose warehouse holds the "
        "table's metadata on disk; the difference left is listener_misses_jdbc_catalog.",
    ),
    Class(
        "kafka_listener_joins_topics",
        ("inputs",),
        lambda d, _: (
            any(n.startswith("kafka://unknown:") for n in _names(d.agent))
            and any(n.startswith("kafka://") and "," in n for n in _names(d.listener))
        ),
        "both_wrong",
        "A Kafka read of `subscribe=clicks,events-a`: the agent names one dataset per topic "
        "(as Naming.md asks) under `kafka://unknown` (the servers of a read are not in the "
        "log); the listener knows the servers but names one dataset `clicks,events-a`.",
        "As kafka_servers_not_in_log.",
    ),
    Class(
        "kafka_servers_not_in_log",
        ("inputs",),
        lambda d, _: (
            bool(_names(d.agent))
            and all(n.startswith("kafka://unknown:") for n in _names(d.agent))
            and bool(_names(d.listener))
            and all(
                n.startswith("kafka://") and not n.startswith("kafka://unknown")
                for n in _names(d.listener)
            )
        ),
        "listener_right",
        "A Kafka read: the plan's `KafkaRelation(strategy=Subscribe[...])` names the topics "
        "and not the bootstrap servers, so the agent's namespace is `kafka://unknown` unless "
        "`spark.kafka_bootstrap` is set (the harness leaves it unset, as a default install "
        "does) or the application's log names them elsewhere before the read; the listener "
        "reads the servers in the JVM.",
        "Without `spark.kafka_bootstrap`, take the servers from a Kafka write of the same "
        "application (its options print `kafka.bootstrap.servers`); keep `unknown` only "
        "when neither names them.",
    ),
    Class(
        "kafka_pattern_read",
        ("inputs",),
        lambda d, _: (
            d.shape == "kafka_batch"
            and any(n.startswith("kafka://unknown:") for n in _names(d.agent))
            and not _names(d.listener)
        ),
        "both_wrong",
        "A Kafka read with `subscribePattern=events-.*`: the log does not list the topics "
        "it matched, so the agent names the pattern as written (docs), as if it were a "
        "topic, under `kafka://unknown`; the listener reports no input at all.",
        "Name the servers as in kafka_servers_not_in_log and mark a pattern name as a "
        "pattern (a `lineageAgent_` facet) rather than presenting it as a topic.",
    ),
    Class(
        "kafka_listener_joins_topics_named",
        ("inputs",),
        lambda d, _: (
            _kafka_located(d)
            and any(n.startswith("kafka://") and "," in n for n in _names(d.listener))
        ),
        "agent_right",
        "A Kafka read of `subscribe=clicks,events-a`: the agent names one dataset per topic "
        "(as Naming.md asks) on the servers its application's Kafka write names; the "
        "listener names one dataset `clicks,events-a`.",
    ),
    Class(
        "kafka_pattern_marked",
        ("inputs",),
        lambda d, _: not _streaming(d) and _kafka_located(d) and not _names(d.listener),
        "agent_right",
        "A Kafka read with `subscribePattern=events-.*`: the log does not list the topics it "
        "matched; the agent names the pattern on the servers the application's Kafka write "
        "names and marks it a pattern (`lineageAgent_topicPattern`), the listener reports no "
        "input at all.",
    ),
    Class(
        "kafka_topic_column_named",
        ("outputs",),
        lambda d, _: (
            "save_into_data_source" in d.execution and _kafka_located(d) and not _names(d.listener)
        ),
        "agent_right",
        "A Kafka write whose topics come from a `topic` column (`CASE WHEN ... THEN "
        "'events-a' ELSE 'events-b'`): the agent names one output per literal topic the "
        "column can take, on the command's `kafka.bootstrap.servers`; the listener names no "
        "output.",
    ),
    Class(
        "kafka_save_input_unlocated",
        ("inputs",),
        lambda d, _: (
            "save_into_data_source" in d.execution
            and bool(_names(d.agent))
            and all(n.startswith("unknown:LogicalRelation ") for n in _names(d.agent))
            and bool(_names(d.listener))
        ),
        "listener_right",
        "A Kafka save from files: the save runs its query inside the command, and the event "
        "log prints only its logical plan, `LogicalRelation json, [kwh#6, …], false`, without "
        "a path. The agent names the input by format and columns in namespace `unknown` (with "
        "the lineage into key and value); the listener reads the path in the JVM.",
        "Not in the event log (docs/how-it-works/lakehouse.md): nothing to fix from outside "
        "the JVM; the columns and their lineage are reported.",
    ),
    Class(
        "schema_order",
        ("schema_types",),
        lambda d, _: not d.agent and not d.listener,
        "both_valid",
        "The same fields with the same types, in another order: the agent lists first the "
        "columns the application showed of the dataset before (a topic written with `value` "
        "alone, then read whole); a schema facet's order carries no meaning for a topic.",
    ),
    Class(
        "kafka_save_schema",
        ("schema_fields",),
        lambda d, _: (
            "save_into_data_source" in d.execution
            and d.role == "outputs"
            and d.dataset.startswith("kafka://")
            and bool(d.agent)
            and not d.listener
        ),
        "agent_right",
        "A Kafka save: the agent gives the written columns (`key`, `value`, `topic` of the "
        "query the save ran) as the topic stores them (binary key and value); the listener "
        "gives the output no schema.",
    ),
    Class(
        "stream_kafka_input",
        ("inputs",),
        lambda d, _: (
            _streaming(d)
            and any(n.startswith("kafka://") for n in _names(d.agent))
            and not _names(d.listener)
        ),
        "by_design",
        "The streaming query's run reads its Kafka topic (namespace `kafka://unknown`, see "
        "kafka_servers_not_in_log); the listener run it pairs with is a micro-batch's MERGE, "
        "which reads the batch's frame, not the topic.",
    ),
    Class(
        "jdbc_url_not_in_log",
        ("inputs", "outputs"),
        lambda d, _: (
            any(n.startswith("unknown:") for n in _names(d.agent))
            and any(n.startswith("postgres://") for n in _names(d.listener))
        ),
        "listener_right",
        "A JDBC read (the plan shows only `JDBCRelation(table)`) or a write under Spark's "
        "default redaction of `url`: the agent named the dataset `unknown:schema.table`, the "
        "listener, asking the JVM, `postgres://host:port` + `database.schema.table`. The one "
        "left is the `jdbc_redacted` write: its only JDBC node prints "
        "`url=*********(redacted)`, no Spark property names a JDBC catalog or url, "
        "`modifiedConfigs` is empty, the application runs no other JDBC execution, and no "
        "`postgresql://` occurs anywhere in its event log.",
        "Done for reads: they take the url of the same application's earlier write or read of "
        "the table, or of the V2 JDBC catalog their scan names (docs: JDBC). Nothing in the "
        "log names the redacted write's url; an operator who wants it sets "
        "`spark.sql.redaction.options.regex` to a pattern of secrets only.",
    ),
    Class(
        "listener_derby_path",
        ("inputs", "outputs"),
        lambda d, _: (
            any("metastore_db" in n for n in _names(d.listener))
            and not any(n.startswith("unknown:") for n in _names(d.agent))
        ),
        "agent_right",
        "In-memory Derby (`jdbc:derby:memory:peer`; Naming.md has no Derby entry, but a name "
        "must identify the datasource): the agent names the V1 write `derby:memory:peer` from "
        "its url, the read after it from that write's url and the V2 catalog INSERT from "
        "`spark.sql.catalog.derby.url`; the listener names all three by a file path that does "
        "not exist (the working directory's `metastore_db`).",
    ),
    Class(
        "derby_in_memory_naming",
        ("inputs", "outputs"),
        lambda d, _: any("metastore_db" in n for n in _names(d.listener)),
        "both_wrong",
        "A JDBC read of in-memory Derby and a write through the V2 JDBC catalog: the agent "
        "named them `unknown:APP.PEOPLE`, the listener by the nonexistent `metastore_db` path "
        "of the working directory.",
        "Done: the read takes the url of the application's earlier write of the table, the V2 "
        "write the url of the only JDBC catalog (`spark.sql.catalog.derby.url`); both are "
        "`derby:memory:peer` (listener_derby_path).",
    ),
    Class(
        "subquery_inputs",
        ("inputs",),
        lambda d, _: (
            d.shape == "scalar_subquery" and bool(_names(d.agent)) and not _names(d.listener)
        ),
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
        "untyped_lake_columns",
        ("schema_types", "schema_fields"),
        lambda d, _: d.shape in LAKE_SHAPES and _untyped(d),
        "listener_right",
        "Delta catalog writes, Iceberg scans and writes, `from_avro`: the plan prints these "
        "attributes without a type (`amount#12`; only `L` marks a long), so the agent "
        "left `type` out where the listener, asking the JVM, says double / string. Fixed: "
        "the agent types them from the table's own metadata on disk (Delta "
        "`metaData.schemaString`, the current Iceberg schema), from what the application "
        "showed of the table before, through column lineage for columns copied unchanged, "
        "and from the Avro schema `from_avro` prints. Would come back for a table that is not "
        "on a local file system and whose columns the application never typed.",
        "Type columns from where the log states them: the `StructType(...)` Delta prints in "
        "MERGE arguments, casts and literals, the parquet `ReadSchema` of a Delta or Iceberg "
        "file scan, the `from_avro` schema string; and remember per application the types "
        "of a table once seen, for its later untyped scans and writes.",
    ),
    Class(
        "lake_output_schema_missing",
        ("schema_fields",),
        lambda d, _: d.shape in LAKE_SHAPES and d.role == "outputs" and _fields_subset(d),
        "listener_right",
        "Delta writes by path (`SaveIntoDataSourceCommand`) and a saveAsTable that creates "
        "a Delta table: the agent's output had no schema facet; the listener gives the "
        "written columns. Fixed: the schema is what the nested execution running the "
        "write's query returns (recognized by the attributes the root prints for the "
        "query), typed where that plan types them.",
        "Take the output schema from the command's query (the output attributes of the "
        "child plan, or the nested AppendDataExecV1's), typed as untyped_lake_columns says.",
    ),
    Class(
        "iceberg_metadata_columns",
        ("schema_fields",),
        lambda d, _: (
            d.role == "inputs"
            and _fields_subset(d)
            and {n for n, _ in _types(d.listener)} <= ICEBERG_METADATA
        ),
        "agent_right",
        "Iceberg copy-on-write MERGE / UPDATE / DELETE read the metadata columns `_file` and "
        "`_pos` to rewrite data files; the listener lists them in the table's schema, the "
        "agent lists the table's own columns only: no table has these columns.",
    ),
    Class(
        "pruned_input_schema",
        ("schema_fields",),
        lambda d, _: d.role == "inputs" and _fields_subset(d),
        "listener_right",
        "The agent's input schema lists only the columns the scan read (Spark's pruned "
        "`ReadSchema` in the plan); the listener lists the dataset's whole schema, which is "
        "what the schema facet describes. Fixed for parquet datasets (the schema Spark wrote "
        "into their footers), Delta and Iceberg tables (their metadata on disk) and datasets "
        "the application wrote or scanned whole before. Left: CSV and JSON files on disk "
        "that the application did not write, whose unread columns neither the event log nor "
        "the files state with their types (a CSV header names them, but their types are "
        "what Spark inferred or was told at read time; JSON files hold no schema), and "
        "datasets not on a local file system.",
        "Read the CSV header for the unread columns' names (given without a type); for the "
        "rest, a `lineageAgent_` facet could mark an input schema as the columns read.",
    ),
    Class(
        "hive_scan_untyped",
        ("schema_types",),
        lambda d, _: d.shape == "hive" and all(t == "" for _, t in d.agent),
        "listener_right",
        "A Hive table scan prints its attributes without types (`HiveTableRelation [..., "
        "Data Cols: [id#9L, s#10]]`: only `L` marks a long), so the agent left `type` out "
        "for the string column `s` of the scanned table and of the parquet copy made from "
        "it; the listener, which asks the catalog, says `string`. Fixed: the agent remembers "
        "per application the schema of each dataset once seen typed (the CTAS typed `s` "
        "string) and types later scans from it, and the copy through its column lineage. "
        "Would come back for a Hive table the application never wrote.",
        "Remember per application the schema of the tables its executions wrote (the CTAS "
        "typed `s` string) and type later scans of the same table from it: no event of the "
        "log carries a Hive table's column types otherwise.",
    ),
    # -- column lineage --------------------------------------------------------------------
    Class(
        "listener_misses_merge_target",
        ("columns_direct", "columns_indirect"),
        lambda d, _: (
            "merge_into_command" in d.listener_job
            and _only(d.listener) == 0
            and bool(_edges(d.agent))
            and all(e[2] == d.dataset for e in _edges(d.agent))
        ),
        "agent_right",
        "Delta MERGE: rows the MERGE does not change keep the target's own values, so each "
        "target column comes from itself (IDENTITY) and the match on `id` decides which "
        "(INDIRECT CONDITIONAL); the agent reports these, the listener only the source's.",
    ),
    Class(
        "iceberg_metadata_filter",
        ("columns_indirect",),
        lambda d, _: (
            d.shape.startswith("iceberg_")
            and bool(_edges(d.listener))
            and all(e[3] in ICEBERG_METADATA for e in _edges(d.listener))
            and all(e[5] == "CONDITIONAL" for e in _edges(d.agent))
        ),
        "agent_right",
        "Iceberg copy-on-write MERGE / UPDATE / DELETE: the listener reports `_file` as "
        "INDIRECT FILTER (the runtime filter on files to rewrite; not a column of the "
        "table); for UPDATE it misses what the agent says: `status` decides which rows' "
        "amount changes (CONDITIONAL).",
    ),
    Class(
        "iceberg_update_transformation",
        ("columns_direct",),
        lambda d, _: (
            d.shape.startswith("iceberg_")
            and ".replace_data." in d.listener_job
            and bool(_edges(d.agent))
            and all(e[5] == "TRANSFORMATION" for e in _edges(d.agent))
            and [e[:5] for e in _edges(d.agent)] == [e[:5] for e in _edges(d.listener)]
            and all(e[5] == "IDENTITY" for e in _edges(d.listener))
        ),
        "agent_right",
        "Iceberg `UPDATE ... SET amount = amount + 1`: the agent says amount <- amount "
        "TRANSFORMATION; the listener IDENTITY, which the spec reserves for an unchanged value.",
    ),
    Class(
        "kafka_columns",
        ("columns_direct",),
        lambda d, _: (
            _only(d.listener) == 0
            and bool(_edges(d.agent))
            and all(e[1].startswith("kafka://") for e in _edges(d.agent))
        ),
        "agent_right",
        "Column lineage from a Kafka read (`topic`, `offset`, `value` cast or `from_avro`): "
        "the agent reports it, the listener none. The agent's namespace (`kafka://unknown` "
        "when nothing in the log names the servers) is judged by kafka_servers_not_in_log.",
    ),
    Class(
        "delta_catalog_write_lineage",
        ("columns_direct", "columns_indirect"),
        lambda d, _: (
            d.shape == "delta_catalog"
            and _only(d.agent) == 0
            and bool(_edges(d.listener))
            and (
                "atomic_create_table_as_select" in d.listener_job
                or "overwrite_by_expression" in d.listener_job
            )
        ),
        "listener_right",
        "Delta catalog CTAS / saveAsTable new / INSERT OVERWRITE: the agent missed the "
        "WHERE (INDIRECT FILTER) and GROUP BY (INDIRECT GROUP_BY) of the query, and for "
        "the saveAsTable every column (no schema either); the listener has them. Fixed: "
        "the lineage, direct and indirect, is that of the nested execution that runs the "
        "query, attributed to the root's run and output.",
        "Read the query of a Delta `AtomicCreateTableAsSelect` / `OverwriteByExpressionExecV1` "
        "from its nested `AppendDataExecV1` execution (the root prints only the target) and "
        "derive the indirect edges from its Filter and Aggregate as for other writes.",
    ),
    Class(
        "jdbc_pushed_filter",
        ("columns_direct", "columns_indirect"),
        lambda d, _: (
            d.shape == "jdbc_postgres"
            and all(e[0] == "*" for e in _edges(d.agent) + _edges(d.listener))
            and all(tuple(e[4:]) == ("INDIRECT", "FILTER") for e in _edges(d.agent))
            and all(tuple(e[4:]) == ("DIRECT", "IDENTITY") for e in _edges(d.listener))
        ),
        "agent_right",
        "The filter pushed into the PostgreSQL scan (`*GreaterThan(amount,30)`, no Filter node "
        "left) decides which rows of the table are written: the agent reports amount as a "
        "dataset-level INDIRECT FILTER input, the listener as a dataset-level DIRECT IDENTITY "
        "one, which would say the output's rows are copies of amount.",
    ),
    Class(
        "listener_derby_columns",
        ("columns_direct",),
        lambda d, _: (
            d.shape == "jdbc_derby"
            and all(e[1] == "derby:memory:peer" for e in _edges(d.agent))
            and all("metastore_db" in e[1] for e in _edges(d.listener))
        ),
        "agent_right",
        "Column lineage from the in-memory Derby read follows its dataset name "
        "(listener_derby_path), and `lower(NAME)` is a TRANSFORMATION in the agent where the "
        "listener says IDENTITY, which the spec reserves for an unchanged value.",
    ),
    Class(
        "kafka_save_columns",
        ("columns_direct", "columns_indirect"),
        lambda d, _: (
            "save_into_data_source" in d.execution
            and d.dataset.startswith("kafka://")
            and _only(d.listener) == 0
            and bool(_edges(d.agent))
            and all(e[2].startswith("LogicalRelation ") for e in _edges(d.agent))
        ),
        "agent_right",
        "A Kafka save from files: the agent follows the save's logical plan into `key`, "
        "`value` and `topic` (and the filter, dataset-level); the listener reports no column "
        "lineage. The input's name is judged by kafka_save_input_unlocated.",
    ),
    Class(
        "jdbc_columns",
        ("columns_direct", "columns_indirect"),
        lambda d, _: any(e[1] == "unknown" for e in _edges(d.agent)),
        "listener_right",
        "Column lineage from a JDBC read follows its dataset name (`unknown` in the agent).",
        "Done with jdbc_url_not_in_log: the lineage from the reads it names is judged by "
        "jdbc_pushed_filter and listener_derby_columns.",
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
        "(spark.sql.debug.maxToStringFields), so the agent saw 24 of the 500 inputs; the "
        "listener has all 500.",
        "Done: a cut expression reads every column its operator reads (an upper bound), and "
        "`lineageAgent_truncation` still lists the column.",
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
    Class(
        "pivot_column_direct",
        ("columns_direct", "columns_indirect"),
        lambda d, _: (
            d.shape == "pivot"
            and {(e[0], e[3]) for e in _edges(d.listener)} | {(e[0], e[3]) for e in _edges(d.agent)}
            <= {(e[0], "name") for e in _edges(d.listener) + _edges(d.agent)}
            and all(tuple(e[4:]) == ("DIRECT", "AGGREGATION") for e in _edges(d.listener))
            and all(tuple(e[4:]) == ("INDIRECT", "CONDITIONAL") for e in _edges(d.agent))
        ),
        "agent_right",
        "pivot(`name`, [ada, alan, grace]) then sum(salary), max(age): each pivoted column "
        "(`ada_pay`) holds an aggregate of salary or age; `name`'s values only name the "
        "columns and pick where a row's value lands. The listener reports `name` as a DIRECT "
        "AGGREGATION input of every pivoted column, as if its values were aggregated into "
        "it; the agent reports it as INDIRECT CONDITIONAL (and GROUP_BY for the dataset).",
    ),
    Class(
        "create_data_source_table_no_run",
        ("run_only_listener",),
        lambda d, _: (
            isinstance(d.listener, dict)
            and "execute_create_data_source_table_command" in str(d.listener.get("job", ""))
        ),
        "by_design",
        "`CREATE TABLE t (...)` without `STORED AS` in the session catalog (a data source "
        "table): Spark logs `CreateDataSourceTableCommand` with the table's name only, no "
        "location and no columns, so the agent makes no run of it "
        "(docs/how-it-works/facets.md); the INSERT that follows names the table's place.",
    ),
    Class(
        "hive_create_schema_not_in_log",
        ("schema_fields",),
        lambda d, _: "create_table_command" in d.execution and d.role == "outputs" and not d.agent,
        "by_design",
        "A Hive-format `CREATE TABLE` logs `CreateTableCommand` with the table's name and "
        "serde only, no columns: the listener asks the catalog in the JVM; the agent gives "
        "no schema facet rather than one it cannot read (docs/how-it-works/facets.md), and "
        "the INSERT that follows carries the table's typed columns.",
    ),
    Class(
        "partition_column_empty2null",
        ("columns_direct",),
        lambda d, _: (
            bool(_edges(d.listener))
            and all(tuple(e[4:]) == ("DIRECT", "TRANSFORMATION") for e in _edges(d.listener))
            and all(tuple(e[4:]) == ("DIRECT", "IDENTITY") for e in _edges(d.agent))
            and {tuple(e[1:4]) for e in _edges(d.listener)}
            <= {tuple(e[1:4]) for e in _edges(d.agent)}
            and "insert_into" in d.execution
        ),
        "agent_right",
        "A dynamic-partition write: Spark's file writer wraps the string partition column in "
        "`empty2null` (an empty string is stored as the default partition); the value is the "
        "column's, so the agent reports city <- city IDENTITY. The listener calls it a "
        "TRANSFORMATION and adds a dataset-level DIRECT edge for it, which would say every "
        "row is a copy of city.",
    ),
    Class(
        "listener_misses_merge_source",
        ("inputs",),
        lambda d, _: "merge_into_command" in d.listener_job and bool(d.agent) and not d.listener,
        "agent_right",
        "Delta MERGE from a DataFrame or view over JSON files deduplicated with a window: "
        "the source rows Delta materializes come from the JSON directory, which the agent "
        "reports as an input; the listener reports only the target table.",
    ),
    Class(
        "merge_copy_is_identity",
        ("columns_direct",),
        lambda d, _: _merge_relabelled(d, ("DIRECT", "TRANSFORMATION"), ("DIRECT", "IDENTITY")),
        "agent_right",
        "Delta MERGE `UPDATE SET *` / `INSERT *` from a source column of the same value: the "
        "agent reports the copy as IDENTITY (and the target's own values, see "
        "listener_misses_merge_target); the listener calls every assignment a "
        "TRANSFORMATION.",
    ),
    Class(
        "merge_source_window",
        ("columns_indirect",),
        lambda d, _: (
            bool(_edges(d.listener))
            and _merge_relabelled(d, ("INDIRECT", "WINDOW"), ("INDIRECT", "FILTER"))
        ),
        "both_valid",
        "Delta MERGE from the latest row per key (`row_number() OVER (PARTITION BY item "
        "ORDER BY counted_at DESC) = 1`): the window's keys decide which source rows exist; "
        "the agent reports them as FILTER (as for any window that keeps the top rows, Spark's "
        "WindowGroupLimit) with the MERGE's conditions as CONDITIONAL, the listener as WINDOW "
        "without the conditions.",
    ),
)


def classify(difference: Difference, context: Context) -> Class | None:
    """The first class that explains the difference, or None (unexplained)."""
    for known in CLASSES:
        if difference.aspect in known.aspects and known.rule(difference, context):
            return known
    return None
