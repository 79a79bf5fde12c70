"""The checked-in lakehouse event logs hold what tests/data/eventlogs/lakehouse/NOTES.md says.

Read with zstandard and json only, never through the agent: these are the facts the Delta,
Iceberg, Kafka and streaming translation will be built on, so a regenerated log that no
longer shows them fails here first.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.applog import machine_places
from tests.data.make_lakehouse_logs import KEPT_PROPERTIES

LOGS = Path(__file__).resolve().parent / "data" / "eventlogs" / "lakehouse"
SHAPES = (
    "delta_path",
    "delta_catalog",
    "iceberg_hadoop",
    "iceberg_jdbc",
    "kafka_batch",
    "stream_file_parquet",
    "stream_kafka_delta",
    "stream_sigterm",
    "stream_failure",
    "stream_iceberg",
    "delta_merge_window",
)
START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"
ACCUMS = "org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates"
LISTENER = "org.apache.spark.sql.streaming.StreamingQueryListener$"
QUERY_STARTED = LISTENER + "QueryStartedEvent"
QUERY_PROGRESS = LISTENER + "QueryProgressEvent"
QUERY_TERMINATED = LISTENER + "QueryTerminatedEvent"
KEPT = KEPT_PROPERTIES  # what the generator keeps of the environment event

Event = dict[str, Any]


@functools.cache
def text(shape: str) -> str:
    raw = (LOGS / f"{shape}.jsonl.zst").read_bytes()
    reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    return reader.decompress(raw).decode()


def events(shape: str) -> list[Event]:
    return [json.loads(line) for line in text(shape).splitlines()]


def of(shape: str, kind: str) -> list[Event]:
    return [e for e in events(shape) if e["Event"] == kind]


def starts(shape: str) -> list[Event]:
    return sorted(of(shape, START), key=lambda e: int(e["executionId"]))


def roots(shape: str) -> list[Event]:
    return [e for e in starts(shape) if e["executionId"] == e["rootExecutionId"]]


def root(shape: str, description: str) -> Event:
    (found,) = [e for e in roots(shape) if e["description"] == description]
    return found


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan["children"]:
        found += nodes(child)
    return found


def driver_metrics(shape: str, execution: Event) -> dict[str, int]:
    """Plan metric name -> value posted by the driver (SparkListenerDriverAccumUpdates)."""
    values: dict[int, int] = {}
    for update in of(shape, ACCUMS):
        if update["executionId"] == execution["executionId"]:
            values.update({int(k): int(v) for k, v in update["accumUpdates"]})
    return {
        metric["name"]: values[metric["accumulatorId"]]
        for node in nodes(execution["sparkPlanInfo"])
        for metric in node["metrics"]
        if metric["accumulatorId"] in values
    }


def tables(shape: str) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((LOGS / f"{shape}.tables.json").read_text())
    return facts


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_is_a_whole_scrubbed_application(shape: str) -> None:
    """Each log is one Spark 4.1.1 application, its paths under /data/lakehouse, env trimmed."""
    log = events(shape)
    assert log[0]["Event"] == "SparkListenerLogStart"
    assert log[0]["Spark Version"] == "4.1.1"
    assert [e["App Name"] for e in of(shape, "SparkListenerApplicationStart")] == [
        f"lakehouse_{shape}"
    ]
    assert len(of(shape, "SparkListenerApplicationEnd")) == 1
    (env,) = of(shape, "SparkListenerEnvironmentUpdate")
    assert set(env) == {"Event", "Spark Properties"}
    assert set(env["Spark Properties"]) <= KEPT
    body = text(shape)
    for machine in machine_places():
        assert machine not in body
    paths = re.findall(r"file:(/[\w./-]*)", body)
    assert paths
    assert all(p.lstrip("/").startswith("data/lakehouse/") for p in paths), set(paths)


def test_delta_path_statements_are_command_roots() -> None:
    """A path-based Delta statement is one root execution named after its Delta command."""
    shape = "delta_path"
    assert [(e["description"], e["sparkPlanInfo"]["nodeName"]) for e in roots(shape)] == [
        ("delta path: create", "Execute SaveIntoDataSourceCommand"),
        ("delta path: append", "Execute SaveIntoDataSourceCommand"),
        ("delta path: overwrite", "Execute SaveIntoDataSourceCommand"),
        ("delta path: merge, python api", "Execute MergeIntoCommand"),
        ("delta path: merge, sql", "Execute MergeIntoCommand"),
        ("delta path: update", "Execute UpdateCommand"),
        ("delta path: delete", "Execute DeleteCommand"),
        ("delta path: time travel read", "Execute InsertIntoHadoopFsRelationCommand"),
    ]
    table = "/data/lakehouse/data/delta_events"
    modes = ["ErrorIfExists", "Append", "Overwrite"]
    for execution, mode in zip(roots(shape)[:3], modes, strict=True):
        plan = execution["physicalPlanDescription"]
        assert "org.apache.spark.sql.delta.sources.DeltaDataSource@" in plan
        assert f"[path={table}], {mode}" in plan
    delete = root(shape, "delta path: delete")["physicalPlanDescription"]
    assert "DeleteCommand\nArguments: org.apache.spark.sql.delta.DeltaLog@" in delete
    assert f"spark_catalog.delta.`{table}`" in delete


def test_delta_merge_plan_shows_clauses_and_read_version() -> None:
    """MergeIntoCommand arguments: target Delta[version=read, path], condition, clause lists."""
    shape = "delta_path"
    table = "file:/data/lakehouse/data/delta_events"
    api = root(shape, "delta path: merge, python api")["physicalPlanDescription"]
    assert f"SubqueryAlias s, SubqueryAlias t, Delta[version=2, {table}], " in api
    assert "[Update [actions: [`id` = " in api
    assert "[Insert [actions: [`id` = " in api
    sql = root(shape, "delta path: merge, sql")["physicalPlanDescription"]
    assert f"Delta[version=3, {table}]" in sql
    assert "[Delete [condition: (id#" in sql
    assert "Update [actions: [`id` = " in sql
    assert "[Insert [condition: (id#" in sql
    assert "`name` = orphan" in sql  # WHEN NOT MATCHED BY SOURCE: a fourth list
    update = root(shape, "delta path: update")["physicalPlanDescription"]
    assert f"UpdateCommand\nArguments: Delta[version=4, {table}], " in update


def test_delta_merge_source_ids_return_in_the_materialized_scans() -> None:
    """Through a SQL view, the ids the MERGE assigns from are not in the materialize-source
    plan; the scans of the materialized rows output them, in that plan's column order."""
    shape = "delta_merge_window"
    merge = root(shape, "delta merge window: sql view")
    assigned = re.findall(r"`(\w+)` = (\w+#\d+L?)", merge["physicalPlanDescription"])
    ids = list(dict.fromkeys(attr for _, attr in assigned))
    assert [a.split("#")[0] for a in ids] == ["item", "qty", "depot", "count_day"]
    nested = [e for e in starts(shape) if e.get("rootExecutionId") == merge["executionId"]]
    (materialize,) = [e for e in nested if e["description"].endswith("materialize source")]
    plan = materialize["physicalPlanDescription"]
    returned = re.search(r"\(\d+\) Project\n.*?Output \[4\]: \[(.*?)\]", plan, re.S)
    assert returned is not None
    assert not set(ids[:3]) & set(returned[1].split(", "))  # the aliases were dropped
    scans = {
        m
        for e in nested
        for m in re.findall(
            r"Scan ExistingRDD mergeMaterializedSource.*?\nOutput \[4\]: \[(.*?)\]",
            e["physicalPlanDescription"],
        )
    }
    assert scans == {", ".join(ids)}


