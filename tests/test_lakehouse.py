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

from agent.spark.plan.datasets import SchemaSource, TableFormat
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.touched.read import read_plan, returned_rows
from agent.spark.translate.options import TranslateOptions
from tests.applog import read_through, staged, unpacked
from tests.olschema import validate_run_event

LOGS = Path(__file__).resolve().parent / "data" / "eventlogs" / "lakehouse"
Event = dict[str, Any]


class RecordedVersions:
    """The versions `<shape>.tables.json` lists, handed out in commit order per table, and
    the tables it lists as the ones on disk.

    A stand-in for reading the tables' metadata on disk (the tables themselves are not
    checked in, only what their metadata said after the job): the i-th COMPLETE write of a
    table gets its i-th commit, which holds for these logs (one commit per statement; an
    Iceberg metadata file without a snapshot of its own is a CREATE TABLE's, the first).
    `tests/test_tablemeta.py` and the live test read real metadata files instead."""

    def __init__(self, shape: str) -> None:
        path = LOGS / f"{shape}.tables.json"
        tables = json.loads(path.read_text()) if path.exists() else {}
        self.left: dict[str, list[str | None]] = {
            table: [str(c["version"]) for c in meta.get("commits", [])]
            + [None] * (len(meta.get("metadata_files", [])) - len(meta.get("snapshots", [])))
            + [str(s["snapshot-id"]) for s in meta.get("snapshots", [])]
            for table, meta in tables.items()
            if isinstance(meta, dict)  # not the JDBC catalog's rows
        }
        self.windows: dict[str, list[tuple[int, int]]] = defaultdict(list)

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        self.windows[path].append((start_ms, end_ms))
        left = self.left.get(path)
        return left.pop(0) if left else None

    def exists(self, fmt: TableFormat, path: str) -> bool:
        return path in self.left

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
    ref = staged(directory, unpacked(LOGS / f"{shape}.jsonl.zst"))
    options = TranslateOptions(
        namespace="lake", kafka_bootstrap=kafka_bootstrap, emit_read_only_runs=emit_read_only_runs
    )
    versions = RecordedVersions(shape)
    events, warnings = read_through(ref, options, table_metadata=versions)
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


SHAPES = (
    "delta_path",
    "delta_catalog",
    "iceberg_hadoop",
    "iceberg_jdbc",
    "kafka_batch",
    "delta_merge_window",
)
DELTA = "/data/lakehouse/data/delta_events"
SALES = "/data/lakehouse/warehouse/sales"
ORDERS = "/data/lakehouse/iceberg_hadoop/db/orders"
PATH_COLUMNS = ("id", "name", "amount")
SALES_COLUMNS = ("id", "region", "amount")
ORDER_COLUMNS = ("id", "status", "amount")
#: The columns of `orders` its writes type without the table's metadata (no schema facet
#: field goes untyped): the INSERT's `id#9L`; a MERGE, UPDATE or DELETE's cast `amount` too.
#: `status` is typed only by the CREATE, whose target names no catalog.
APPENDED_COLUMNS = ("id",)
REWRITTEN_COLUMNS = ("id", "amount")


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
        (write, [], [(*table, "0", "CREATE", (), PATH_COLUMNS)]),  # the nested query's
        (write, [], [(*table, "1", None, (), PATH_COLUMNS)]),
        (write, [], [(*table, "2", "OVERWRITE", (), PATH_COLUMNS)]),
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


STOCK = "/data/lakehouse/warehouse/stock"
COUNTS = "/data/lakehouse/data/stock_counts"


