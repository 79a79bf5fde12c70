"""What the agent reports for Delta Lake, Iceberg and Kafka batch statements, replayed from
the checked-in real logs (tests/data/eventlogs/lakehouse, see its NOTES.md).

Each log goes through `ApplicationLog` (the step the daemon's source and `replay` share),
every event is validated against the official schemas, and the assertions name runs, event
types, datasets, symlinks, versions, lifecycle changes, schema fields and column lineage.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import zstandard

from agent.spark.application import ApplicationLog
from agent.spark.eventlog.layout import scan
from agent.spark.plan.schema import Field
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.versions import SchemaSource, TableFormat
from tests.olschema import validate_run_event

LOGS = Path(__file__).resolve().parent / "data" / "eventlogs" / "lakehouse"
Event = dict[str, Any]


class RecordedVersions:
    """The versions `<shape>.tables.json` lists, handed out in commit order per table.

    A stand-in for reading the tables' metadata on disk (the tables themselves are not
    checked in, only what their metadata said after the job): the i-th COMPLETE write of a
    table gets its i-th commit, which holds for these logs (one commit per statement).
    `tests/test_tablemeta.py` and the live test read real metadata files instead."""

    def __init__(self, shape: str) -> None:
        path = LOGS / f"{shape}.tables.json"
        tables = json.loads(path.read_text()) if path.exists() else {}
        self.left: dict[str, list[str]] = {
            table: [str(c["version"]) for c in meta.get("commits", [])]
            + [str(s["snapshot-id"]) for s in meta.get("snapshots", [])]
            for table, meta in tables.items()
            if isinstance(meta, dict)  # not the JDBC catalog's rows
        }
        self.windows: dict[str, list[tuple[int, int]]] = defaultdict(list)

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        self.windows[path].append((start_ms, end_ms))
        left = self.left.get(path)
        return left.pop(0) if left else None

    def schema(self, fmt: SchemaSource, path: str, version: str | None) -> tuple[Field, ...] | None:
        return None  # `<shape>.tables.json` has no schemas: tests/test_schemas.py reads them


_WORK: list[Path] = []  # the module's scratch directory, set by the `work` fixture


@pytest.fixture(scope="module", autouse=True)
def work(tmp_path_factory: pytest.TempPathFactory) -> None:
    _WORK.append(tmp_path_factory.mktemp("lakehouse"))
    replayed.cache_clear()


@functools.cache
def replayed(
    shape: str, kafka_bootstrap: str | None = None, *, emit_read_only_runs: bool = False
) -> tuple[list[Event], list[str], RecordedVersions]:
    """The events and warnings of one checked-in log, replayed through `ApplicationLog`."""
    directory = _WORK[-1] / f"{shape}-{kafka_bootstrap or 'default'}-{emit_read_only_runs}"
    directory.mkdir()
    target = directory / "local-1700000000000"  # a name Spark could give a log
    raw = (LOGS / f"{shape}.jsonl.zst").read_bytes()
    target.write_bytes(zstandard.ZstdDecompressor().decompressobj().decompress(raw))
    (ref,) = scan(directory)
    options = TranslateOptions(
        namespace="lake", kafka_bootstrap=kafka_bootstrap, emit_read_only_runs=emit_read_only_runs
    )
    versions = RecordedVersions(shape)
    log = ApplicationLog(ref, options, max_line_bytes=64 << 20, table_metadata=versions)
    events: list[Event] = []
    warnings: list[str] = []
    while True:
        batch = log.read()
        events += log.feed(batch)
        log.fill_table_metadata()
        warnings += log.take_warnings()
        if log.reader.caught_up:
            break
    log.close()
    return events, warnings, versions


def completed(shape: str, **options: Any) -> list[Event]:
    """The COMPLETE events of the statements' runs, in order (not the application's)."""
    events, _, _ = replayed(shape, **options)
    return [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and e["job"]["name"] != f"lakehouse_{shape}"
    ]


def dataset(d: dict[str, Any]) -> tuple[Any, ...]:
    """(namespace, name, version, lifecycle change, symlink names, schema fields)."""
    facets = d.get("facets", {})
    return (
        d["namespace"],
        d["name"],
        facets.get("version", {}).get("datasetVersion"),
        facets.get("lifecycleStateChange", {}).get("lifecycleStateChange"),
        tuple(i["name"] for i in facets.get("symlinks", {}).get("identifiers", [])),
        tuple(f["name"] for f in facets.get("schema", {}).get("fields", [])),
    )


def runs(
    shape: str, **options: Any
) -> list[tuple[str, list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """Each statement's job (without the application prefix), inputs and outputs."""
    return [
        (
            e["job"]["name"].split(".", 1)[1],
            [dataset(d) for d in e["inputs"]],
            [dataset(d) for d in e["outputs"]],
        )
        for e in completed(shape, **options)
    ]