def test_delta_committed_version_is_on_disk_only() -> None:
    """Commits come from _delta_log; the log shows read versions and the session's last commit."""
    shape = "delta_path"
    ((_, facts),) = tables(shape).items()
    assert [c["operation"] for c in facts["commits"]] == [
        "WRITE",
        "WRITE",
        "WRITE",
        "MERGE",
        "MERGE",
        "UPDATE",
        "DELETE",
    ]
    assert [c["version"] for c in facts["commits"]] == list(range(7))
    key = "spark.databricks.delta.lastCommitVersionInSession"
    seen = [e["modifiedConfigs"].get(key) for e in roots(shape)]
    assert seen == [None, "0", "1", "2", "3", "4", "5", "6"]
    assert "Compute snapshot for version: 1" in " ".join(e["description"] for e in starts(shape))


def test_delta_internal_executions_are_nested_and_labelled() -> None:
    """Log replays and file rewrites are child executions; log reads name the _delta_log files."""
    shape = "delta_path"
    by_id = {e["executionId"]: e for e in starts(shape)}
    children = [e for e in starts(shape) if e["executionId"] != e["rootExecutionId"]]
    assert len(children) > 3 * len(roots(shape))
    for child in children:
        parent = by_id[child["rootExecutionId"]]["description"]
        assert child["description"].startswith(
            (parent, f"Delta: {parent}", f"Delta: Delta: {parent}")
        )
        if "DeltaLogFileIndex" in child["physicalPlanDescription"]:
            assert child["description"].startswith("Delta: ")
            assert "/_delta_log/" in child["physicalPlanDescription"]
    for child in children:  # data files are written under plain operators: no write node
        names = {n["nodeName"] for n in nodes(child["sparkPlanInfo"])}
        assert not any(n.startswith("Execute ") or n == "WriteFiles" for n in names), names
    replays = [c for c in children if "Compute snapshot for version: " in c["description"]]
    assert replays
    for replay in replays:  # the log files, or the cached state built from them
        plan = replay["physicalPlanDescription"]
        assert "DeltaLogFileIndex" in plan or "Scan ExistingRDD Delta Table State #" in plan
        assert "/data/lakehouse/data/delta_events/_delta_log" in plan
    travel = root(shape, "delta path: time travel read")["physicalPlanDescription"]
    assert "PreparedDeltaFileIndex [file:/data/lakehouse/data/delta_events]" in travel