def test_delta_merge_from_a_window_deduplicated_view_reaches_the_source() -> None:
    """A MERGE from the latest row per key of a JSON feed: the source's columns and the
    date derived from its timestamp reach the target's columns, through a SQL view whose
    aliases Spark optimized away (matched by the materialized source's scans) as through
    the Python API; conditions read both sides, and the window picks the source's rows."""
    by_view, by_api = completed("delta_merge_window")[2:4]
    for merge in (by_view, by_api):
        assert [(d["namespace"], d["name"]) for d in merge["inputs"]] == [
            ("file", STOCK),
            ("file", COUNTS),
        ]
    own = {c: {(STOCK, c, "IDENTITY")} for c in ("item", "qty", "depot", "count_day")}
    # the latest row per item: the window's partition and order decide which rows exist
    latest = {(COUNTS, "counted_at", "FILTER")}  # and item (below)
    assert lineage(by_view) == {
        "item": own["item"] | {(COUNTS, "item", "IDENTITY")},
        "qty": own["qty"] | {(COUNTS, "qty", "IDENTITY")},
        "depot": own["depot"] | {(COUNTS, "depot", "IDENTITY")},
        "count_day": own["count_day"] | {(COUNTS, "counted_at", "TRANSFORMATION")},
        "*": {
            (STOCK, "item", "CONDITIONAL"),
            (COUNTS, "item", "CONDITIONAL"),
            (STOCK, "qty", "CONDITIONAL"),
            (COUNTS, "qty", "CONDITIONAL"),
            *latest,
        },
    }
    assert lineage(by_api) == {
        "item": own["item"] | {(COUNTS, "item", "IDENTITY")},
        "qty": own["qty"] | {(COUNTS, "qty", "TRANSFORMATION")},
        "depot": own["depot"] | {(COUNTS, "depot", "IDENTITY")},
        "count_day": own["count_day"] | {(COUNTS, "counted_at", "TRANSFORMATION")},
        "*": {(STOCK, "item", "CONDITIONAL"), (COUNTS, "item", "CONDITIONAL"), *latest},
    }
    assert "lineageAgent_truncation" not in by_view["outputs"][0]["facets"]
    for merge in (by_view, by_api):
        (item,) = [
            [t["subtype"] for t in f["transformations"]]
            for f in merge["outputs"][0]["facets"]["columnLineage"]["dataset"]
            if (f["name"], f["field"]) == (COUNTS, "item")
        ]
        assert item == ["CONDITIONAL", "FILTER"]


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
        ("file", f"{SALES}_eu", "0", "CREATE", ("default.sales_eu",), SALES_COLUMNS),
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
    rewrite the table they read."""
    orders = ("file", f"/data/lakehouse/{shape}/db/orders")
    tables = json.loads((LOGS / f"{shape}.tables.json").read_text())
    snapshots = [str(s["snapshot-id"]) for s in tables[orders[1]]["snapshots"]]
    found = runs(shape)
    assert found[0] == (
        "create_table.db_orders",
        [],
        [(*orders, None, "CREATE", ("db.orders",), ORDER_COLUMNS)],
    )
    appends = [outs for job, _, outs in found if job.startswith("append_data.db_orders")]
    assert appends == [
        [(*orders, snapshots[0], None, ("db.orders",), APPENDED_COLUMNS)],
        [(*orders, snapshots[1], None, ("db.orders",), APPENDED_COLUMNS)],
    ]
    statements = ("merge_into_table", "update_table", "delete_from_table")
    rewrites = [(ins, outs) for job, ins, outs in found if job.split(".")[0] in statements]
    assert [job for job, _, _ in found if job.split(".")[0] in statements] == [
        f"{statement}.db_orders" for statement in statements
    ]
    assert rewrites == [
        (
            [(*orders, snapshots[i], None, ("db.orders",), REWRITTEN_COLUMNS)],
            [(*orders, snapshots[i + 1], None, ("db.orders",), REWRITTEN_COLUMNS)],
        )
        for i in (1, 2, 3)
    ]
    order_totals = f"/data/lakehouse/{shape}/db/order_totals"
    totals = [str(s["snapshot-id"]) for s in tables[order_totals]["snapshots"]]
    overwrite = next(
        outs for job, _, outs in found if job == "overwrite_by_expression.db_order_totals"
    )
    assert overwrite[0][:4] == ("file", order_totals, totals[1], "OVERWRITE")


@pytest.mark.parametrize("shape", ["iceberg_hadoop", "iceberg_jdbc"])
def test_iceberg_create_targets_placed_by_their_metadata(shape: str) -> None:
    """CREATE TABLE and CTAS print no catalog (`SparkCatalog@hash, db.orders`) and two
    Iceberg catalogs are configured: the target is the one catalog's `<warehouse>/<ns>/
    <table>` that holds Iceberg metadata, in every event of the run, with that catalog's
    warehouse as symlink namespace and a CTAS's committed snapshot."""
    events, _, _ = replayed(shape)
    tables = json.loads((LOGS / f"{shape}.tables.json").read_text())
    creates = [
        e
        for e in events
        if e["job"]["name"].split(".")[1:2] in (["create_table"], ["atomic_create_table_as_select"])
    ]
    assert len(creates) == {"iceberg_hadoop": 8, "iceberg_jdbc": 4}[shape]
    for event in creates:
        ((name, link, version),) = [
            (
                (d["namespace"], d["name"]),
                d["facets"]["symlinks"]["identifiers"][0]["namespace"],
                d["facets"].get("version", {}).get("datasetVersion"),
            )
            for d in event["outputs"]
        ]
        table = event["job"]["name"].rsplit(".", 1)[1].removeprefix("db_")
        assert name == ("file", f"/data/lakehouse/{shape}/db/{table}")
        assert link == f"file:/data/lakehouse/{shape}"
        assert event["outputs"][0]["facets"]["dataSource"]["name"] == "file"
        committed = tables[name[1]]["snapshots"][0]["snapshot-id"]
        ctas = event["eventType"] == "COMPLETE" and table != "orders"
        assert version == (str(committed) if ctas else None)


class GoneAfterFirstLook(RecordedVersions):
    """Each table is on disk when first asked for, gone after (dropped since)."""

    def __init__(self, shape: str) -> None:
        super().__init__(shape)
        self.looked: set[str] = set()

    def exists(self, fmt: TableFormat, path: str) -> bool:
        first = path not in self.looked
        self.looked.add(path)
        return first and path in self.left


def replay_with(
    shape: str, versions: RecordedVersions, name: str, *, apart: bool = False
) -> list[Event]:
    """The events of a checked-in log replayed with `versions` as the tables on disk; with
    `apart`, the tables are looked at after each record, not after each read."""
    ref = staged(_WORK[-1] / name, unpacked(LOGS / f"{shape}.jsonl.zst"))
    options = TranslateOptions(namespace="lake")
    events, _ = read_through(ref, options, table_metadata=versions, apart=apart)
    for event in events:
        validate_run_event(event)
    return events


def test_iceberg_create_target_placed_where_it_was_seen() -> None:
    """A table gone from disk since the agent found it (a DROP, a later replay) is named
    where the application's earlier events found it: START and COMPLETE agree."""
    # a line at a time: START and COMPLETE are filled apart, as a daemon may read them
    events = replay_with("iceberg_hadoop", GoneAfterFirstLook("iceberg_hadoop"), "gone", apart=True)
    create = [e for e in events if e["job"]["name"].endswith(".create_table.db_orders")]
    assert [(e["eventType"], *dataset(e["outputs"][0])[:2]) for e in create] == [
        ("START", "file", "/data/lakehouse/iceberg_hadoop/db/orders"),
        ("COMPLETE", "file", "/data/lakehouse/iceberg_hadoop/db/orders"),
    ]


class MadeAtCommit(RecordedVersions):
    """Each table is on disk from the second look on: Spark writes a CREATE's metadata at
    its commit, after the daemon read the statement's start."""

    def __init__(self, shape: str) -> None:
        super().__init__(shape)
        self.looked: set[str] = set()

    def exists(self, fmt: TableFormat, path: str) -> bool:
        seen_before = path in self.looked
        self.looked.add(path)
        return seen_before and path in self.left


def test_iceberg_create_target_not_there_yet_is_left_out_of_the_start() -> None:
    """A START read before its table's metadata exists leaves the CREATE target out (never
    `unknown:db.orders` beside the real name); the COMPLETE names it where it then is."""
    events = replay_with("iceberg_hadoop", MadeAtCommit("iceberg_hadoop"), "made", apart=True)
    create = [e for e in events if e["job"]["name"].endswith(".create_table.db_orders")]
    assert [(e["eventType"], [dataset(d)[:2] for d in e["outputs"]]) for e in create] == [
        ("START", []),
        ("COMPLETE", [("file", "/data/lakehouse/iceberg_hadoop/db/orders")]),
    ]


class NowhereOrEverywhere(RecordedVersions):
    """Tables on disk under every catalog's warehouse (`everywhere`) or under none."""

    def __init__(self, shape: str, *, everywhere: bool) -> None:
        super().__init__(shape)
        self.everywhere = everywhere

    def exists(self, fmt: TableFormat, path: str) -> bool:
        return self.everywhere


@pytest.mark.parametrize("everywhere", [False, True])
def test_iceberg_create_target_unplaced_stays_unknown(everywhere: bool) -> None:
    """A CREATE target whose table no catalog's warehouse holds, or every one does, stays
    `unknown:db.orders` with its schema, symlink and lifecycle change."""
    versions = NowhereOrEverywhere("iceberg_hadoop", everywhere=everywhere)
    events = replay_with("iceberg_hadoop", versions, f"unplaced-{everywhere}")
    create = [e for e in events if e["job"]["name"].endswith(".create_table.db_orders")]
    assert [(e["eventType"], [dataset(d) for d in e["outputs"]]) for e in create] == [
        ("START", []),  # not known yet: left out rather than named `unknown`
        ("COMPLETE", [("unknown", "db.orders", None, "CREATE", ("db.orders",), ORDER_COLUMNS)]),
    ]


def test_iceberg_time_travel_and_metadata_table() -> None:
    """`VERSION AS OF <snapshot>` reads that snapshot; `.snapshots` (a read-only `collect`,
    emitted when read-only runs are) reads the table."""
    found = dict((job, ins) for job, ins, _ in runs("iceberg_hadoop", emit_read_only_runs=True))
    at = found["execute_insert_into_hadoop_fs_relation_command.data_orders_at_snapshot"]
    assert at == [("file", ORDERS, "8844406054869799580", None, ("db.orders",), REWRITTEN_COLUMNS)]
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


KAFKA = "kafka://127.0.0.1:9092"
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def test_kafka_batch_reads_and_writes() -> None:
    """Writes: `kafka://<first bootstrap server>`, the topic option, else each literal topic
    of the `topic` column, with the columns written as the topic stores them. Reads:
    `subscribe` lists, `assign` partitions by topic, a pattern as written; on the servers the
    application's earlier Kafka writes name."""
    found = runs("kafka_batch")
    written = ("value", "topic")
    assert [(job, outs) for job, _, outs in found[:3]] == [
        (
            "execute_save_into_data_source_command.clicks",
            [(KAFKA, "clicks", None, None, (), ("key", "value"))],
        ),
        (
            "execute_save_into_data_source_command.events-a",
            [
                (KAFKA, "events-a", None, None, (), written),
                (KAFKA, "events-b", None, None, (), written),
            ],
        ),
        (
            "execute_save_into_data_source_command.orders-avro",
            [(KAFKA, "orders-avro", None, None, (), ("value",))],
        ),
    ]
    read = [[(ns, name, fields) for ns, name, _, _, _, fields in ins] for _, ins, _ in found[3:]]
    # events-a and orders-avro were written with `value` (and `topic`): a read lists the
    # columns known of its topic first
    after_write = ("value", "topic", "key", "partition", "offset", "timestamp", "timestampType")
    assert read == [
        [(KAFKA, "clicks", KAFKA_COLUMNS), (KAFKA, "events-a", after_write)],
        [(KAFKA, "events-.*", KAFKA_COLUMNS)],
        [(KAFKA, "clicks", KAFKA_COLUMNS)],
        [(KAFKA, "orders-avro", ("value", *[c for c in KAFKA_COLUMNS if c != "value"]))],
    ]
    _, warnings, _ = replayed("kafka_batch")
    assert not [w for w in warnings if "Kafka" in w]


