"""Committed versions and schemas read from Delta and Iceberg metadata files on disk
(`spark.tablemeta`).

The files are written here in the layouts Delta 4.x and Iceberg 1.x write (one JSON action
per line in `_delta_log/<20 digits>.json`; `metadata/v<N>.metadata.json` of the hadoop
catalog, `metadata/<N>-<uuid>.metadata.json` of the others); `tests/test_lakehouse_live.py`
checks the same against tables real Spark jobs wrote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.spark.plan.syntax.schema import Field
from agent.spark.tables.metadata import DiskTableMetadata


def delta_commit(table: Path, version: int, timestamp: int) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    actions = [
        {"commitInfo": {"timestamp": timestamp, "operation": "WRITE", "readVersion": version - 1}},
        {"add": {"path": f"part-{version}.parquet", "size": 1, "dataChange": True}},
    ]
    (log / f"{version:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")


def iceberg_metadata(table: Path, name: str, snapshots: list[tuple[int, int]]) -> None:
    metadata = table / "metadata"
    metadata.mkdir(parents=True, exist_ok=True)
    document = {
        "format-version": 2,
        "current-snapshot-id": snapshots[-1][0] if snapshots else -1,
        "snapshots": [{"snapshot-id": s, "timestamp-ms": t} for s, t in snapshots],
    }
    (metadata / name).write_text(json.dumps(document))


def test_delta_version_committed_inside_the_window(tmp_path: Path) -> None:
    """The newest Delta commit whose commitInfo.timestamp falls in the run is its version;
    none when no commit does."""
    for version, stamp in enumerate((1000, 2000, 3000)):
        delta_commit(tmp_path, version, stamp)
    versions = DiskTableMetadata()
    assert versions.committed("delta", str(tmp_path), 1500, 2500) == "1"
    assert versions.committed("delta", str(tmp_path), 1000, 3000) == "2"
    assert versions.committed("delta", str(tmp_path), 3001, 4000) is None
    assert versions.committed("delta", str(tmp_path / "missing"), 0, 4000) is None


def test_iceberg_snapshot_from_the_newest_metadata_file(tmp_path: Path) -> None:
    """The newest metadata file of either naming tells the snapshots; the latest in the
    window is the run's."""
    hadoop = tmp_path / "hadoop"
    iceberg_metadata(hadoop, "v1.metadata.json", [(11, 1000)])
    iceberg_metadata(hadoop, "v2.metadata.json", [(11, 1000), (22, 2000)])
    jdbc = tmp_path / "jdbc"
    iceberg_metadata(jdbc, "00000-6b1e-4c1a.metadata.json", [(7, 500)])
    iceberg_metadata(jdbc, "00001-9f2e-4d3b.metadata.json", [(7, 500), (8, 900), (9, 950)])
    versions = DiskTableMetadata()
    assert versions.committed("iceberg", str(hadoop), 1500, 2500) == "22"
    assert versions.committed("iceberg", str(hadoop), 900, 1100) == "11"
    assert versions.committed("iceberg", str(jdbc), 800, 1000) == "9"
    assert versions.committed("iceberg", str(jdbc), 1000, 2000) is None


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A commit file that is a link or a FIFO, or a metadata file that is no JSON, tells
    nothing and raises nothing."""
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"commitInfo": {"timestamp": 1500}}))
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").symlink_to(outside)
    os.mkfifo(log / f"{1:020d}.json")
    versions = DiskTableMetadata()
    assert versions.committed("delta", str(tmp_path / "t"), 0, 5000) is None
    broken = tmp_path / "broken" / "metadata"
    broken.mkdir(parents=True)
    (broken / "v1.metadata.json").write_text("{not json")
    assert versions.committed("iceberg", str(tmp_path / "broken"), 0, 5000) is None


def test_names_that_are_not_utf8_are_passed_over(tmp_path: Path) -> None:
    """A file whose name is not UTF-8 beside the commits and metadata files is none of
    them: versions are read as if it were not there."""
    delta_commit(tmp_path / "delta", 0, 1000)
    iceberg_metadata(tmp_path / "iceberg", "v1.metadata.json", [(11, 1000)])
    for folder in (tmp_path / "delta" / "_delta_log", tmp_path / "iceberg" / "metadata"):
        (folder / os.fsdecode(b"\xff\xfe.json")).write_text("{}")
    versions = DiskTableMetadata()
    assert versions.exists("delta", str(tmp_path / "delta"))
    assert versions.committed("delta", str(tmp_path / "delta"), 0, 2000) == "0"
    assert versions.exists("iceberg", str(tmp_path / "iceberg"))
    assert versions.committed("iceberg", str(tmp_path / "iceberg"), 0, 2000) == "11"


def test_a_table_exists_where_its_metadata_is(tmp_path: Path) -> None:
    """A directory holds an Iceberg table when `metadata/` has a metadata file of either
    naming, a Delta table when `_delta_log/` has a commit; anything else holds none."""
    iceberg_metadata(tmp_path / "hadoop", "v1.metadata.json", [])
    iceberg_metadata(tmp_path / "jdbc", "00000-6b1e-4c1a.metadata.json", [])
    delta_commit(tmp_path / "delta", 0, 1000)
    (tmp_path / "empty" / "metadata").mkdir(parents=True)
    (tmp_path / "empty" / "metadata" / "snap-1.avro").write_bytes(b"")
    versions = DiskTableMetadata()
    assert versions.exists("iceberg", str(tmp_path / "hadoop"))
    assert versions.exists("iceberg", str(tmp_path / "jdbc"))
    assert versions.exists("delta", str(tmp_path / "delta"))
    assert not versions.exists("iceberg", str(tmp_path / "delta"))
    assert not versions.exists("iceberg", str(tmp_path / "empty"))
    assert not versions.exists("iceberg", str(tmp_path / "missing"))
    (tmp_path / "link").symlink_to(tmp_path / "hadoop" / "metadata")
    os.mkdir(tmp_path / "linked")
    (tmp_path / "linked" / "metadata").symlink_to(tmp_path / "hadoop" / "metadata")
    assert not versions.exists("iceberg", str(tmp_path / "linked"))


#: `metaData` of a Delta table's first commit as Delta 4.x wrote it (`CREATE TABLE sales (id
#: BIGINT, region STRING, amount DOUBLE) USING delta`), plus nested columns.
DELTA_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": True},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "attrs",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": {
                    "type": "struct",
                    "fields": [{"name": "n", "type": "integer", "nullable": True, "metadata": {}}],
                },
                "valueContainsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
    ],
}
#: The current schema of an Iceberg 1.x table (`metadata/v<N>.metadata.json` `schemas[]`).
ICEBERG_SCHEMAS = [
    {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "required": False, "type": "int"}],
    },
    {
        "type": "struct",
        "schema-id": 1,
        "fields": [
            {"id": 1, "name": "id", "required": False, "type": "long"},
            {"id": 2, "name": "status", "required": False, "type": "string"},
            {"id": 3, "name": "at", "required": False, "type": "timestamptz"},
            {"id": 4, "name": "local", "required": False, "type": "timestamp"},
            {
                "id": 5,
                "name": "items",
                "required": False,
                "type": {
                    "type": "list",
                    "element-id": 6,
                    "element": "int",
                    "element-required": False,
                },
            },
        ],
    },
]


def test_delta_schema_from_the_newest_metadata_action(tmp_path: Path) -> None:
    """The newest commit with a `metaData` action gives the schema, in Spark's type names
    (a read of an earlier version: the newest up to it); a later commit without one (a plain
    write) changes nothing."""
    log = tmp_path / "_delta_log"
    log.mkdir()
    first = {"metaData": {"id": "x", "schemaString": json.dumps({"type": "struct", "fields": []})}}
    (log / f"{0:020d}.json").write_text(json.dumps(first) + "\n")
    altered = {"metaData": {"id": "x", "schemaString": json.dumps(DELTA_SCHEMA)}}
    (log / f"{1:020d}.json").write_text(json.dumps({"commitInfo": {}}) + "\n" + json.dumps(altered))
    delta_commit(tmp_path, 2, 3000)
    assert DiskTableMetadata().schema("delta", str(tmp_path), None) == (
        Field("id", "long"),
        Field("region", "string"),
        Field("amount", "decimal(10,2)"),
        Field("tags", "array", (Field("_element", "string"),)),
        Field(
            "attrs",
            "map",
            (Field("key", "string"), Field("value", "struct", (Field("n", "integer"),))),
        ),
    )
    assert DiskTableMetadata().schema("delta", str(tmp_path / "missing"), None) is None
    # a read of version 0 (time travel) gets the schema of then
    assert DiskTableMetadata().schema("delta", str(tmp_path), "0") == ()


def test_iceberg_current_schema_in_spark_type_names(tmp_path: Path) -> None:
    """The schema of `current-schema-id` in the newest metadata file, typed as Spark reads
    Iceberg's types (a snapshot read by time travel: that snapshot's schema); a metadata
    file that is no JSON tells nothing."""
    metadata = tmp_path / "t" / "metadata"
    metadata.mkdir(parents=True)
    document = {"format-version": 2, "current-schema-id": 1, "schemas": ICEBERG_SCHEMAS}
    (metadata / "v2.metadata.json").write_text(json.dumps(document))
    (metadata / "v1.metadata.json").write_text("{not json")
    assert DiskTableMetadata().schema("iceberg", str(tmp_path / "t"), None) == (
        Field("id", "long"),
        Field("status", "string"),
        Field("at", "timestamp"),
        Field("local", "timestamp_ntz"),
        Field("items", "array", (Field("_element", "integer"),)),
    )
    document["snapshots"] = [{"snapshot-id": 7, "schema-id": 0}, {"snapshot-id": 8, "schema-id": 1}]
    (metadata / "v3.metadata.json").write_text(json.dumps(document))
    tables = DiskTableMetadata()
    assert tables.schema("iceberg", str(tmp_path / "t"), "7") == (Field("id", "integer"),)
    assert tables.schema("iceberg", str(tmp_path / "t"), "8") == tables.schema(
        "iceberg", str(tmp_path / "t"), None
    )
    (metadata / "v4.metadata.json").write_text("{not json")
    assert DiskTableMetadata().schema("iceberg", str(tmp_path / "t"), None) is None


PEOPLE = Path(__file__).resolve().parent / "data" / "eventlogs" / "peer" / "data" / "inputs"
PEOPLE_FILE = next((PEOPLE / "people").glob("*.parquet"))


def test_parquet_schema_from_the_footer_spark_wrote() -> None:
    """A parquet dataset written by PySpark: the schema in its footer, read through the
    directory (its first data file) or the file itself."""
    expected = (
        Field("id", "long"),
        Field("name", "string"),
        Field("age", "integer"),
        Field("city", "string"),
        Field("salary", "double"),
        Field("tags", "array", (Field("_element", "string"),)),
    )
    tables = DiskTableMetadata()
    assert tables.schema("parquet", str(PEOPLE / "people"), None) == expected
    assert tables.schema("parquet", str(PEOPLE_FILE), None) == expected


def test_unreadable_parquet_tells_nothing(tmp_path: Path) -> None:
    """A cut footer, a file that is no parquet, a FIFO, a directory of partitions only or
    a missing path give no schema and raise nothing."""
    data = PEOPLE_FILE.read_bytes()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "part-0.parquet").write_bytes(data[:40] + data[-8:])
    other = tmp_path / "other.parquet"
    other.write_bytes(b"not parquet at all")
    os.mkfifo(tmp_path / "fifo.parquet")
    (tmp_path / "partitioned" / "k=1").mkdir(parents=True)
    (tmp_path / "partitioned" / "k=1" / "part-0.parquet").write_bytes(data)
    tables = DiskTableMetadata()
    for path in ("cut", "other.parquet", "fifo.parquet", "partitioned", "missing"):
        assert tables.schema("parquet", str(tmp_path / path), None) is None, path