def lineage(event: Event, output: int = 0) -> dict[str, set[tuple[str, str, str]]]:
    """Output field -> {(input dataset name, field, subtype)}; `*` holds the dataset level."""
    facet = event["outputs"][output]["facets"]["columnLineage"]
    found = {
        name: {
            (i["name"], i["field"], i["transformations"][0]["subtype"]) for i in f["inputFields"]
        }
        for name, f in facet["fields"].items()
    }
    found["*"] = {
        (i["name"], i["field"], i["transformations"][0]["subtype"])
        for i in facet.get("dataset", [])
    }
    return found


SHAPES = ("delta_path", "delta_catalog", "iceberg_hadoop", "iceberg_jdbc", "kafka_batch")
DELTA = "/data/lakehouse/data/delta_events"
SALES = "/data/lakehouse/warehouse/sales"
ORDERS = "/data/lakehouse/iceberg_hadoop/db/orders"
PATH_COLUMNS = ("id", "name", "amount")
SALES_COLUMNS = ("id", "region", "amount")
ORDER_COLUMNS = ("id", "status", "amount")


@pytest.mark.parametrize("shape", SHAPES)
def test_every_event_is_schema_valid_and_runs_are_paired(shape: str) -> None:
    """Every event validates; each run has one START then one COMPLETE; nothing failed."""
    events, _, _ = replayed(shape)
    by_run: dict[str, list[str]] = defaultdict(list)
    for event in events:
        validate_run_event(event)
        by_run[event["run"]["runId"]].append(event["eventType"])
    assert all(types == ["START", "COMPLETE"] for types in by_run.values()), by_run


@pytest.mark.parametrize("shape", SHAPES)
def test_format_internals_are_no_runs_and_no_datasets(shape: str) -> None:
    """Delta's log replay, snapshot and file-pruning executions add neither runs nor
    `_delta_log` datasets; every statement's run has a dataset of its table."""
    events, warnings, _ = replayed(shape)
    names = [d["name"] for e in events for d in (*e["inputs"], *e["outputs"])]
    assert not [n for n in names if "_delta_log" in n or n.endswith("...")]
    jobs = {e["job"]["name"] for e in events}
    assert not [j for j in jobs if "local_table_scan" in j or "whole_stage" in j]
    assert not [w for w in warnings if "unrecognized" in w], warnings


def test_delta_path_table() -> None:
    """Path table: create / append / overwrite / MERGE x2 / UPDATE / DELETE / time travel."""
    table = ("file", DELTA)
    write = "execute_save_into_data_source_command.data_delta_events"
    assert runs("delta_path") == [
        (write, [], [(*table, "0", "CREATE", (), ())]),
        (write, [], [(*table, "1", None, (), ())]),
        (write, [], [(*table, "2", "OVERWRITE", (), ())]),
        (
            "execute_merge_into_command.data_delta_events",
            [(*table, "2", None, (), PATH_COLUMNS)],
            [(*table, "3", None, (), PATH_COLUMNS)],
        ),
        (  # the same statement through SQL: another step, so another name
            "execute_merge_into_command.data_delta_events_2",
            [(*table, "3", None, (), PATH_COLUMNS)],
            [(*table, "4", None, (), PATH_COLUMNS)],
        ),
        (
            "execute_update_command.data_delta_events",
            [(*table, "4", None, (), PATH_COLUMNS)],
            [(*table, "5", None, (), PATH_COLUMNS)],
        ),
        (
            "execute_delete_command.data_delta_events",
            [(*table, "5", None, (), PATH_COLUMNS)],  # its nested snapshot computation
            [(*table, "6", None, (), PATH_COLUMNS)],
        ),
        (
            "execute_insert_into_hadoop_fs_relation_command.data_events_v1",
            [(*table, "1", None, (), PATH_COLUMNS)],  # versionAsOf 1
            [("file", "/data/lakehouse/data/events_v1", None, "OVERWRITE", (), PATH_COLUMNS)],
        ),
    ]