def test_kafka_reads_name_the_configured_servers_first() -> None:
    """`spark.kafka_bootstrap`, when set, names the servers of reads before any write does."""
    configured = runs("kafka_batch", kafka_bootstrap="broker-1:9093,broker-2:9093")
    assert {ns for _, ins, _ in configured[3:] for ns, *_ in ins} == {"kafka://broker-1:9093"}
    assert {ns for _, _, outs in configured[:3] for ns, *_ in outs} == {KAFKA}


def test_kafka_pattern_read_is_marked_a_pattern() -> None:
    """A `subscribePattern` read is named by its pattern and carries a schema-valid
    `lineageAgent_topicPattern` facet; a topic named in full carries none."""
    found = completed("kafka_batch")
    (pattern,) = found[4]["inputs"]
    facet = pattern["facets"]["lineageAgent_topicPattern"]
    assert (pattern["name"], facet["pattern"]) == ("events-.*", "events-.*")
    assert facet["_schemaURL"].endswith(
        "/lineageAgent_topicPattern.json#/$defs/TopicPatternDatasetFacet"
    )
    marked = [
        d["name"] for e in found for d in e["inputs"] if "lineageAgent_topicPattern" in d["facets"]
    ]
    assert marked == ["events-.*"]
    for event in found:
        validate_run_event(event)


