"""Read what a SQL execution touches from its `sparkPlanInfo` tree and plan description.

`read_plan` walks the `sparkPlanInfo` tree (node names, metadata, metric accumulator ids)
and looks up the `physicalPlanDescription` (``explain formatted``, see `plantext`) for what
the tree leaves out: the attribute lists (``Output [2]: [id#3L, k#4L]``), aliases and the
arguments of commands whose tree node prints none (CTAS). The result names each dataset by
what Spark printed (a path, a catalog table, a JDBC url); naming it the OpenLineage way is
the translator's job. Written datasets carry their column lineage (`lineage`).

Understood: file scans (parquet, orc, csv, json, text, avro, any `FileFormat`) with their
read schema, Hive table scans, JDBC relations, and the write commands `writes` reads. Scans
and writes of any other kind become datasets with `unknown_reason` set; plain operators and
DDL commands contribute nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Final

from agent.spark.plan import lineage
from agent.spark.plan.datasets import DatasetRef, PlanSummary
from agent.spark.plan.kafka import kafka_scan
from agent.spark.plan.lakehouse import (
    ROW_LEVEL_WRITES,
    delta_save_query,
    iceberg_scan,
    row_level_statement,
)
from agent.spark.plan.schema import Field, field_of, parse_struct, split_top
from agent.spark.plan.tables import TableIdent, normalize, parse_table_ident
from agent.spark.plan.text import (
    Block,
    PlanNode,
    block_list,
    parse_attribute,
    parse_description,
)
from agent.spark.plan.writes import format_name, metrics_of, typed, write_datasets

#: Operators that only wrap the node that names an execution.
_WRAPPERS: Final = ("AdaptiveSparkPlan", "ResultQueryStage", "WholeStageCodegen", "InputAdapter")
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
_MAX_NODES: Final = 100_000
_DELTA_LOG: Final = "_delta_log"
_DELTA_STATE = re.compile(r"^Scan ExistingRDD Delta Table State .*? - (?P<table>.+)/_delta_log$")
_METADATA_COLUMNS: Final = frozenset({"_file", "_pos", "_spec_id", "_partition", "_deleted"})
_LOCATION = re.compile(r"^\w+\((?P<count>\d+) paths?\)\[(?P<paths>.*)\]$", re.DOTALL)
#: the description prints `InMemoryFileIndex [p1, p2]`, without the count
_LOCATION_DESCRIBED = re.compile(r"^\w+ \[(?P<paths>.*)\]$", re.DOTALL)
_LOCATION_TEXT = re.compile(r"Location: (\w+\(\d+ paths?\)\[[^\]]*\])")
_READ_SCHEMA_TEXT = re.compile(r"ReadSchema: (struct<.*>)")
_MICRO_BATCH_SCAN_TABLE = re.compile(r"^\w*Scan\(table=([^,()\s]+)", re.MULTILINE)
_STRUCT_FIELD = re.compile(r"StructField\(([^,()]+),(\w+)Type(\(\d+,\d+\))?,(?:true|false)\)")
_ROW_TYPES: Final = {
    "Long": "long", "Integer": "integer", "Short": "short", "Byte": "byte", "Double": "double",
    "Float": "float", "String": "string", "Boolean": "boolean", "Date": "date",
    "Timestamp": "timestamp", "TimestampNTZ": "timestamp_ntz", "Binary": "binary",
    "Decimal": "decimal",
}  # fmt: skip
#: The scan of a V2 JDBC catalog's table (`derby.APP.T`): `Scan JDBCRelation(...)` names only
#: the table, this one its catalog too (Spark 4).
_V2_JDBC_SCAN: Final = re.compile(
    r"Scan JDBC v1 Relation from v2 scan (?P<catalog>`(?:[^`]|``)+`|[^.\s`]+)\.(?P<table>\S+)$"
)


def read_plan(plan_info: object, description: object) -> PlanSummary:
    """Summarize one `sparkPlanInfo` tree plus its `physicalPlanDescription` (both untrusted)."""
    text = description if isinstance(description, str) else ""
    described = parse_description(text)
    types = _attribute_types(described)
    notes: list[str] = []
    datasets: list[DatasetRef] = []
    logs: list[str] = []
    for node in _walk(plan_info, notes):
        name = node.get("nodeName")
        if not isinstance(name, str) or not name.strip():
            continue
        datasets.extend(_node_datasets(node, name, described, types, notes))
        logs.extend(_delta_logs(node, name))
    datasets = [delta_save_query(ref, text) for ref in datasets]
    with_lineage = lineage.attach(datasets, text, types, scan_datasets, notes)
    command = _command(plan_info)
    return PlanSummary(command, tuple(with_lineage), tuple(notes), tuple(dict.fromkeys(logs)))


def _delta_logs(node: Mapping[str, Any], name: str) -> list[str]:
    """The tables whose transaction log a scan reads: `DeltaLogFileIndex [<t>/_delta_log/…]`
    or `Scan ExistingRDD Delta Table State #n - <t>/_delta_log`."""
    state = _DELTA_STATE.match(name.strip())
    if state is not None:
        return [state["table"]]
    raw_meta = node.get("metadata")
    location = _text(raw_meta.get("Location")) if isinstance(raw_meta, Mapping) else None
    if _delta_index(location) != _DELTA_LOG:
        return []
    located = _location_paths(location)
    paths = located[1] if isinstance(located, tuple) else []
    return [p.split("/_delta_log", 1)[0] for p in paths if "/_delta_log" in p]


def returned_rows(description: object, query: Collection[int] = ()) -> DatasetRef | None:
    """What the plan's root returns (see `lineage.returned`): a streaming micro-batch's
    rows, which its sink, outside the plan, writes; with `query`, the query of a Delta write
    that this nested execution runs, if its root returns those attributes."""
    text = description if isinstance(description, str) else ""
    types = _attribute_types(parse_description(text))
    return lineage.returned(text, types, scan_datasets, query)


def micro_batch_tables(description: object) -> tuple[str, ...]:
    """The catalog tables a streaming micro-batch scans through a V2 source that its plan
    node does not name (`MicroBatchScan` with `IcebergScan(table=lake.db.t, …)`), as printed."""
    text = description if isinstance(description, str) else ""
    return tuple(dict.fromkeys(_MICRO_BATCH_SCAN_TABLE.findall(text)))


def _walk(root: object, notes: list[str]) -> Iterator[Mapping[str, Any]]:
    """Depth-first, children in order, bounded so a hostile tree cannot exhaust memory."""
    stack = [root]
    seen = 0
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        seen += 1
        if seen > _MAX_NODES:
            notes.append(f"plan has more than {_MAX_NODES} nodes; the rest is ignored")
            return
        yield node
        children = node.get("children")
        if isinstance(children, Sequence) and not isinstance(children, str | bytes):
            stack.extend(reversed(children))


def _command(plan_info: object) -> str | None:
    """The first node below the wrappers (`AdaptiveSparkPlan`, `WholeStageCodegen (1)`, ...)."""
    node = plan_info
    for _ in range(_MAX_NODES):
        if not isinstance(node, Mapping):
            return None
        name = node.get("nodeName")
        if not isinstance(name, str) or not name.strip():
            return None
        children = node.get("children")
        if name.startswith(_WRAPPERS) and isinstance(children, Sequence) and children:
            node = children[0]
            continue
        name = name.strip()
        return row_level_statement(node) if name in ROW_LEVEL_WRITES else name
    return None


def _node_datasets(
    node: Mapping[str, Any],
    name: str,
    described: Sequence[Block],
    types: Mapping[int, Field],
    notes: list[str],
) -> list[DatasetRef]:
    stripped = name.strip()
    written = write_datasets(node, stripped, described, types, notes)
    if written is not None:
        return written
    if stripped.startswith(("Scan ", "BatchScan", "FileScan", "HiveTableScan")):
        if stripped.startswith(_NOT_DATASETS):
            return []
        raw_meta = node.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        simple = node.get("simpleString")
        simple = simple if isinstance(simple, str) else ""
        raw_format = _text(meta.get("Format"))
        hive_attrs = map(parse_attribute, block_list(described, stripped, "Output"))
        location = _text(meta.get("Location")) or _search(_LOCATION_TEXT, simple)
        return _scan(
            stripped,
            _location_paths(location),
            _text(meta.get("ReadSchema")) or _search(_READ_SCHEMA_TEXT, simple),
            _delta_index(location) or raw_format,
            tuple(typed(a.name, a, types) for a in hive_attrs if a is not None),
            metrics_of(node, _INPUT_METRICS),
            notes,
            simple,
        )
    return []


def scan_datasets(node: PlanNode, types: Mapping[int, Field]) -> list[DatasetRef]:
    """The datasets a scan operator of the plan description reads (no metrics: those are
    in `sparkPlanInfo`). Column lineage names its inputs with these."""
    name = node.name.strip()
    if not name.startswith(("Scan ", "BatchScan", "FileScan", "HiveTableScan")):
        return []
    location = node.details.get("Location", "").strip()
    match = _LOCATION_DESCRIBED.match(location)
    paths = None
    if match is not None:
        items = [p.strip() for p in split_top(match["paths"]) if p.strip()]
        paths = (len(items), [p for p in items if not p.endswith("...")])
    attrs = [a for a in map(parse_attribute, node.detail_list("Output") or []) if a]
    fields = tuple(typed(a.name, a, types) for a in attrs)
    schema = node.details.get("ReadSchema", "").strip() or None
    return _scan(name, paths, schema, _delta_index(location), fields, {}, [], node.details.get(""))


def _delta_index(location: str | None) -> str | None:
    """`delta` for a scan of a Delta table's files (`PreparedDeltaFileIndex`,
    `TahoeBatchFileIndex`, ...), `_delta_log` for one of its transaction log."""
    if not location:
        return None
    index = location.split("(", 1)[0].split(" ", 1)[0]
    if index == "DeltaLogFileIndex":
        return _DELTA_LOG
    if index.startswith(("PreparedDelta", "Tahoe")):
        return "delta"
    return None


def _location_paths(location: str | None) -> tuple[int, list[str]] | str | None:
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
    if raw_format == _DELTA_LOG:
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
        declared, paths = located
        if declared > len(paths):
            notes.append(f"{name!r} reads {declared} paths but the plan lists {len(paths)}")
        paths = [p for p in paths if "/_delta_log/" not in p and not p.endswith("/_delta_log")]
        if len(paths) > 1:
            metrics = {}  # the node's totals cannot be split between its paths
        return [
            DatasetRef(
                "input", name, location=p, table=table, format=fmt, fields=fields, metrics=metrics
            )
            for p in paths
        ]
    if table is not None and name.startswith("Scan hive "):
        return [
            DatasetRef("input", name, table=table, format="hive", fields=fields, metrics=metrics)
        ]
    jdbc = re.match(r"Scan JDBCRelation\((?P<table>.*)\) \[numPartitions=\d+\]$", name)
    if jdbc is not None:
        notes.append(f"JDBC table {jdbc['table']} is read, but its url is not in the event log")
        return [
            DatasetRef(
                "input",
                name,
                jdbc=("", jdbc["table"]),
                format="jdbc",
                fields=fields,
                unknown_reason="JDBC url not in the event log",
            )
        ]
    v2 = _V2_JDBC_SCAN.match(name)
    if v2 is not None:  # a V2 JDBC catalog's table: the catalog is named, its url is not
        catalog = v2["catalog"].strip("`")
        notes.append(f"JDBC table {v2['table']} is read, but its url is not in the event log")
        return [
            DatasetRef(
                "input",
                name,
                jdbc=("", v2["table"]),
                jdbc_catalog=catalog,
                format="jdbc",
                fields=fields,
                unknown_reason=f"JDBC url of catalog {catalog!r} not in the event log",
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


def _attribute_types(described: Sequence[Block]) -> dict[int, Field]:
    """Types of attributes the plan reveals: scan read schemas and `cast(... as t) AS x#n`."""
    types: dict[int, Field] = {}
    for block in described:
        if block.name.startswith("DeserializeToObject"):
            types.update(_row_types(block))
        schema_text = block.details.get("ReadSchema")
        if schema_text and "Output" in block.details:
            try:
                by_name = {f.name: f for f in parse_struct(schema_text)}
            except ValueError:
                by_name = {}
            for item in block_list([block], block.name, "Output"):
                attr = parse_attribute(item)
                if attr is not None and attr.name in by_name:
                    types[attr.expr_id] = by_name[attr.name]
        for key in ("Output", "Results"):
            for item in block_list([block], block.name, key):
                expr, sep, alias = item.rpartition(" AS ")
                attr = parse_attribute(alias) if sep else None
                cast = re.fullmatch(
                    r"cast\(.* as (?P<type>[^()]+(?:\(\d+(?:,\s*\d+)?\))?)\)", expr, re.DOTALL
                )
                if attr is not None and cast is not None and attr.expr_id not in types:
                    with contextlib.suppress(ValueError):  # an exotic type stays unknown
                        types[attr.expr_id] = field_of(attr.name, cast["type"].strip())
    return types


def _row_types(block: Block) -> dict[int, Field]:
    """`DeserializeToObject` (the query a JDBC save runs) converts its input to rows of a
    schema it prints: `createexternalrow(..., StructField(id,LongType,false), ...)`, one
    field per input attribute when no field is nested."""
    fields = _STRUCT_FIELD.findall(block.details.get("Arguments", ""))
    attrs = [a for a in map(parse_attribute, block_list([block], block.name, "Input")) if a]
    if len(fields) != len(attrs) or "StructType(" in block.details.get("Arguments", ""):
        return {}
    types: dict[int, Field] = {}
    for attr, (name, type_name, scale) in zip(attrs, fields, strict=True):
        if name == attr.name and type_name in _ROW_TYPES:
            types[attr.expr_id] = Field(name, _ROW_TYPES[type_name] + scale)
    return types


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _search(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match[1] if match else None


def command_name(command: str | None) -> str | None:
    """The command part of a job name: `Execute InsertInto...Command` -> `execute_insert_...`."""
    return (normalize(command) or None) if command else None


def attribute_sources(description: object, wanted: Collection[int]) -> dict[int, lineage.Resolved]:
    """The dataset fields behind attributes an execution's plan defines, for a statement
    whose write names them in another execution (Delta MERGE)."""
    text = description if isinstance(description, str) else ""
    if not text or not wanted:
        return {}
    types = _attribute_types(parse_description(text))
    return lineage.resolve_attributes(text, wanted, types, scan_datasets)