def test_delta_merge_update_delete_column_lineage() -> None:
    """MERGE: every column keeps its own values and takes what the clauses assign (here
    from a generated source, no dataset); the merge and clause conditions are CONDITIONAL.
    UPDATE: the changed column is a TRANSFORMATION; DELETE: its condition FILTERs."""
    merge, merge_sql, update, delete = completed("delta_path")[3:7]
    own = {c: {(DELTA, c, "IDENTITY")} for c in PATH_COLUMNS}
    assert lineage(merge) == {**own, "*": {(DELTA, "id", "CONDITIONAL")}}
    assert lineage(merge_sql) == {**own, "*": {(DELTA, "id", "CONDITIONAL")}}
    assert "lineageAgent_truncation" not in merge["outputs"][0]["facets"]
    assert lineage(update) == {
        "id": {(DELTA, "id", "IDENTITY")},
        "name": {(DELTA, "name", "IDENTITY")},
        "amount": {(DELTA, "amount", "TRANSFORMATION")},  # the stronger of the two
        "*": {(DELTA, "id", "CONDITIONAL")},
    }
    assert lineage(delete) == {**own, "*": {(DELTA, "id", "FILTER")}}


def test_delta_catalog_tables() -> None:
    """Catalog tables: location from the log or `spark.sql.warehouse.dir`, the catalog name
    in `symlinks`, CREATE for CREATE TABLE and CTAS (LOCATION kept), OVERWRITE for INSERT
    OVERWRITE, versions from the table's commits."""
    sales = ("file", SALES)
    found = runs("delta_catalog")
    assert [job for job, _, _ in found] == [
        "create_table.default_sales",
        "append_data_exec_v1.default_sales",
        "append_data_exec_v1.default_sales_2",  # saveAsTable after INSERT: another step
        "atomic_create_table_as_select.default_sales_eu",
        "atomic_create_table_as_select.default_sales_by_region",
        "overwrite_by_expression_exec_v1.default_sales_eu",
        "execute_merge_into_command.default_sales",
        "execute_update_command.default_sales",
        "execute_delete_command.default_sales",
        "atomic_create_table_as_select.default_sales_ext",
        "atomic_create_table_as_select.default_sales_v1",
    ]
    outputs = [o for _, _, outs in found for o in outs]
    assert outputs == [
        (*sales, "0", "CREATE", ("default.sales",), SALES_COLUMNS),
        (*sales, "1", None, ("default.sales",), SALES_COLUMNS),
        (*sales, "2", None, ("default.sales",), SALES_COLUMNS),
        ("file", f"{SALES}_eu", "0", "CREATE", ("default.sales_eu",), ()),  # a bare Filter
        (
            "file",
            f"{SALES}_by_region",
            "0",
            "CREATE",
            ("default.sales_by_region",),
            ("region", "total"),
        ),
        ("file", f"{SALES}_eu", "1", "OVERWRITE", ("default.sales_eu",), SALES_COLUMNS),
        (*sales, "3", None, ("default.sales",), SALES_COLUMNS),
        (*sales, "4", None, ("default.sales",), SALES_COLUMNS),
        (*sales, "5", None, ("default.sales",), SALES_COLUMNS),
        (
            "file",
            "/data/lakehouse/data/external_sales",
            "0",
            "CREATE",
            ("default.sales_ext",),
            SALES_COLUMNS,
        ),
        ("file", f"{SALES}_v1", "0", "CREATE", ("default.sales_v1",), SALES_COLUMNS),
    ]
    symlink = completed("delta_catalog")[0]["outputs"][0]["facets"]["symlinks"]["identifiers"]
    assert symlink == [
        {"namespace": "file:/data/lakehouse/warehouse", "name": "default.sales", "type": "TABLE"}
    ]
    merge_input = found[6][1]
    assert merge_input == [(*sales, "2", None, ("default.sales",), SALES_COLUMNS)]
    time_travel = found[10][1]  # CTAS from VERSION AS OF 1
    assert time_travel == [(*sales, "1", None, ("default.sales",), SALES_COLUMNS)]