def test_kafka_read_before_any_write_naming_servers_stays_unknown() -> None:
    """Without the log's Kafka writes (the same log with their executions left out) nothing
    names the servers of the reads: `kafka://unknown`, and a warning says why, once per
    read."""
    events, warnings = replayed_without("kafka_batch", _KAFKA_WRITES)
    reads = [e for e in events if e["eventType"] == "COMPLETE" and e["inputs"]]
    assert [[(d["namespace"], d["name"]) for d in e["inputs"]] for e in reads] == [
        [("kafka://unknown", "clicks"), ("kafka://unknown", "events-a")],
        [("kafka://unknown", "events-.*")],
        [("kafka://unknown", "clicks")],
        [("kafka://unknown", "orders-avro")],
    ]
    unknown = "neither the event log nor spark.kafka_bootstrap names them"
    assert [w for w in warnings if "Kafka" in w] == [
        f"Kafka topics clicks, events-a are read, named kafka://unknown: {unknown} in execution 3",
        f"Kafka topics events-.* are read, named kafka://unknown: {unknown} in execution 5",
        f"Kafka topics clicks are read, named kafka://unknown: {unknown} in execution 7",
        f"Kafka topics orders-avro are read, named kafka://unknown: {unknown} in execution 9",
    ]


def test_kafka_reads_name_the_one_configured_cluster() -> None:
    """Spark's `spark.kafka.clusters.<id>.auth.bootstrap.servers` (added to the log's
    environment, its writes left out), one cluster configured, names the reads' servers."""
    cluster = {"spark.kafka.clusters.main.auth.bootstrap.servers": "k1:9093,k2:9093"}
    events, warnings = replayed_without("kafka_batch", _KAFKA_WRITES, cluster)
    reads = [e for e in events if e["eventType"] == "COMPLETE" and e["inputs"]]
    assert {d["namespace"] for e in reads for d in e["inputs"]} == {"kafka://k1:9093"}
    assert not [w for w in warnings if "Kafka" in w]