def test_delta_catalog_tables() -> None:
    """Catalog Delta tables: V2 write nodes with the CatalogTable, CTAS without a location."""
    shape = "delta_catalog"
    assert [e["sparkPlanInfo"]["nodeName"] for e in roots(shape)] == [
        "CreateTable",
        "AppendDataExecV1",
        "AppendDataExecV1",
        "AtomicCreateTableAsSelect",
        "AtomicCreateTableAsSelect",
        "OverwriteByExpressionExecV1",
        "Execute MergeIntoCommand",
        "Execute UpdateCommand",
        "Execute DeleteCommand",
        "AtomicCreateTableAsSelect",
        "AtomicCreateTableAsSelect",
        "LocalTableScan",
    ]
    insert = root(shape, "delta table: insert values")["physicalPlanDescription"]
    for line in (
        "Table: sales",
        "Provider: delta",
        "Location: file:/data/lakehouse/warehouse/sales",
    ):
        assert line in insert
    assert "Some(default.sales)" in insert
    ctas = root(shape, "delta table: ctas")["physicalPlanDescription"]
    assert "DeltaCatalog@" in ctas
    assert "default.sales_by_region" in ctas
    assert "TableSpec(Map(),Some(delta),Map(),None," in ctas  # no location: managed
    external = root(shape, "delta table: external create")["physicalPlanDescription"]
    assert "Some(file:/data/lakehouse/data/external_sales)" in external
    merge = root(shape, "delta table: merge")["physicalPlanDescription"]
    assert "`spark_catalog`.`default`.`sales`, Delta[version=2, " in merge
    assert "file:/data/lakehouse/warehouse/sales]" in merge
    key = "spark.databricks.delta.lastCommitVersionInSession"
    assert root(shape, "delta table: merge")["modifiedConfigs"][key] == "1"  # sales_eu's commit
    for managed in ("sales_by_region", "sales_v1"):  # managed CTAS targets: never a path
        assert f"/warehouse/{managed}" not in text(shape)
    assert root(shape, "delta table: time travel read")["sparkPlanInfo"]["children"] == []
    facts = tables(shape)
    assert "/data/lakehouse/warehouse/sales_by_region" in facts
    assert "/data/lakehouse/data/external_sales" in facts