def test_delta_catalog_merge_lineage_resolves_the_target_in_other_executions() -> None:
    """The MERGE's actions name target attributes defined only in Delta's 'scanning files
    for matches' execution: they resolve to the table's own fields there."""
    merge = completed("delta_catalog")[6]
    own = {c: {(SALES, c, "IDENTITY")} for c in SALES_COLUMNS}
    assert lineage(merge) == {**own, "*": {(SALES, "id", "CONDITIONAL")}}


@pytest.mark.parametrize("shape", ["iceberg_hadoop", "iceberg_jdbc"])
def test_iceberg_tables(shape: str) -> None:
    """Iceberg: tables at `<warehouse>/<ns>/<table>` of their catalog; snapshots read from
    the scans, snapshots committed from the table's metadata; MERGE / UPDATE / DELETE
    rewrite the table they read. A CREATE or CTAS names no catalog and two Iceberg catalogs
    are configured: its table's location stays unknown (namespace `unknown`)."""
    orders = ("file", f"/data/lakehouse/{shape}/db/orders")
    tables = json.loads((LOGS / f"{shape}.tables.json").read_text())
    snapshots = [str(s["snapshot-id"]) for s in tables[orders[1]]["snapshots"]]
    found = runs(shape)
    assert found[0] == (
        "create_table.db_orders",
        [],
        [("unknown", "db.orders", None, "CREATE", ("db.orders",), ORDER_COLUMNS)],
    )
    appends = [outs for job, _, outs in found if job.startswith("append_data.db_orders")]
    assert appends == [
        [(*orders, snapshots[0], None, ("db.orders",), ORDER_COLUMNS)],
        [(*orders, snapshots[1], None, ("db.orders",), ORDER_COLUMNS)],
    ]
    statements = ("merge_into_table", "update_table", "delete_from_table")
    rewrites = [(ins, outs) for job, ins, outs in found if job.split(".")[0] in statements]
    assert [job for job, _, _ in found if job.split(".")[0] in statements] == [
        f"{statement}.db_orders" for statement in statements
    ]
    assert rewrites == [
        (
            [(*orders, snapshots[i], None, ("db.orders",), ORDER_COLUMNS)],
            [(*orders, snapshots[i + 1], None, ("db.orders",), ORDER_COLUMNS)],
        )
        for i in (1, 2, 3)
    ]
    overwrite = next(
        outs for job, _, outs in found if job == "overwrite_by_expression.db_order_totals"
    )
    assert overwrite[0][:4] == (
        "file",
        f"/data/lakehouse/{shape}/db/order_totals",
        overwrite[0][2],
        "OVERWRITE",
    )


def test_iceberg_time_travel_and_metadata_table() -> None:
    """`VERSION AS OF <snapshot>` reads that snapshot; `.snapshots` (a read-only `collect`,
    emitted when read-only runs are) reads the table."""
    found = dict((job, ins) for job, ins, _ in runs("iceberg_hadoop", emit_read_only_runs=True))
    at = found["execute_insert_into_hadoop_fs_relation_command.data_orders_at_snapshot"]
    assert at == [("file", ORDERS, "8844406054869799580", None, ("db.orders",), ORDER_COLUMNS)]
    assert found["collect.db_orders"] == [("file", ORDERS, None, None, ("db.orders",), ())]