_KAFKA_WRITES = frozenset({0, 1, 2})  # the execution ids of the log's three Kafka saves


def replayed_without(
    shape: str, executions: frozenset[int], properties: dict[str, str] | None = None
) -> tuple[list[Event], list[str]]:
    """The events and warnings of a checked-in log replayed without some SQL executions (all
    their lines left out), with Spark `properties` added to its environment, through
    `ApplicationLog`."""
    directory = _WORK[-1] / f"{shape}-without-{len(list(_WORK[-1].iterdir()))}"
    lines = unpacked(LOGS / f"{shape}.jsonl.zst").splitlines()
    kept = [line for line in lines if json.loads(line).get("executionId") not in executions]
    for at, line in enumerate(kept):
        event = json.loads(line)
        if properties and event["Event"] == "SparkListenerEnvironmentUpdate":
            event["Spark Properties"].update(properties)
            kept[at] = json.dumps(event).encode()
    ref = staged(directory, b"\n".join(kept) + b"\n")
    return read_through(ref, TranslateOptions(namespace="lake"))


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
    """A CTAS, saveAsTable or INSERT OVERWRITE whose query Delta runs as a nested execution
    (the root prints only the target): the lineage is that query's, its columns and its
    WHERE / GROUP BY (INDIRECT), also when the root prints the query as a bare `Filter`."""
    found = completed("delta_catalog")
    save_new, by_region, overwrite = found[3], found[4], found[5]
    same = {c: {(SALES, c, "IDENTITY")} for c in SALES_COLUMNS}
    assert lineage(save_new) == {**same, "*": {(SALES, "region", "FILTER")}}
    assert lineage(by_region) == {
        "region": {(SALES, "region", "IDENTITY")},
        "total": {(SALES, "amount", "AGGREGATION")},
        "*": {(SALES, "region", "GROUP_BY")},
    }
    assert lineage(overwrite) == {**same, "*": {(SALES, "region", "FILTER")}}
    assert lineage(found[9]) == {**same, "*": set()}  # CTAS with LOCATION: no WHERE


