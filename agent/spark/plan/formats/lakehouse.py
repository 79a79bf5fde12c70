"""Delta Lake and Iceberg statements in a plan: the table each writes or reads, as the plan
names it, with the version it read when the plan shows one.

Delta (names as Delta 4.x prints them):

* `MergeIntoCommand` / `UpdateCommand`: `Delta[version=<read>, file:<table>]` and, for a
  catalog table, its name; `DeleteCommand`: the table as a `SubqueryAlias` (a path table
  prints `spark_catalog.delta.`<path>``), no version. Each names the table as output and as
  input (the statement reads the version it rewrites).
* `AppendDataExecV1` / `OverwriteByExpressionExecV1` on `DeltaTableV2(…,<location>,
  Some(CatalogTable(… Database: d … Table: t …)))`; on `StagedDeltaTableV2` (the insert a CTAS
  runs) nothing: the CTAS names the table.
* path writes (`SaveIntoDataSourceCommand` of `DeltaDataSource`) are read by `writes`.
* Delta runs the query of these writes (not of MERGE / UPDATE / DELETE) as a nested
  execution: the write carries the ids of the attributes the query returns (`query`), by
  which the translator recognizes that execution and takes its lineage and schema.

Iceberg: V2 writes whose `IcebergWrite(table=<catalog>.<ns>.<table>, …)` names the table
(`AppendData`, `OverwriteByExpression`, `ReplaceData` for MERGE / UPDATE / DELETE, `WriteDelta`);
scans `BatchScan <catalog>.<ns>.<table>` with `snapshotId=<id>` (the snapshot read, also of a
time-travel read); metadata tables (`….snapshots`) name their table.

DDL of both (and of any catalog): `CreateTable` and the CTAS commands (table, schema and the
`LOCATION` when given), `DropTable`, `TruncateTable`, `RenameTable`, `AlterTable…` and their
V1 `…Command` forms, each with its `lifecycleStateChange`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent import linear
from agent.spark.plan.attributes.dml import (
    TABLE_SCAN,
    TYPE_NAMES,
    delete_lineage,
    merge_lineage,
    query_attributes,
    query_lineage,
    update_lineage,
)
from agent.spark.plan.datasets import DatasetRef, WrittenLineage
from agent.spark.plan.syntax.schema import Field, split_top
from agent.spark.plan.syntax.tables import TableIdent, parse_table_ident
from agent.spark.plan.syntax.text import Block, block_detail, parse_plan

_DELTA_VERSIONED = linear.compile(r"Delta\[version=(?P<version>\d+), (?P<location>[^\]]+)\]")
_DELTA_TABLE_V2 = linear.compile(r"^DeltaTableV2\([^,]*,(?P<location>[^,]+),")
_CATALOG_TABLE = linear.compile(r"\nDatabase: (?P<db>[^\n]+)\nTable: (?P<table>[^\n]+)\n")
_CATALOG_NAME = linear.compile(r"Catalog: (?P<catalog>[^\n]+)\n")
_ICEBERG_WRITE = linear.compile(r"IcebergWrite\(table=(?P<table>[^,()]+),")
#: `snapshotId=` where a word starts: at the start, or after a character no word holds
_SNAPSHOT = linear.compile(rf"(?:^|[^{linear.WORD}])snapshotId=(?P<id>-?\d+)")
_COLUMN = linear.compile(
    rf"ColumnImpl\((?P<name>[^,()]+),(?P<type>[{linear.WORD}]+?)Type(?P<args>\(\d+,\d+\))?,"
)
_TABLE_SPEC = linear.compile(
    rf"TableSpec\(Map\([^)]*\),(?:Some\((?P<provider>[{linear.WORD}]+)\)|None),Map\([^)]*\),"
)
_SPEC_LOCATION = linear.compile(r"(?:Some\((?P<location>[^()]+)\)|None)")
#: A Delta path table as its `SubqueryAlias` prints it (stripped).
_DELTA_PATH = linear.compile(r"spark_catalog\.delta\.`(?P<path>.+)`")
#: A table name that is a URI (`s3a://b/t`, `file:/t`).
_URI = linear.compile(rf"^[A-Za-z][{linear.WORD}+.-]*:")
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
#: Table DDL by the first word of the command (V2 exec and V1 `…Command` forms).
_DDL: Final = (
    ("CreateTable", "CREATE"),
    ("DropTable", "DROP"),
    ("TruncateTable", "TRUNCATE"),
    ("RenameTable", "RENAME"),
    ("AlterTableRename", "RENAME"),
    ("AlterTable", "ALTER"),
)
#: The catalog plugins of the formats read here, as V2 commands print them first.
_LAKEHOUSE_CATALOGS: Final = ("org.apache.spark.sql.delta.catalog.", "org.apache.iceberg.spark.")
_CTAS: Final = frozenset(
    {
        "AtomicCreateTableAsSelect",
        "CreateTableAsSelect",
        "AtomicReplaceTableAsSelect",
        "ReplaceTableAsSelect",
    }
)


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
    return _fed(ref, split_top(args)[1:])


def delta_command(command: str, args: str, resolved: str = "") -> list[DatasetRef] | None:
    """Delta's table commands (`OPTIMIZE`, `RESTORE`, `VACUUM`, `TRUNCATE`, `CLONE`): the
    table they commit to (in their arguments, or in those of their `ResolvedTable` child:
    `DeltaCatalog@…, <name>, DeltaTableV2(…)`), with its lifecycle change; RESTORE also
    reads the version it restores. None when neither names a table."""
    tokens = [t.strip() for t in split_top(args)]
    node = f"Execute {command}"
    if command == "CreateDeltaTableCommand":  # CLONE: `t, <mode>, …, <location>, …`
        table = parse_table_ident(tokens[0]) if tokens else None
        location = next((t for t in tokens[1:] if _is_path(t)), None)
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
    if found.table is None and named is not None and not _is_path(named.table):
        found = dataclasses.replace(found, table=named)  # the description cut CatalogTable
    written = dataclasses.replace(found, lifecycle=DELTA_COMMANDS[command], fields=(), columns=None)
    if command != "RestoreTableCommand":
        return [written]
    restored = _RESTORED.search(args)
    version = restored["version"] if restored else None
    return [written, dataclasses.replace(written, role="input", lifecycle=None, version=version)]


def _fed(ref: DatasetRef, tokens: Sequence[str]) -> DatasetRef:
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


def table_ddl(
    node: Mapping[str, Any], command: str, args: str, notes: list[str]
) -> list[DatasetRef] | None:
    """DDL on a catalog table (CREATE, CTAS, DROP, TRUNCATE, RENAME, ALTER): the table with
    its lifecycle change; None when `command` is no table DDL."""
    head = command.split(" ", 1)[0]
    lifecycle: str | None = "OVERWRITE" if "Replace" in head else "CREATE"
    if head not in _CTAS:
        lifecycle = next((change for prefix, change in _DDL if head.startswith(prefix)), None)
        if lifecycle is None or head.startswith(("CreateTableLike", "AlterTableAddPartition")):
            return None
    tokens = [t.strip() for t in split_top(args)]
    # V2 commands print the catalog object first (`DeltaCatalog@…`, `SparkCatalog@…`), the
    # session catalog as `V2SessionCatalog(spark_catalog)` (DROP TABLE of a session table)
    session = tokens[0] if tokens and tokens[0].startswith("V2SessionCatalog(") else None
    plugin = tokens[0] if tokens and "@" in tokens[0] and "." in tokens[0] else None
    if plugin is not None and not plugin.startswith(_LAKEHOUSE_CATALOGS):
        return None  # another catalog's (JDBC, ...): its tables are not named here
    rest = tokens[1:] if plugin or session else tokens
    table = next((t for t in map(parse_table_ident, rest[:1]) if t), None)
    if table is None:
        notes.append(f"no table in {command!r}")
        return [DatasetRef("output", command, unknown_reason=f"table missing from {command!r}")]
    location = None
    if table.database == "delta" and _is_path(table.table):  # delta.`/path`: a path table
        location, table = table.table, None
    elif plugin is not None and plugin.split("@")[0].endswith("DeltaCatalog"):
        table = TableIdent(table.table, table.database, table.catalog or "spark_catalog")
    previous = None
    renamed = parse_table_ident(rest[1]) if lifecycle == "RENAME" and len(rest) > 1 else None
    if (
        renamed is not None and table is not None
    ):  # `db.old, new`: the new name keeps the old one's database
        previous = table
        database = renamed.database or table.database
        table = TableIdent(renamed.table, database, renamed.catalog or table.catalog)
    spec = _TABLE_SPEC.search(args)
    provider = spec["provider"].lower() if spec and spec["provider"] else None
    if provider is None and plugin is not None and "iceberg" in plugin:
        provider = "iceberg"
    elif provider is None and plugin is not None and "DeltaCatalog" in plugin:
        provider = "delta"  # a table of the session catalog; only Delta ones have versions
    if spec is not None:
        # TableSpec(properties, provider, options, location, comment, …)
        parts = split_top(args[spec.start() + len("TableSpec(") :])
        if len(parts) > 3:
            found = _SPEC_LOCATION.fullmatch(parts[3].strip())
            location = found["location"] if found and found["location"] else location
    fields = tuple(_column(m) for m in _COLUMN.finditer(args))
    ddl = head not in _CTAS
    ref = DatasetRef(
        "output",
        command,
        location=location,
        table=table,
        format=provider,
        fields=fields,
        lifecycle=lifecycle,
        ddl=ddl,
        previous=previous,
    )
    return [ref if ddl else _fed(ref, rest[1:])]


def _is_path(name: str) -> bool:
    """Whether a table name is a path (`/data/t`, `s3a://b/t`, `file:/t`)."""
    return name.startswith("/") or _URI.match(name) is not None


def _column(match: linear.Match) -> Field:
    kind = TYPE_NAMES.get(match["type"])
    if kind == "decimal" and match["args"]:
        kind += match["args"]
    return Field(match["name"].strip(), kind)


#: Iceberg's row-level writes, named after the statement that planned them.
ROW_LEVEL_WRITES: Final = frozenset({"ReplaceData", "WriteDelta"})
_MAX_ROW_LEVEL_NODES: Final = 10_000  # a bound on the walk below one write


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