@pytest.mark.parametrize(
    ("shape", "catalog"), [("iceberg_hadoop", "lake"), ("iceberg_jdbc", "jcat")]
)
def test_iceberg_statements(shape: str, catalog: str) -> None:
    """Iceberg writes name the table (IcebergWrite), reads the snapshot id; no location."""
    names = [e["sparkPlanInfo"]["nodeName"] for e in roots(shape)]
    assert names[:9] == [
        "CreateNamespace",
        "CreateTable",
        "AppendData",
        "AppendData",
        "ReplaceData",
        "ReplaceData",
        "ReplaceData",
        "AtomicCreateTableAsSelect",
        "OverwriteByExpression",
    ]
    by_id = {e["executionId"]: e for e in starts(shape)}
    for child in starts(shape):  # no format-internal executions: only a CTAS's own write
        if child["executionId"] != child["rootExecutionId"]:
            assert child["sparkPlanInfo"]["nodeName"] == "AppendData"
            parent = by_id[child["rootExecutionId"]]["sparkPlanInfo"]["nodeName"]
            assert parent == "AtomicCreateTableAsSelect"
    merge = root(shape, f"iceberg {catalog}: merge")
    assert "MergeRows" in [n["nodeName"] for n in nodes(merge["sparkPlanInfo"])]
    plan = merge["physicalPlanDescription"]
    assert f"IcebergWrite(table={catalog}.db.orders, format=PARQUET)" in plan
    assert f"IcebergCopyOnWriteScan(table={catalog}.db.orders, schemaId=0, snapshotId=" in plan
    for clause in ("discard((status#", "keep(Update, true, ", "keep(Insert, true, ", "keep(Copy, "):
        assert clause in plan
    ctas = root(shape, f"iceberg {catalog}: ctas")
    (append,) = [
        e
        for e in starts(shape)
        if e["rootExecutionId"] == ctas["executionId"] and e["executionId"] != ctas["executionId"]
    ]
    assert (
        "IcebergWrite(table=db.order_totals, format=PARQUET)" in append["physicalPlanDescription"]
    )
    snapshots = {
        s["snapshot-id"]
        for t in tables(shape).values()
        if isinstance(t, dict)
        for s in t["snapshots"]
    }
    read = {int(s) for s in re.findall(r"snapshotId=(\d+)", text(shape))}
    assert read
    assert read <= snapshots
    for location in tables(shape):  # where the tables live: only on disk
        assert not location.startswith("/data/lakehouse/") or location not in text(shape)
    assert "metadata.json" not in text(shape)


@pytest.mark.parametrize(
    ("shape", "catalog"), [("iceberg_hadoop", "lake"), ("iceberg_jdbc", "jcat")]
)
def test_iceberg_commit_metrics_match_snapshots(shape: str, catalog: str) -> None:
    """Driver metrics of each write equal the summary of the snapshot it committed."""
    (orders,) = [
        t for k, t in tables(shape).items() if k.endswith("/db/orders") and isinstance(t, dict)
    ]
    writes = [
        f"iceberg {catalog}: {what}"
        for what in ("insert values", "writeTo append", "merge", "update", "delete")
    ]
    added = [driver_metrics(shape, root(shape, w)).get("number of added records") for w in writes]
    assert added == [int(s["added-records"]) for s in orders["snapshots"]]


def test_iceberg_jdbc_catalog_pointer_is_in_the_catalog() -> None:
    """The JDBC catalog's current metadata file is only in its database."""
    rows = tables("iceberg_jdbc")["jdbc catalog iceberg_tables"]
    assert [r[:3] for r in rows] == [["jcat", "db", "order_totals"], ["jcat", "db", "orders"]]
    assert all(r[3].endswith(".metadata.json") for r in rows)
    props = [e["Properties"] for e in of("iceberg_jdbc", "SparkListenerJobStart")]
    assert props[0]["spark.sql.catalog.jcat.uri"] == "jdbc:sqlite:/data/lakehouse/catalog.db"