def schema(event: Event) -> list[tuple[str, str | None]]:
    """The first output's schema fields: (name, type)."""
    fields = event["outputs"][0]["facets"]["schema"]["fields"]
    return [(f["name"], f.get("type")) for f in fields]


def test_delta_writes_take_the_schema_of_their_nested_query() -> None:
    """Writes by path and a saveAsTable that creates the table print no columns: the
    schema is what the nested execution running their query returns, typed by its plan."""
    for write in completed("delta_path")[:3]:  # create, append, overwrite
        assert schema(write) == [("id", "long"), ("name", "string"), ("amount", "long")]
    found = completed("delta_catalog")
    typed = [("id", "long"), ("region", "string"), ("amount", "double")]
    assert schema(found[3]) == typed  # saveAsTable of a new table
    assert schema(found[4]) == [("region", "string"), ("total", "double")]
    assert schema(found[5]) == typed  # INSERT OVERWRITE: the query types what it names


def started(shape: str) -> dict[int, Event]:
    """The SQLExecutionStart events of a checked-in log, by execution id."""
    raw = (LOGS / f"{shape}.jsonl.zst").read_bytes()
    text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode()
    events = (json.loads(line) for line in text.splitlines() if "SQLExecutionStart" in line)
    return {e["executionId"]: e for e in events if e["Event"].endswith("SQLExecutionStart")}


def test_a_delta_write_names_its_query_and_the_nested_execution_that_runs_it() -> None:
    """The root prints the query's attributes (a bare `Filter` only those it reads); of the
    statement's nested executions only the one whose root returns them is the query, not
    Delta's log replay that follows it with the same description."""
    catalog = started("delta_catalog")
    root = read_plan(catalog[6]["sparkPlanInfo"], catalog[6]["physicalPlanDescription"])
    (target,) = root.datasets
    assert target.query == (271,)  # `Filter (region#271 = eu)`
    query = returned_rows(catalog[8]["physicalPlanDescription"], target.query)
    assert query is not None and query.feeds_write and query.query == (271,)
    assert [(f.name, f.type) for f in query.fields] == [
        ("id", "long"),
        ("region", "string"),
        ("amount", "double"),
    ]
    assert catalog[12]["description"] == catalog[8]["description"]
    assert returned_rows(catalog[12]["physicalPlanDescription"], target.query) is None
    path = started("delta_path")[0]  # by path: the command's child, `Project [id#0L, …]`
    (save,) = read_plan(path["sparkPlanInfo"], path["physicalPlanDescription"]).datasets
    assert (save.node, save.format, save.query) == ("SaveIntoDataSourceCommand", "delta", (0, 1, 2))