def test_iceberg_merge_column_lineage_through_merge_rows() -> None:
    """Iceberg's MergeRows assigns by position: each column from the target's own (copied
    rows) and the source's (a local relation here, no dataset); row metadata (`_file`,
    `_pos`, `__row_operation`) is no column."""
    merge = completed("iceberg_hadoop")[3]
    found = lineage(merge)
    assert set(found) == {"id", "status", "amount", "*"}
    for column in ORDER_COLUMNS:
        assert (ORDERS, column, "IDENTITY") in found[column]
    update = completed("iceberg_hadoop")[4]
    assert (ORDERS, "amount", "TRANSFORMATION") in lineage(update)["amount"]
    assert (ORDERS, "status", "CONDITIONAL") in lineage(update)["amount"]


def test_kafka_batch_reads_and_writes() -> None:
    """Writes: `kafka://<first bootstrap server>`, the topic option; a topic column names
    no topic. Reads: `subscribe` lists, `assign` partitions by topic, a pattern as written;
    their servers are `kafka://unknown` unless configured."""
    found = runs("kafka_batch")
    assert [outs for _, _, outs in found[:3]] == [
        [("kafka://127.0.0.1:9092", "clicks", None, None, (), ())],
        [("unknown", "SaveIntoDataSourceCommand", None, None, (), ())],
        [("kafka://127.0.0.1:9092", "orders-avro", None, None, (), ())],
    ]
    assert [[(ns, name) for ns, name, *_ in ins] for _, ins, _ in found[3:]] == [
        [("kafka://unknown", "clicks"), ("kafka://unknown", "events-a")],
        [("kafka://unknown", "events-.*")],
        [("kafka://unknown", "clicks")],
        [("kafka://unknown", "orders-avro")],
    ]
    configured = runs("kafka_batch", kafka_bootstrap="broker-1:9093,broker-2:9093")
    assert {ns for _, ins, _ in configured[3:] for ns, *_ in ins} == {"kafka://broker-1:9093"}
    _, warnings, _ = replayed("kafka_batch")
    assert (
        "Kafka save without a topic option: the topics are a column of its rows in execution 1"
        in warnings
    )


def test_versions_are_asked_within_each_run() -> None:
    """Each committed version is asked for with its run's own window (START to COMPLETE),
    once per write, the windows of one table in order and apart."""
    events, _, versions = replayed("delta_path")
    assert len(versions.windows[DELTA]) == 7
    starts = {e["run"]["runId"]: e["eventTime"] for e in events if e["eventType"] == "START"}
    assert len(starts) == 9
    windows = versions.windows[DELTA]
    assert all(start <= end for start, end in windows)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(windows))


def test_delta_create_table_by_path() -> None:
    """`CREATE TABLE delta.`<path>``: the path is the dataset (version 0), no catalog table."""
    create = completed("stream_kafka_delta")[0]
    assert [dataset(d) for d in create["outputs"]] == [
        (
            "file",
            "/data/lakehouse/data/orders_delta",
            "0",
            "CREATE",
            (),
            ("id", "body", "kafka_offset"),
        )
    ]


def test_delta_ctas_and_v1_fallback_writes_have_column_lineage() -> None:
    """A CTAS or an INSERT whose query runs as a nested execution (Delta's V1 fallback): its
    columns are the query's output, resolved to the fields that execution reads."""
    found = completed("delta_catalog")
    by_region, overwrite = found[4], found[5]
    assert lineage(by_region) == {
        "region": {(SALES, "region", "IDENTITY")},
        "total": {(SALES, "amount", "AGGREGATION")},
        "*": set(),
    }
    # the nested query's own filters are not carried over: only its columns' sources are
    assert lineage(overwrite) == {
        **{c: {(SALES, c, "IDENTITY")} for c in SALES_COLUMNS},
        "*": set(),
    }
