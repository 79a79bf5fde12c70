"""The datasets a scan operator reads: files by path, catalog and Hive tables, JDBC
relations, Kafka topics and Iceberg tables, from a `sparkPlanInfo` node (`node_scans`) or an
operator of the plan description (`scan_datasets`, which column lineage names its inputs
with). Delta's reads of its own transaction log are no datasets (`delta_index`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from agent import linear
from agent.spark.plan.attributes.kinds import LOGICAL_RELATION, relation_columns
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.formats.iceberg import iceberg_scan
from agent.spark.plan.formats.kafka import kafka_scan
from agent.spark.plan.syntax.cuts import cut
from agent.spark.plan.syntax.schema import Field, parse_struct, split_top
from agent.spark.plan.syntax.tables import TableIdent, parse_table_ident
from agent.spark.plan.syntax.text import PlanNode, block_list, parse_attribute
from agent.spark.plan.touched.reading import Reading
from agent.spark.plan.touched.writes import format_name, metrics_of, typed

#: Scan-like leaves that read no external dataset.
_NOT_DATASETS: Final = (
    "Scan ExistingRDD",
    "Scan OneRowRelation",
    "Scan ExternalRDD",
    "Scan RDD",
    "Scan In-memory table",
    "LocalTableScan",
    "Range",
    "InMemoryTableScan",
)
_INPUT_METRICS: Final = {
    "number of output rows": "rows",
    "size of files read": "bytes",
    "number of files read": "files",
}
DELTA_LOG: Final = "_delta_log"
MICRO_BATCH_SCAN: Final = "MicroBatchScan"
#: Why a relation of a save's logical plan is no named dataset.
UNLOCATED_RELATION: Final = "the event log does not name the files of a save's relation"
_FORMAT_WORD = linear.compile(rf"^[{linear.WORD}.]+$")
#: The `unknown_reason` of a micro-batch scan: a source its query's progress names.
MICRO_BATCH_SOURCE: Final = "a streaming source, named by its query's progress"
_METADATA_COLUMNS: Final = frozenset({"_file", "_pos", "_spec_id", "_partition", "_deleted"})
#: Location texts are stripped, node names too: `$` is their end.
_LOCATION = linear.compile(rf"(?s)^[{linear.WORD}]+\((?P<count>\d+) paths?\)\[(?P<paths>.*)\]$")
#: the description prints `InMemoryFileIndex [p1, p2]`, without the count
_LOCATION_DESCRIBED = linear.compile(rf"(?s)^[{linear.WORD}]+ \[(?P<paths>.*)\]$")
#: how the description marks the paths it leaves out: `[p1, ... 29 entries]`
_MORE_ENTRIES = linear.compile(r"^\.\.\. (\d+) entries$")
_LOCATION_TEXT = linear.compile(rf"Location: ([{linear.WORD}]+\(\d+ paths?\)\[[^\]]*\])")
_READ_SCHEMA_TEXT = linear.compile(r"ReadSchema: (struct<.*>)")
#: The scan of a V2 JDBC catalog's table (`derby.APP.T`): `Scan JDBCRelation(...)` names only
#: the table, this one its catalog too (Spark 4).
_JDBC_SCAN: Final = linear.compile(r"Scan JDBCRelation\((?P<table>.*)\) \[numPartitions=\d+\]$")
_V2_JDBC_SCAN: Final = linear.compile(
    r"Scan JDBC v1 Relation from v2 scan "
    rf"(?P<catalog>`(?:[^`]|``)+`|[^.{linear.SPACE}`]+)\.(?P<table>[^{linear.SPACE}]+)$"
)


def node_scans(node: Mapping[str, Any], stripped: str, reading: Reading) -> list[DatasetRef]:
    """The datasets a `sparkPlanInfo` node reads when it is a scan; none for other nodes."""
    scan = stripped.startswith(("Scan ", "BatchScan", "FileScan", "HiveTableScan"))
    if not scan or stripped.startswith(_NOT_DATASETS):
        return []
    raw_meta = node.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    simple = node.get("simpleString")
    simple = simple if isinstance(simple, str) else ""
    raw_format = text_of(meta.get("Format"))
    hive_attrs = map(parse_attribute, block_list(reading.described, stripped, "Output"))
    location = text_of(meta.get("Location")) or _search(_LOCATION_TEXT, simple)
    return _scan(
        stripped,
        location_paths(location),
        text_of(meta.get("ReadSchema")) or _search(_READ_SCHEMA_TEXT, simple),
        delta_index(location) or raw_format,
        tuple(typed(a.name, a, reading.types) for a in hive_attrs if a is not None),
        metrics_of(node, _INPUT_METRICS),
        reading.notes,
        simple,
    )


def scan_datasets(node: PlanNode, types: Mapping[int, Field]) -> list[DatasetRef]:
    """The datasets a scan operator of the plan description reads (no metrics: those are
    in `sparkPlanInfo`). Column lineage names its inputs with these."""
    name = node.name.strip()
    if name == MICRO_BATCH_SCAN:
        return [_micro_batch_scan(node, types)]
    if name == LOGICAL_RELATION:
        return _logical_relation(node, types)
    if not name.startswith(("Scan ", "BatchScan", "FileScan", "HiveTableScan")):
        return []
    location = node.details.get("Location", "").strip()
    match = _LOCATION_DESCRIBED.match(location)
    paths = None
    if match is not None:
        items = [p.strip() for p in split_top(match["paths"]) if p.strip()]
        more = _MORE_ENTRIES.match(items[-1]) if items else None
        paths = (len(items) - 1 + int(more[1]), items) if more else (len(items), items)
    attrs = [a for a in map(parse_attribute, node.detail_list("Output") or []) if a]
    fields = tuple(typed(a.name, a, types) for a in attrs)
    schema = node.details.get("ReadSchema", "").strip() or None
    return _scan(name, paths, schema, delta_index(location), fields, {}, [], node.details.get(""))


def _micro_batch_scan(node: PlanNode, types: Mapping[int, Field]) -> DatasetRef:
    """A V2 streaming source's scan (`MicroBatchScan`, `class …KafkaSourceProvider$KafkaScan`)
    names no dataset: the query's progress describes its sources, which the translator puts
    in its place (`MICRO_BATCH_SOURCE`)."""
    attrs = [a for a in map(parse_attribute, node.detail_list("Output") or []) if a]
    kafka = "kafka010." in node.details.get("", "")
    return DatasetRef(
        "input",
        MICRO_BATCH_SCAN,
        format="kafka" if kafka else None,
        fields=tuple(typed(a.name, a, types) for a in attrs),
        unknown_reason=MICRO_BATCH_SOURCE,
    )


def _logical_relation(node: PlanNode, types: Mapping[int, Field]) -> list[DatasetRef]:
    """A relation of a save's query, printed as a logical plan: `LogicalRelation json,
    [a#1, b#2], false` names the format and columns of files it does not locate (the event
    log has no path for them); a Kafka or JDBC relation names its topics or table."""
    tokens = [t.strip() for t in split_top(node.details.get("Arguments", ""))]
    attrs = [a for a in map(parse_attribute, relation_columns(node) or []) if a]
    fields = tuple(typed(a.name, a, types) for a in attrs)
    relation = tokens[0] if tokens else ""
    if not _FORMAT_WORD.match(relation):  # `KafkaRelation(…)`, `JDBCRelation(t) […]`
        return _scan(f"Scan {relation}", None, None, None, fields, {}, [])
    columns = ", ".join(a.name for a in attrs)
    return [
        DatasetRef(
            "input",
            f"{LOGICAL_RELATION} {relation} [{columns}]",
            format=format_name(relation) or relation.lower(),
            fields=fields,
            unknown_reason=UNLOCATED_RELATION,
            attribute_ids=tuple(a.expr_id for a in attrs),
        )
    ]


def delta_index(location: str | None) -> str | None:
    """`delta` for a scan of a Delta table's files (`PreparedDeltaFileIndex`,
    `TahoeBatchFileIndex`, ...), `_delta_log` for one of its transaction log."""
    if not location:
        return None
    index = location.split("(", 1)[0].split(" ", 1)[0]
    if index == "DeltaLogFileIndex":
        return DELTA_LOG
    if index.startswith(("PreparedDelta", "Tahoe")):
        return "delta"
    return None


def location_paths(location: str | None) -> tuple[int, list[str]] | str | None:
    """`InMemoryFileIndex(2 paths)[a, b]` -> (2, [a, b]); the text itself if unreadable."""
    if not location:
        return None
    match = _LOCATION.match(location)
    if match is None:
        return location
    return int(match["count"]), [p.strip() for p in split_top(match["paths"]) if p.strip()]


def _scan(
    name: str,
    located: tuple[int, list[str]] | str | None,
    read_schema: str | None,
    raw_format: str | None,
    output_fields: tuple[Field, ...],
    metrics: dict[str, int],
    notes: list[str],
    simple: str | None = "",
) -> list[DatasetRef]:
    """A scan's datasets: one per path it lists, else its table, else its JDBC table, its
    Kafka topics or its Iceberg table. A Delta transaction-log read (the format reading its
    own metadata) is no dataset."""
    if raw_format == DELTA_LOG:
        return []
    raw_format = raw_format or (name.split()[1] if len(name.split()) > 1 else "")
    fmt = format_name(raw_format) or raw_format.lower() or None
    fields: tuple[Field, ...] = ()
    if read_schema:
        try:
            fields = parse_struct(read_schema)
        except ValueError as exc:
            notes.append(f"unreadable ReadSchema of {name!r}: {exc}")
    else:  # Hive scans print no read schema: the output attributes carry what is known
        fields = output_fields
    table = _scan_table(name)
    if isinstance(located, str):
        notes.append(f"unreadable Location of {name!r}: {located[:200]!r}")
    elif located is not None:
        declared, listed = located
        paths = [p for p in listed if not cut(p)]  # a mark of paths left out names none
        if declared > len(paths):
            notes.append(f"{name!r} reads {declared} paths but the plan lists {len(paths)}")
        paths = [p for p in paths if "/_delta_log/" not in p and not p.endswith("/_delta_log")]
        if len(paths) > 1 or declared > len(paths):
            metrics = {}  # the node's totals cannot be split between its paths
        if not listed and declared == 0 and table is not None:
            # a catalog table whose partitions the query's filter all pruned: no file is
            # listed, but the statement reads the table (named from the catalog's place)
            return [
                DatasetRef("input", name, table=table, format=fmt, fields=fields, metrics=metrics)
            ]
        paths_cut = (declared, len(paths)) if declared > len(paths) else None
        return [
            DatasetRef(
                "input",
                name,
                location=p,
                table=table,
                format=fmt,
                fields=fields,
                metrics=metrics,
                paths_cut=paths_cut,
            )
            for p in paths
        ]
    if table is not None and name.startswith("Scan hive "):
        return [
            DatasetRef("input", name, table=table, format="hive", fields=fields, metrics=metrics)
        ]
    jdbc = _JDBC_SCAN.match(name) or _V2_JDBC_SCAN.match(name)
    if jdbc is not None:  # a V2 JDBC catalog's table names its catalog; neither its url
        catalog = (jdbc.groupdict().get("catalog") or "").strip("`") or None
        notes.append(f"JDBC table {jdbc['table']} is read, but its url is not in the event log")
        return [
            DatasetRef(
                "input",
                name,
                jdbc=("", jdbc["table"]),
                jdbc_catalog=catalog,
                format="jdbc",
                fields=fields,
                unknown_reason="JDBC url not in the event log"
                if catalog is None
                else f"JDBC url of catalog {catalog!r} not in the event log",
            )
        ]
    lakehouse = kafka_scan(name) or iceberg_scan(name, simple or "", _visible(fields))
    if lakehouse is not None:  # a Kafka relation's columns are the fixed ones it reads
        return [
            dataclasses.replace(ref, metrics=metrics, fields=fields if ref.kafka else ref.fields)
            for ref in lakehouse
        ]
    notes.append(f"unrecognized plan node {name!r}")
    return [DatasetRef("input", name, fields=fields, unknown_reason=f"scan node {name!r}")]


def _visible(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """A table's columns without the metadata columns a row-level command reads
    (Iceberg's `_file`, `_pos`, `_spec_id`, `_partition`)."""
    return tuple(f for f in fields if f.name not in _METADATA_COLUMNS)


def _scan_table(name: str) -> TableIdent | None:
    """`Scan parquet spark_catalog.default.people` -> the table; None for path scans."""
    parts = name.split(maxsplit=2)
    if len(parts) == 3 and parts[0] == "Scan":
        return parse_table_ident(parts[2])
    return None


def text_of(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _search(pattern: linear.Pattern, text: str) -> str | None:
    match = pattern.search(text)
    return match[1] if match else None
