"""Iceberg in a plan: V2 writes whose `IcebergWrite(table=<catalog>.<ns>.<table>, …)` names
the table (`AppendData`, `OverwriteByExpression`, `ReplaceData` for MERGE / UPDATE / DELETE,
`WriteDelta`), told apart by the shape below the write (`row_level_statement`); scans
`BatchScan <catalog>.<ns>.<table>` with `snapshotId=<id>` (the snapshot read, also of a
time-travel read); metadata tables (`….snapshots`) name their table; a V2 delete that drops
whole files (`DeleteFromTable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent import linear
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.schema import Field, split_top
from agent.spark.plan.syntax.tables import parse_table_ident

_ICEBERG_WRITE = linear.compile(r"IcebergWrite\(table=(?P<table>[^,()]+),")
#: `snapshotId=` where a word starts: at the start, or after a character no word holds
_SNAPSHOT = linear.compile(rf"(?:^|[^{linear.WORD}])snapshotId=(?P<id>-?\d+)")
#: The Iceberg metadata tables (`<table>.<name>`): reading one reads the table's metadata.
ICEBERG_METADATA_TABLES: Final = frozenset(
    {
        "all_data_files",
        "all_delete_files",
        "all_entries",
        "all_files",
        "all_manifests",
        "data_files",
        "delete_files",
        "entries",
        "files",
        "history",
        "manifests",
        "metadata_log_entries",
        "partitions",
        "position_deletes",
        "refs",
        "snapshots",
    }
)
#: Iceberg's row-level writes, named after the statement that planned them.
ROW_LEVEL_WRITES: Final = frozenset({"ReplaceData", "WriteDelta"})
_MAX_ROW_LEVEL_NODES: Final = 10_000  # a bound on the walk below one write


def iceberg_write(name: str, args: str) -> DatasetRef | None:
    """A V2 write into an Iceberg table; None if the arguments name none."""
    matched = _ICEBERG_WRITE.search(args)
    table = parse_table_ident(matched["table"]) if matched else None
    if table is None:
        return None
    lifecycle = "OVERWRITE" if name.startswith("Overwrite") else None
    return DatasetRef("output", name, table=table, format="iceberg", lifecycle=lifecycle)


def iceberg_scan(name: str, simple: str, fields: tuple[Field, ...]) -> list[DatasetRef] | None:
    """`BatchScan <catalog>.<ns>.<table>`: the table read and its snapshot; None if the scan
    is not of a catalog table."""
    if not name.startswith("BatchScan ") or "Iceberg" not in simple:
        return None
    text = name.removeprefix("BatchScan ").strip()
    table = parse_table_ident(text)
    version = None
    if table is None:  # a metadata table: `catalog.ns.table.snapshots`
        base, _, kind = text.rpartition(".")
        table = parse_table_ident(base) if kind in ICEBERG_METADATA_TABLES else None
        fields = ()
    else:
        snapshot = _SNAPSHOT.search(simple)
        version = snapshot["id"] if snapshot else None
    if table is None:
        return None
    return [
        DatasetRef("input", name, table=table, format="iceberg", fields=fields, version=version)
    ]


def v2_delete(args: str) -> list[DatasetRef] | None:
    """`DeleteFromTable <catalog>.<ns>.<table>, [<condition>]`: a V2 table's delete that
    drops whole files (Iceberg's metadata delete, or a TRUNCATE without a condition)."""
    tokens = split_top(args)
    table = parse_table_ident(tokens[0]) if tokens else None
    if table is None:
        return None
    return [DatasetRef("output", "DeleteFromTable", table=table)]


def row_level_statement(write: Mapping[str, Any]) -> str:
    """Iceberg plans MERGE, UPDATE and DELETE alike (`ReplaceData` copy-on-write, `WriteDelta`
    merge-on-read): named after the statement, as Spark's logical plan calls it, by the shape
    below the write. MERGE joins through `MergeRows`; copy-on-write DELETE keeps the rows a
    `Filter NOT (<condition>)` lets through; UPDATE rewrites them in a `Project`."""
    delete = False
    stack = [write]
    for _ in range(_MAX_ROW_LEVEL_NODES):
        if not stack:
            break
        node = stack.pop()
        name = node.get("nodeName")
        if isinstance(name, str) and name.startswith("MergeRows"):
            return "MergeIntoTable"
        if name == "Filter" and str(node.get("simpleString", "")).startswith("Filter NOT "):
            delete = True
        children = node.get("children")
        if isinstance(children, Sequence):
            stack.extend(c for c in children if isinstance(c, Mapping))
    return "DeleteFromTable" if delete else "UpdateTable"