def test_kafka_batch_writes_and_reads() -> None:
    """Writes show servers and topic option; reads show the strategy but never the servers."""
    shape = "kafka_batch"
    write = root(shape, "kafka: write to topic option")["physicalPlanDescription"]
    assert "KafkaSourceProvider@" in write
    assert "[kafka.bootstrap.servers=127.0.0.1:9092, topic=clicks], ErrorIfExists" in write
    by_column = root(shape, "kafka: write with topic column")["physicalPlanDescription"]
    assert "[kafka.bootstrap.servers=127.0.0.1:9092], ErrorIfExists" in by_column
    assert "THEN events-a ELSE events-b END AS topic#" in by_column
    strategies = {
        "kafka: read subscribe list": "Subscribe[clicks, events-a]",
        "kafka: read subscribePattern": "SubscribePattern[events-.*]",
        "kafka: read assign": "Assign[clicks-0]",
        "kafka: read avro": "Subscribe[orders-avro]",
    }
    for description, strategy in strategies.items():
        execution = root(shape, description)
        plan = execution["physicalPlanDescription"]
        assert f"Scan KafkaRelation(strategy={strategy}, start=EarliestOffsetRangeLimit" in plan
        assert "9092" not in plan
        nested = [
            e
            for e in starts(shape)
            if e["rootExecutionId"] == execution["executionId"]
            and e["executionId"] != execution["executionId"]
        ]
        assert [e["sparkPlanInfo"]["nodeName"] for e in nested] == ["DeserializeToObject"]
    assert "from_avro(value#" in root(shape, "kafka: read avro")["physicalPlanDescription"]


FILE_INDEX = r"InMemoryFileIndex \[file:[\w/]+/(part-\d\.json)\]"
PROGRESS_KEYS = {
    "id",
    "runId",
    "name",
    "timestamp",
    "batchId",
    "batchDuration",
    "durationMs",
    "eventTime",
    "stateOperators",
    "sources",
    "sink",
    "observedMetrics",
}
STREAMS = {  # shape -> (query name, batches, terminated: absent | None | error class)
    "stream_file_parquet": ("file_to_parquet", 2, None),
    "stream_kafka_delta": ("orders_to_delta", 3, None),
    "stream_sigterm": ("ticks_forever", 3, "absent"),
    "stream_failure": ("bad_cast", 1, "CAST_INVALID_INPUT"),
}


@pytest.mark.parametrize("shape", sorted(STREAMS))
def test_streaming_query_lifecycle(shape: str) -> None:
    """QueryStarted, one QueryProgress per finished micro-batch, QueryTerminated (or none)."""
    name, batches, terminated = STREAMS[shape]
    (started,) = of(shape, QUERY_STARTED)
    assert set(started) == {"Event", "id", "runId", "name", "timestamp", "jobTags"}
    assert started["name"] == name
    progress = [e["progress"] for e in of(shape, QUERY_PROGRESS)]
    assert [p["batchId"] for p in progress][:batches] == list(range(batches))
    for p in progress:
        assert set(p) == PROGRESS_KEYS
        assert (p["id"], p["runId"], p["name"]) == (started["id"], started["runId"], name)
        assert "numInputRows" not in p  # only per source
        assert {"description", "startOffset", "endOffset", "numInputRows"} <= set(p["sources"][0])
    ended = of(shape, QUERY_TERMINATED)
    if terminated == "absent":
        assert ended == []
        return
    (end,) = ended
    assert set(end) == {"Event", "id", "runId", "exception", "errorClassOnException"}
    assert (end["id"], end["runId"]) == (started["id"], started["runId"])
    assert end["errorClassOnException"] == terminated
    if terminated:
        assert end["exception"].startswith("org.apache.spark.SparkNumberFormatException: [")
    else:
        assert end["exception"] is None


