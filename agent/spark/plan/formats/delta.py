"""Delta Lake statements in a plan: the table each writes or reads, as the plan names it,
with the version it read when the plan shows one (names as Delta 4.x prints them).

* `MergeIntoCommand` / `UpdateCommand`: `Delta[version=<read>, file:<table>]` and, for a
  catalog table, its name; `DeleteCommand`: the table as a `SubqueryAlias` (a path table
  prints `spark_catalog.delta.`<path>``), no version. Each names the table as output and as
  input (the statement reads the version it rewrites).
* `AppendDataExecV1` / `OverwriteByExpressionExecV1` on `DeltaTableV2(…,<location>,
  Some(CatalogTable(… Database: d … Table: t …)))`; on `StagedDeltaTableV2` (the insert a CTAS
  runs) nothing: the CTAS names the table.
* Delta's table commands (`OPTIMIZE`, `RESTORE`, `VACUUM`, `TRUNCATE`, `CLONE`).
* path writes (`SaveIntoDataSourceCommand` of `DeltaDataSource`) are read by `writes`.
* Delta runs the query of these writes (not of MERGE / UPDATE / DELETE) as a nested
  execution: the write carries the ids of the attributes the query returns (`query`), by
  which the translator recognizes that execution and takes its lineage and schema
  (`fed_by_query`, which CTAS commands of any format use too, see `ddl`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from agent import linear
from agent.spark.plan.attributes.dml import (
    TABLE_SCAN,
    delete_lineage,
    merge_lineage,
    query_attributes,
    query_lineage,
    update_lineage,
)
from agent.spark.plan.datasets import DatasetRef, WrittenLineage
from agent.spark.plan.syntax.schema import split_top
from agent.spark.plan.syntax.tables import TableIdent, parse_table_ident
from agent.spark.plan.syntax.text import Block, block_detail, parse_plan

_DELTA_VERSIONED = linear.compile(r"Delta\[version=(?P<version>\d+), (?P<location>[^\]]+)\]")
_DELTA_TABLE_V2 = linear.compile(r"^DeltaTableV2\([^,]*,(?P<location>[^,]+),")
_CATALOG_TABLE = linear.compile(r"\nDatabase: (?P<db>[^\n]+)\nTable: (?P<table>[^\n]+)\n")
_CATALOG_NAME = linear.compile(r"Catalog: (?P<catalog>[^\n]+)\n")
#: A Delta path table as its `SubqueryAlias` prints it (stripped).
_DELTA_PATH = linear.compile(r"spark_catalog\.delta\.`(?P<path>.+)`")
#: A table name that is a URI (`s3a://b/t`, `file:/t`).
_URI = linear.compile(rf"^[A-Za-z][{linear.WORD}+.-]*:")
#: Delta's row-level commands (after `Execute `) and their column lineage.
_DML: Final = {
    "MergeIntoCommand": lambda args, _: merge_lineage(args),
    "UpdateCommand": update_lineage,
    "DeleteCommand": delete_lineage,
}
DELTA_DML: Final = frozenset(_DML)
#: Delta's table commands (after `Execute `) and the lifecycle change of each.
DELTA_COMMANDS: Final[dict[str, str | None]] = {
    "OptimizeTableCommand": None,
    "VacuumTableCommand": None,
    "RestoreTableCommand": "OVERWRITE",
    "TruncateDeltaTableCommand": "TRUNCATE",
    "CreateDeltaTableCommand": "CREATE",
}
_MAX_WALKED: Final = 10_000  # a bound on the walk through one plan description
_RESTORED = linear.compile(r"DeltaTimeTravelSpec\([^,]*,Some\((?P<version>\d+)\)")


def delta_dml(command: str, args: str, described: Sequence[Block]) -> list[DatasetRef] | None:
    """MERGE / UPDATE / DELETE of a Delta table: the table written and read; None if the
    command names no table."""
    versioned = _DELTA_VERSIONED.search(args)
    tokens = [t.strip() for t in split_top(args)]
    table = next(
        (t for t in map(parse_table_ident, (x for x in tokens if x.startswith("`"))) if t),
        None,
    )
    location = versioned["location"].strip() if versioned else None
    version = versioned["version"] if versioned else None
    if location is None:  # DELETE: the table as its SubqueryAlias
        alias = (block_detail(described, "SubqueryAlias", "Arguments") or "").strip()
        path = _DELTA_PATH.fullmatch(alias)
        if path is not None:
            location = path["path"]
        elif table is None:
            table = parse_table_ident(alias)
    if location is None and table is None:
        return None
    node = f"Execute {command}"
    read = DatasetRef(
        "input", node, location=location, table=table, format="delta", version=version
    )
    written = DatasetRef("output", node, location=location, table=table, format="delta")
    dml = _DML[command](args, described)
    if dml is not None:
        read = dataclasses.replace(read, fields=dml.fields)
        lineage = dml.lineage
        if dml.assigned:  # resolved in the statement's other executions, if at all
            lineage = dataclasses.replace(lineage, incomplete=tuple(dml.assigned))
        columns = WrittenLineage(lineage, {TABLE_SCAN: (read,)}, dml)
        written = dataclasses.replace(written, fields=dml.fields, columns=columns)
    return [written, read]


def delta_v2_write(name: str, args: str) -> DatasetRef | None:
    """An insert into a Delta catalog table (`DeltaTableV2(…)`); None for another table
    (a CTAS's staged table prints no location: the CTAS names it)."""
    matched = _DELTA_TABLE_V2.match(args.strip())
    if matched is None:
        return None
    table_text = args.split("CatalogTable(", 1)[-1] if "CatalogTable(" in args else ""
    named = _CATALOG_TABLE.search("\n" + table_text) if table_text else None
    catalog = _CATALOG_NAME.search(table_text) if table_text else None
    table = None
    if named is not None:
        in_catalog = catalog["catalog"].strip() if catalog else None
        table = TableIdent(named["table"].strip(), named["db"].strip(), in_catalog)
    lifecycle = "OVERWRITE" if name.startswith("Overwrite") else None
    ref = DatasetRef(
        "output",
        name,
        location=matched["location"].strip(),
        table=table,
        format="delta",
        lifecycle=lifecycle,
    )
    return fed_by_query(ref, split_top(args)[1:])


def delta_command(command: str, args: str, resolved: str = "") -> list[DatasetRef] | None:
    """Delta's table commands (`OPTIMIZE`, `RESTORE`, `VACUUM`, `TRUNCATE`, `CLONE`): the
    table they commit to (in their arguments, or in those of their `ResolvedTable` child:
    `DeltaCatalog@…, <name>, DeltaTableV2(…)`), with its lifecycle change; RESTORE also
    reads the version it restores. None when neither names a table."""
    tokens = [t.strip() for t in split_top(args)]
    node = f"Execute {command}"
    if command == "CreateDeltaTableCommand":  # CLONE: `t, <mode>, …, <location>, …`
        table = parse_table_ident(tokens[0]) if tokens else None
        location = next((t for t in tokens[1:] if is_path(t)), None)
        if table is None and location is None:
            return None
        change = "OVERWRITE" if "Overwrite" in tokens[1:2] else "CREATE"
        return [DatasetRef("output", node, location, table, format="delta", lifecycle=change)]
    child = [t.strip() for t in split_top(resolved)]
    both = [*tokens, *child]
    found = next((delta_v2_write(node, t) for t in both if t.startswith("DeltaTableV2(")), None)
    if found is None:
        return None
    named = parse_table_ident(child[1]) if len(child) > 1 and "@" in child[0] else None
    if found.table is None and named is not None and not is_path(named.table):
        found = dataclasses.replace(found, table=named)  # the description cut CatalogTable
    written = dataclasses.replace(found, lifecycle=DELTA_COMMANDS[command], fields=(), columns=None)
    if command != "RestoreTableCommand":
        return [written]
    restored = _RESTORED.search(args)
    version = restored["version"] if restored else None
    return [written, dataclasses.replace(written, role="input", lifecycle=None, version=version)]


def fed_by_query(ref: DatasetRef, tokens: Sequence[str]) -> DatasetRef:
    """A write whose query runs as another execution: its columns, assigned from the
    query's output attributes (resolved there, see `dml.query_lineage`). The query is the
    arguments up to the next object (`TableSpec(…)`, `org.apache…`)."""
    query = []
    for token in tokens:
        if token.strip().startswith(("TableSpec(", "org.apache.")):
            break
        query.append(token)
    text = ",".join(query).strip()
    if ref.format == "delta":  # Delta runs the query as a nested execution of its own
        ref = dataclasses.replace(ref, query=query_attributes(text))
    dml = query_lineage(text)
    if dml is None:
        return ref
    columns = WrittenLineage(dml.lineage, {}, dml)
    return dataclasses.replace(ref, fields=ref.fields or dml.fields, columns=columns)


def delta_save_query(ref: DatasetRef, description: str) -> DatasetRef:
    """A Delta write by path (`SaveIntoDataSourceCommand` of `DeltaDataSource`) runs its
    query as a nested execution: `ref` with the attributes that query returns, as the
    command's child in the plan description prints them (`Project [...]`, `Range (…, [id#0L],
    …)`, `LogicalRDD [...]`); any other reference as it is."""
    if ref.role != "output" or ref.format != "delta" or ref.node != "SaveIntoDataSourceCommand":
        return ref
    stack = [parse_plan(description).root]
    for _ in range(_MAX_WALKED):  # the command is the root's child: a short walk
        node = stack.pop() if stack else None
        if node is None:
            break
        if node.name.strip() == ref.node and node.children:
            child = node.children[0]
            text = f"{child.name} {child.details.get('Arguments', '')}"
            return dataclasses.replace(ref, query=query_attributes(text))
        stack.extend(node.children)
    return ref


def is_path(name: str) -> bool:
    """Whether a table name is a path (`/data/t`, `s3a://b/t`, `file:/t`)."""
    return name.startswith("/") or _URI.match(name) is not None
