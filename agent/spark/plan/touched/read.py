"""Read what a SQL execution touches from its `sparkPlanInfo` tree and plan description.

`read_plan` walks the `sparkPlanInfo` tree (node names, metadata, metric accumulator ids)
and looks up the `physicalPlanDescription` (``explain formatted``, see `syntax.text`) for what
the tree leaves out: the attribute lists (``Output [2]: [id#3L, k#4L]``), aliases and the
arguments of commands whose tree node prints none (CTAS). The result names each dataset by
what Spark printed (a path, a catalog table, a JDBC url); naming it the OpenLineage way is
the translator's job. Written datasets carry their column lineage (`lineage`).

Understood: the scans `scans` reads (files of any `FileFormat` with their read schema, Hive
tables, JDBC relations, Kafka topics, Iceberg tables) and the write commands `writes` reads.
Scans and writes of any other kind become datasets with `unknown_reason` set; plain operators
and DDL commands contribute nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Final

from agent import linear
from agent.spark.plan.datasets import DatasetRef, FileRead, PlanSummary
from agent.spark.plan.formats.delta import delta_save_query
from agent.spark.plan.formats.iceberg import ROW_LEVEL_WRITES, row_level_statement
from agent.spark.plan.formats.kafka import stream_topics
from agent.spark.plan.syntax.schema import Field, field_of, parse_struct
from agent.spark.plan.syntax.tables import normalize, parse_table_ident
from agent.spark.plan.syntax.text import (
    Block,
    PlanNode,
    block_detail,
    block_list,
    parse_attribute,
    parse_description,
)
from agent.spark.plan.touched import lineage
from agent.spark.plan.touched.reading import Reading
from agent.spark.plan.touched.scans import (
    DELTA_LOG,
    delta_index,
    location_paths,
    node_scans,
    scan_datasets,
    text_of,
)
from agent.spark.plan.touched.writes import write_datasets

#: Operators that only wrap the node that names an execution.
_WRAPPERS: Final = ("AdaptiveSparkPlan", "ResultQueryStage", "WholeStageCodegen", "InputAdapter")
_MAX_NODES: Final = 100_000
_DELTA_STATE_SCAN: Final = "Scan ExistingRDD Delta Table State "
_DELTA_STATE = linear.compile(rf"^{_DELTA_STATE_SCAN}.*? - (?P<table>.+)/_delta_log$")
_MICRO_BATCH_SCAN_TABLE = linear.compile(
    rf"(?m)^[{linear.WORD}]*Scan\(table=([^,(){linear.SPACE}]+)"
)
_STRUCT_FIELD = linear.compile(
    rf"StructField\(([^,()]+),([{linear.WORD}]+)Type(\(\d+,\d+\))?,(?:true|false)\)"
)
#: `cast(... as decimal(10,2))`, the whole of an item's expression
_CAST = linear.compile(rf"(?s)cast\(.* as (?P<type>[^()]+(?:\(\d+(?:,[{linear.SPACE}]*\d+)?\))?)\)")
#: An attribute of a plan description (`value#16`, `obj#31: java.lang.String`), not a
#: number Spark prints after a space (`Delta Table State #3`).
_EXPR_ID = linear.compile(rf"[^{linear.SPACE}#]#(\d+)")
#: The V2 write of a streaming micro-batch: `WriteToDataSourceV2` with these arguments.
_MICRO_BATCH_WRITE = linear.compile(r"(?s)^MicroBatchWrite\[epoch: \d+, writer: (?P<writer>.*)\]$")
_ICEBERG_WRITE = linear.compile(rf"^Iceberg[{linear.WORD}]*\(table=(?P<table>[^,()]+)[,)]")
_KAFKA_WRITE: Final = "kafka010.KafkaStreamingWrite"
_ROW_TYPES: Final = {
    "Long": "long", "Integer": "integer", "Short": "short", "Byte": "byte", "Double": "double",
    "Float": "float", "String": "string", "Boolean": "boolean", "Date": "date",
    "Timestamp": "timestamp", "TimestampNTZ": "timestamp_ntz", "Binary": "binary",
    "Decimal": "decimal",
}  # fmt: skip


def read_plan(plan_info: object, description: object) -> PlanSummary:
    """Summarize one `sparkPlanInfo` tree plus its `physicalPlanDescription` (both untrusted)."""
    text = description if isinstance(description, str) else ""
    described = parse_description(text)
    types = _attribute_types(described)
    notes: list[str] = []
    reading = Reading(described, types, notes)
    datasets: list[DatasetRef] = []
    logs: list[str] = []
    scans: list[list[DatasetRef]] = []
    for node in _walk(plan_info, notes):
        name = node.get("nodeName")
        if not isinstance(name, str) or not name.strip():
            continue
        found = _node_datasets(node, name, reading)
        if len(found) > 1 and all(r.role == "input" and r.location for r in found):
            scans.append(found)
        datasets.extend(found)
        logs.extend(_delta_logs(node, name))
    datasets = [delta_save_query(ref, text) for ref in datasets]
    with_lineage = lineage.attach(datasets, text, types, _every_path(scans), notes)
    with_lineage = [lineage.kafka_columns(ref) for ref in with_lineage]
    with_lineage += lineage.save_inputs(with_lineage)
    command = _command(plan_info)
    return PlanSummary(
        command,
        tuple(with_lineage),
        tuple(notes),
        tuple(dict.fromkeys(logs)),
        _file_reads(described, types),
    )


def file_reads(description: object) -> tuple[tuple[FileRead, ...], int | None]:
    """The file scans a plan description prints (what `read_plan` adds to its summary), and
    the highest attribute id it prints: for a plan that is not otherwise read (a reader's
    schema inference, whose relation gets the next ids)."""
    text = description if isinstance(description, str) else ""
    described = parse_description(text)
    return _file_reads(described, _attribute_types(described)), _last_id(text)


def _file_reads(described: Sequence[Block], types: Mapping[int, Field]) -> tuple[FileRead, ...]:
    found: list[FileRead] = []
    for block in described:
        if not block.name.startswith("Scan ") or "Location" not in block.details:
            continue
        node = PlanNode(block.op_id, block.name, block.details, counts=block.counts)
        columns = [a.expr_id for a in map(parse_attribute, node.detail_list("Output") or []) if a]
        refs = [r for r in scan_datasets(node, types) if r.location is not None]
        if columns and refs:
            found.append(FileRead(tuple(columns), tuple(refs)))
    return tuple(found)


def _last_id(text: str) -> int | None:
    return max(map(int, _EXPR_ID.findall(text)), default=None)


def _every_path(scans: Sequence[Sequence[DatasetRef]]) -> lineage.ScanDatasets:
    """`scan_datasets`, but naming every path a scan reads: the plan description prints a
    scan's first path only (`InMemoryFileIndex [p1, ... 1 entries]`), the `sparkPlanInfo`
    node of the same scan lists more, in the same order. Column lineage then comes from
    every path the scan read, as its inputs do."""

    def datasets(node: PlanNode, types: Mapping[int, Field]) -> list[DatasetRef]:
        refs = scan_datasets(node, types)
        listed = [r.location for r in refs]
        if not listed or None in listed:
            return refs
        for group in scans:
            paths = [r.location for r in group]
            if len(paths) > len(listed) and paths[: len(listed)] == listed:
                return [dataclasses.replace(refs[0], location=p) for p in paths]
        return refs

    return datasets


def _delta_logs(node: Mapping[str, Any], name: str) -> list[str]:
    """The tables whose transaction log a scan reads: `DeltaLogFileIndex [<t>/_delta_log/…]`
    or `Scan ExistingRDD Delta Table State #n - <t>/_delta_log`."""
    stripped = name.strip()  # a node name: `$` is its end
    state = _DELTA_STATE.match(stripped) if stripped.startswith(_DELTA_STATE_SCAN) else None
    if state is not None:
        return [state["table"]]
    raw_meta = node.get("metadata")
    location = text_of(raw_meta.get("Location")) if isinstance(raw_meta, Mapping) else None
    if delta_index(location) != DELTA_LOG:
        return []
    located = location_paths(location)
    paths = located[1] if isinstance(located, tuple) else []
    return [p.split("/_delta_log", 1)[0] for p in paths if "/_delta_log" in p]


def returned_rows(description: object, query: Collection[int] = ()) -> DatasetRef | None:
    """What the plan's root returns (see `lineage.returned`): a streaming micro-batch's
    rows, which its sink, outside the plan, writes; with `query`, the query of a Delta write
    that this nested execution runs, if its root returns those attributes."""
    text = description if isinstance(description, str) else ""
    types = _attribute_types(parse_description(text))
    return lineage.returned(text, types, scan_datasets, query)


def micro_batch_sink(description: object) -> tuple[DatasetRef, ...]:
    """The sink a streaming micro-batch's V2 write names (`WriteToDataSourceV2` with
    `MicroBatchWrite[epoch: N, writer: W]`): an Iceberg table (`IcebergStreamingWrite(table=
    lake.db.t, format=PARQUET)`), by its name as printed; a Kafka sink (`KafkaStreamingWrite@h`)
    by the topics of its rows (`formats.kafka.stream_topics`); none for other writers
    (console, memory) and V1 sinks (files, Delta, `foreachBatch`), which the plan omits."""
    text = description if isinstance(description, str) else ""
    if "WriteToDataSourceV2" not in text:
        return ()
    described = parse_description(text)
    arguments = block_detail(described, "WriteToDataSourceV2", "Arguments") or ""
    match = _MICRO_BATCH_WRITE.match(arguments.strip())
    if match is None:
        return ()
    writer = match["writer"].strip()
    iceberg = _ICEBERG_WRITE.match(writer)
    table = parse_table_ident(iceberg["table"].strip()) if iceberg is not None else None
    if table is not None:
        return (DatasetRef("output", "WriteToDataSourceV2", table=table, format="iceberg"),)
    if _KAFKA_WRITE in writer:
        return tuple(stream_topics("WriteToDataSourceV2", described))
    return ()


def merge_source_rows(description: object) -> tuple[int, ...]:
    """The attributes the root of a Delta MERGE's "materialize source" execution returns,
    in order: the source's columns, whatever ids the statement gave them."""
    text = description if isinstance(description, str) else ""
    return lineage.returned_ids(text) if text else ()


def merge_source_filters(description: object) -> lineage.Resolved:
    """The dataset fields that decide which rows the root of a Delta MERGE's "materialize
    source" execution returns (its filters, joins, groupings: INDIRECT)."""
    rows = returned_rows(description)
    written = rows.columns if rows is not None else None
    if written is None:
        return ()
    return tuple(
        (ref, f.field, f.transformations)
        for f in written.lineage.dataset
        for ref in written.inputs.get(f.scan, ())
    )


def merge_source_scans(description: object) -> tuple[tuple[int, ...], ...]:
    """The attributes of each scan of a Delta MERGE's materialized source in this plan."""
    text = description if isinstance(description, str) else ""
    return lineage.materialized_scans(text) if "mergeMaterializedSource" in text else ()


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


def _node_datasets(node: Mapping[str, Any], name: str, reading: Reading) -> list[DatasetRef]:
    stripped = name.strip()
    written = write_datasets(node, stripped, reading)
    if written is not None:
        return written
    return node_scans(node, stripped, reading)


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
                cast = _CAST.fullmatch(expr) if expr.startswith("cast(") else None
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
