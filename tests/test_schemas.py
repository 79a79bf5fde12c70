"""Schema facets: whole input schemas and types the plan leaves out, completed from what the
application showed before (`translate.schemas`), from the tables' own metadata
(`translate.versions`, `spark.tablemeta`) and from `from_avro`'s schema, replayed from the
checked-in real logs (tests/data/eventlogs/lakehouse, tests/golden)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.spark.plan.datasets import SchemaSource, TableFormat
from agent.spark.plan.syntax.schema import Field
from agent.spark.tables.metadata import DiskTableMetadata
from agent.spark.translate.datasets.rundatasets import RunDatasets
from agent.spark.translate.datasets.schemas import MAX_FIELDS, KnownSchemas
from agent.spark.translate.datasets.untyped import drop_untyped
from agent.spark.translate.naming import DatasetName
from agent.spark.translate.options import TranslateOptions
from tests.applog import read_through, staged, unpacked
from tests.olschema import validate_run_event
from tests.test_translate import translate

LAKEHOUSE = Path(__file__).resolve().parent / "data" / "eventlogs" / "lakehouse"
#: Logs of the side-by-side harness's jobs, and a parquet file one of them read (NOTES.md).
PEER = LAKEHOUSE.parent / "peer"
#: Logs of shapes a real Marquez showed wrong, and the parquet files their jobs wrote.
MARQUEZ = LAKEHOUSE.parent / "marquez"
Event = dict[str, Any]
#: The current schema of `lake.db.orders` as Iceberg 1.12 wrote it in the job that wrote
#: `iceberg_hadoop.jsonl.zst` (`CREATE TABLE ... (id BIGINT, status STRING, amount DOUBLE)`).
ORDERS_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "status", "required": False, "type": "string"},
        {"id": 3, "name": "amount", "required": False, "type": "double"},
    ],
}


class Relocated:
    """The real `DiskTableMetadata`, reading the datasets a log names under `prefix` from
    `root` (the logs' paths were rewritten to placeholders)."""

    def __init__(self, root: Path, prefix: str = "/data/lakehouse/") -> None:
        self.root = root
        self.prefix = prefix
        self.disk = DiskTableMetadata()

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        return None

    def exists(self, fmt: TableFormat, path: str) -> bool:
        return self.disk.exists(fmt, str(self.root / path.removeprefix(self.prefix)))

    def schema(self, fmt: SchemaSource, path: str, version: str | None) -> tuple[Field, ...] | None:
        return self.disk.schema(fmt, str(self.root / path.removeprefix(self.prefix)), version)


def replay(
    shape: str, work: Path, tables: Relocated | None = None, logs: Path = LAKEHOUSE
) -> list[Event]:
    """Every event of a checked-in log, through `ApplicationLog` as `replay` does."""
    ref = staged(work / "logs", unpacked(logs / f"{shape}.jsonl.zst"))
    tables = tables or Relocated(work / "none")
    events, _ = read_through(ref, TranslateOptions(namespace="lake"), table_metadata=tables)
    for event in events:
        validate_run_event(event)
    return events


def schemas(events: list[Event], job: str, side: str) -> dict[str, list[tuple[str, str | None]]]:
    """Dataset name -> its (field, type) pairs in the job's COMPLETE event."""
    (done,) = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == job]
    return {
        d["name"]: [(f["name"], f.get("type")) for f in d["facets"]["schema"]["fields"]]
        for d in done[side]
        if "schema" in d.get("facets", {})
    }


def test_hive_scan_typed_from_the_table_the_application_wrote() -> None:
    """A Hive scan prints `s#10` untyped; the CTAS that created the table typed it string,
    so the scan and the parquet copy written from it say string."""
    _, events = translate("hive_jdbc")
    for event in events:
        validate_run_event(event)
    job = "golden_hive_jdbc.execute_insert_into_hadoop_fs_relation_command.data_events_pq"
    (table,) = schemas(events, job, "inputs").values()
    (copy,) = schemas(events, job, "outputs").values()
    assert table == copy == [("id", "long"), ("s", "string")]


def test_from_avro_columns_typed_from_its_schema(tmp_path: Path) -> None:
    """`from_avro(value, <schema>)` then `o.amount`: typed from the Avro schema it prints."""
    events = replay("kafka_batch", tmp_path)
    job = (
        "lakehouse_kafka_batch.execute_insert_into_hadoop_fs_relation_command.data_orders_from_avro"
    )
    assert schemas(events, job, "outputs") == {
        "/data/lakehouse/data/orders_from_avro": [("id", "long"), ("amount", "double")]
    }