@pytest.mark.parametrize("shape", sorted(STREAMS))
def test_micro_batch_executions_carry_the_query(shape: str) -> None:
    """Micro-batch executions: description, jobGroupId = runId; jobs: queryId and batchId."""
    (started,) = of(shape, QUERY_STARTED)
    prefix = f"{started['name']}\nid = {started['id']}\nrunId = {started['runId']}\nbatch = "
    batches = [e for e in starts(shape) if e["jobGroupId"] == started["runId"]]
    assert batches
    for execution in batches:
        assert execution["description"].removeprefix("Delta: ").startswith(prefix)
    jobs = [j["Properties"] for j in of(shape, "SparkListenerJobStart")]
    streaming = [p for p in jobs if p.get("sql.streaming.queryId") == started["id"]]
    assert streaming
    for props in streaming:
        assert props["spark.jobGroup.id"] == started["runId"]
        assert props["spark.job.description"].removeprefix("Delta: ").startswith(prefix)
        assert (
            props["spark.job.description"]
            .split("batch = ")[1]
            .startswith(props["streaming.sql.batchId"])
        )


def test_stream_sources_and_sinks_are_in_progress_only() -> None:
    """Sink and Kafka topics appear in progress descriptions; micro-batch plans lack them."""
    file_progress = of("stream_file_parquet", QUERY_PROGRESS)[0]["progress"]
    source = "FileStreamSource[file:/data/lakehouse/data/incoming]"
    assert file_progress["sources"][0]["description"] == source
    assert (
        file_progress["sink"]["description"] == "FileSink[file:/data/lakehouse/data/clicks_parquet]"
    )
    assert file_progress["sink"]["numOutputRows"] == -1
    batches = starts("stream_file_parquet")
    assert all("clicks_parquet" not in e["physicalPlanDescription"] for e in batches)
    read = [re.findall(FILE_INDEX, e["physicalPlanDescription"]) for e in batches]
    assert read == [["part-0.json"], ["part-1.json"]]  # each batch scans only its new files
    kafka = [e["progress"] for e in of("stream_kafka_delta", QUERY_PROGRESS)]
    assert {p["sources"][0]["description"] for p in kafka} == {"KafkaV2[Subscribe[orders]]"}
    assert {p["sink"]["description"] for p in kafka} == {"ForeachBatchSink"}
    offsets = json.loads(kafka[0]["sources"][0]["endOffset"])
    assert set(offsets) == {"orders"}
    assert set(offsets["orders"]) == {"0", "1"}  # partition -> next offset
    assert sum(offsets["orders"].values()) == 3
    assert [p["sources"][0]["numInputRows"] for p in kafka] == [3, 3, 1]
    lag = {"minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest"}
    assert all(set(p["sources"][0]["metrics"]) == lag for p in kafka)
    scans = [e for e in roots("stream_kafka_delta") if e["jobGroupId"]]
    for scan in scans:
        plan = scan["physicalPlanDescription"]
        assert "MicroBatchScan" in plan
        assert "KafkaSourceProvider$KafkaScan" in plan
        assert "orders" not in plan.replace("orders_to_delta", "")
        assert "9092" not in plan