def test_parquet_input_lists_the_columns_spark_wrote_in_its_footer(tmp_path: Path) -> None:
    """The scan reads four of the six columns of `people` (its ReadSchema); the schema Spark
    wrote into the parquet footer gives the input all six, typed; without the file on disk
    the input lists the four."""
    job = "peer_projection.execute_insert_into_hadoop_fs_relation_command.projection_projection"
    people = "/data/peer/data/inputs/people"
    read = [("id", "long"), ("name", "string"), ("age", "integer"), ("city", "string")]
    whole = [*read, ("salary", "double"), ("tags", "array")]
    events = replay("projection", tmp_path / "a", Relocated(PEER, "/data/peer/"), PEER)
    assert schemas(events, job, "inputs") == {people: whole}
    (done,) = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == job]
    assert done["inputs"][0]["facets"]["schema"]["fields"][-1] == {
        "name": "tags",
        "type": "array",
        "fields": [{"name": "_element", "type": "string"}],
    }
    events = replay("projection", tmp_path / "b", None, PEER)
    assert schemas(events, job, "inputs") == {people: read}


LOCAL = "marquez_local_data.execute_insert_into_hadoop_fs_relation_command."


@pytest.mark.parametrize(
    ("shape", "job", "dataset", "typed"),
    [
        (
            "local_data",
            LOCAL + "raw_customers",  # createDataFrame, written twice
            "/data/marquez/data/raw/customers",
            [("id", "integer"), ("name", "string"), ("city", "string")],
        ),
        (
            "local_data",
            LOCAL + "data_values",  # SELECT * FROM VALUES (1, 'a', 2.5) AS v(k, v, w)
            "/data/marquez/data/values",
            [("k", "integer"), ("v", "string"), ("w", "decimal(2,1)")],
        ),
        (
            "local_data",
            LOCAL + "data_pivot",
            "/data/marquez/data/pivot",
            [("city", "string"), ("ann", "long"), ("bob", "long"), ("cy", "long")],
        ),
        (
            "local_data",
            LOCAL + "default_t",  # INSERT INTO t VALUES after CREATE TABLE t (k INT, v STRING)
            "/data/marquez/warehouse/t",
            [("k", "integer"), ("v", "string")],
        ),
        (
            "stream_files",
            "marquez_stream_files.streaming_query.each",  # foreachBatch writing parquet
            "/data/marquez/data/each",
            [("id", "long"), ("kind", "string"), ("batch", "integer")],
        ),
    ],
)
def test_writes_of_local_data_are_typed_from_their_parquet_footers(
    tmp_path: Path, shape: str, job: str, dataset: str, typed: list[tuple[str, str]]
) -> None:
    """Rows of `createDataFrame`, `VALUES`, a pivot, `INSERT … VALUES` and a `foreachBatch`
    DataFrame print no types (`name#1`): the schema Spark wrote into the dataset's parquet
    footer types every written column, on every event of the job."""
    events = replay(shape, tmp_path, Relocated(MARQUEZ, "/data/marquez/"), MARQUEZ)
    found = [
        [(f["name"], f.get("type")) for f in d["facets"]["schema"]["fields"]]
        for e in events
        if e["job"]["name"] == job
        for d in e["outputs"]
        if d["name"] == dataset
    ]
    assert found
    assert all(fields == typed for fields in found)


def test_create_table_is_typed_from_its_column_list(tmp_path: Path) -> None:
    """A V2 catalog's CREATE TABLE prints its columns (`ColumnImpl(id,LongType,…)`): the
    CREATE's output carries them typed. (The session catalog's prints none: see
    `test_writes_of_local_data_are_typed_from_their_parquet_footers` for its first INSERT.)"""
    job = "lakehouse_delta_catalog.create_table.default_sales"
    assert schemas(replay("delta_catalog", tmp_path), job, "outputs") == {
        "/data/lakehouse/warehouse/sales": [
            ("id", "long"),
            ("region", "string"),
            ("amount", "double"),
        ]
    }


def test_iceberg_columns_typed_from_the_table_metadata(tmp_path: Path) -> None:
    """Iceberg plans print `status`, `amount` untyped and scans pruned: the table's current
    schema on disk gives inputs every column, typed, outputs their types, and a parquet copy
    of the table its columns' types through their lineage."""
    metadata = tmp_path / "tables" / "iceberg_hadoop" / "db" / "orders" / "metadata"
    metadata.mkdir(parents=True)
    document = {"format-version": 2, "current-schema-id": 0, "schemas": [ORDERS_SCHEMA]}
    (metadata / "v1.metadata.json").write_text(json.dumps(document))
    events = replay("iceberg_hadoop", tmp_path, Relocated(tmp_path / "tables"))
    table = "/data/lakehouse/iceberg_hadoop/db/orders"
    typed = [("id", "long"), ("status", "string"), ("amount", "double")]
    prefix = "lakehouse_iceberg_hadoop."
    assert schemas(events, prefix + "append_data.db_orders", "outputs") == {table: typed}
    assert schemas(events, prefix + "update_table.db_orders", "inputs") == {table: typed}
    # the scan read only status: the input is still the whole table
    overwrite = prefix + "overwrite_by_expression.db_order_totals"
    assert schemas(events, overwrite, "inputs") == {table: typed}
    copy = prefix + "execute_insert_into_hadoop_fs_relation_command.data_orders_pq"
    assert schemas(events, copy, "outputs") == {"/data/lakehouse/data/orders_pq": typed}