def test_iceberg_stream_names_its_table_in_the_sink_and_the_scan_only() -> None:
    """An Iceberg sink is described by the table's catalog name; an Iceberg source only as
    an object, its table and snapshot in the micro-batch scan and the offsets; no location."""
    shape = "stream_iceberg"
    progress = [e["progress"] for e in of(shape, QUERY_PROGRESS)]
    sink = [p for p in progress if p["name"] == "file_to_iceberg"]
    assert {p["sink"]["description"] for p in sink} == {"lake.db.clicks"}
    assert [p["sink"]["numOutputRows"] for p in sink] == [1, 1]  # counted, unlike a file sink
    (read,) = [p for p in progress if p["name"] == "iceberg_to_parquet"]
    assert re.fullmatch(
        r"org\.apache\.iceberg\.spark\.source\.SparkMicroBatchStream@[0-9a-f]+",
        read["sources"][0]["description"],
    )
    snapshot = json.loads(read["sources"][0]["endOffset"])["snapshot_id"]
    assert (
        snapshot == tables(shape)["/data/lakehouse/iceberg_hadoop/db/clicks"]["current-snapshot-id"]
    )
    batches = [e for e in roots(shape) if e["jobGroupId"]]
    names = [e["description"].split("\n")[0] for e in batches]
    assert names == ["file_to_iceberg", "file_to_iceberg", "iceberg_to_parquet"]
    writes = [e["physicalPlanDescription"] for e in batches[:2]]
    for epoch, write in enumerate(writes):
        assert f"MicroBatchWrite[epoch: {epoch}, writer: IcebergStreamingWrite(" in write
        assert "IcebergStreamingWrite(table=lake.db.clicks, format=PARQUET)" in write
    write = "".join(writes)
    scan = batches[2]["physicalPlanDescription"]
    assert f"IcebergScan(table=lake.db.clicks, schemaId=0, snapshotId={snapshot}," in scan
    assert "iceberg_hadoop" not in write + scan  # the location is nowhere in the plans


def test_foreach_batch_writes_nest_under_the_micro_batch() -> None:
    """A foreachBatch MERGE is a child of the micro-batch execution, one Delta version each."""
    shape = "stream_kafka_delta"
    merges = [
        e for e in starts(shape) if e["sparkPlanInfo"]["nodeName"] == "Execute MergeIntoCommand"
    ]
    assert len(merges) == 3
    by_id = {e["executionId"]: e for e in starts(shape)}
    for version, merge in enumerate(merges):
        parent = by_id[merge["rootExecutionId"]]
        assert parent["executionId"] != merge["executionId"]
        assert parent["description"].endswith(f"batch = {version}")
        assert merge["description"] == parent["description"]
        target = f"Delta[version={version}, file:/data/lakehouse/data/orders_delta]"
        assert target in merge["physicalPlanDescription"]
    ((_, facts),) = tables(shape).items()
    assert [c["operation"] for c in facts["commits"]] == ["CREATE TABLE", "MERGE", "MERGE", "MERGE"]


def test_sigterm_leaves_the_query_unterminated() -> None:
    """After SIGTERM: ApplicationEnd, then the batch's job fails; no QueryTerminated, no end."""
    shape = "stream_sigterm"
    assert of(shape, QUERY_TERMINATED) == []
    ended = {e["executionId"] for e in of(shape, END)}
    unfinished = [e for e in starts(shape) if e["executionId"] not in ended]
    assert len(unfinished) == 1
    failed = [
        j["Job Result"]["Exception"]["Message"]
        for j in of(shape, "SparkListenerJobEnd")
        if j["Job Result"]["Result"] == "JobFailed"
    ]
    assert len(failed) == 1
    shutdown = (  # the job is cancelled, or its tasks cannot be serialized any more
        "cancelled because SparkContext was shut down",
        "Task serialization failed: java.lang.IllegalStateException: "
        "Cannot call methods on a stopped SparkContext.",
    )
    assert any(reason in failed[0] for reason in shutdown), failed[0][:200]
    order = [e["Event"] for e in events(shape)]
    last_job_end = len(order) - 1 - order[::-1].index("SparkListenerJobEnd")
    assert order.index("SparkListenerApplicationEnd") < last_job_end  # ends after the app
    assert [e.get("ExitCode") for e in of(shape, "SparkListenerApplicationEnd")] == [0]
    rate = of(shape, QUERY_PROGRESS)[0]["progress"]["sources"][0]["description"]
    assert rate.startswith("RateStreamV2[rowsPerSecond=5")


def test_failed_micro_batch_ends_with_the_error() -> None:
    """The failing batch's execution ends with Spark's message; no progress is posted for it."""
    shape = "stream_failure"
    errors = [e["errorMessage"] for e in of(shape, END)]
    assert errors[0] == ""
    assert errors[1].startswith("[CAST_INVALID_INPUT] The value 'three'")
    assert [e["progress"]["batchId"] for e in of(shape, QUERY_PROGRESS)] == [0]