def test_without_table_metadata_no_type_is_guessed(tmp_path: Path) -> None:
    """No metadata on disk: every type given to a column of `orders` is the table's (a
    column the log never types stays without one)."""
    events = replay("iceberg_hadoop", tmp_path)
    table = {(f["name"], f["type"]) for f in ORDERS_SCHEMA["fields"]}
    seen: set[tuple[str, str | None]] = set()
    for event in events:
        for dataset in event["inputs"] + event["outputs"]:
            if dataset["name"] == "/data/lakehouse/iceberg_hadoop/db/orders":
                seen |= {(f["name"], f.get("type")) for f in dataset["facets"]["schema"]["fields"]}
    assert {field for field in seen if field[1] is not None} <= table


def test_known_schemas_are_bounded() -> None:
    """The least recently seen dataset is forgotten past the bound; a scan of it then lists
    only what it reads."""

    def run(name: str, fields: list[dict[str, str]], role: str) -> RunDatasets:
        datasets = RunDatasets()
        side = datasets.inputs if role == "input" else datasets.outputs
        side[DatasetName("file", name)] = {
            "namespace": "file",
            "name": name,
            "facets": {"schema": {"fields": fields}},
        }
        return datasets

    known = KnownSchemas(limit=2)
    whole = [{"name": "a", "type": "long"}, {"name": "b", "type": "string"}]
    for name in ("/t1", "/t2", "/t3"):
        known.complete(run(name, whole, "output"))
    assert len(known) == 2
    forgotten, kept = run("/t1", [{"name": "a"}], "input"), run("/t3", [{"name": "a"}], "input")
    known.complete(forgotten)
    known.complete(kept)
    assert forgotten.inputs[DatasetName("file", "/t1")]["facets"]["schema"]["fields"] == [
        {"name": "a"}
    ]
    assert kept.inputs[DatasetName("file", "/t3")]["facets"]["schema"]["fields"] == whole


def test_a_schema_wider_than_the_bound_is_not_remembered() -> None:
    """A dataset of more than MAX_FIELDS columns is not remembered: its later scan lists
    only what it reads."""
    wide = [{"name": f"c{i}", "type": "long"} for i in range(MAX_FIELDS + 1)]
    known = KnownSchemas()
    written, read = RunDatasets(), RunDatasets()
    key = DatasetName("file", "/wide")
    written.outputs[key] = {
        "namespace": "file",
        "name": "/wide",
        "facets": {"schema": {"fields": wide}},
    }
    read.inputs[key] = {
        "namespace": "file",
        "name": "/wide",
        "facets": {"schema": {"fields": [{"name": "c1"}]}},
    }
    known.complete(written)
    assert len(known) == 0
    known.complete(read)
    assert read.inputs[key]["facets"]["schema"]["fields"] == [{"name": "c1"}]


def test_fields_without_a_type_leave_the_schema_facet() -> None:
    """Untyped fields, nested ones too, leave the schema facet and a facet left without
    fields goes; the column lineage of an untyped column stays."""
    lineage = {"fields": {"kind": {"inputFields": [{"namespace": "file", "name": "/in"}]}}}
    event: Event = {
        "inputs": [{"namespace": "file", "name": "/in", "facets": {"schema": {"fields": []}}}],
        "outputs": [
            {
                "namespace": "file",
                "name": "/out",
                "facets": {
                    "schema": {
                        "fields": [
                            {"name": "id", "type": "long"},
                            {"name": "kind"},
                            {"name": "who", "type": "struct", "fields": [{"name": "a"}]},
                            {"name": "at", "type": ""},
                        ]
                    },
                    "columnLineage": lineage,
                },
            },
            {"namespace": "file", "name": "/x", "facets": {"schema": {"fields": [{"name": "a"}]}}},
        ],
    }
    drop_untyped(event)
    assert event["inputs"][0]["facets"] == {}
    first, second = event["outputs"]
    assert first["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "long"},
        {"name": "who", "type": "struct"},
    ]
    assert first["facets"]["columnLineage"] == lineage
    assert second["facets"] == {}
