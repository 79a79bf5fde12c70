"""Table DDL in a plan, of any catalog the agent names tables of (the session catalog, Delta's
and Iceberg's): `CreateTable` and the CTAS commands (table, schema and the `LOCATION` when
given), `DropTable`, `TruncateTable`, `RenameTable`, `AlterTable…` and their V1 `…Command`
forms, each with its `lifecycleStateChange`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agent import linear
from agent.spark.plan.attributes.dml import TYPE_NAMES
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.formats.delta import fed_by_query, is_path
from agent.spark.plan.syntax.schema import Field, split_top
from agent.spark.plan.syntax.tables import TableIdent, parse_table_ident

_COLUMN = linear.compile(
    rf"ColumnImpl\((?P<name>[^,()]+),(?P<type>[{linear.WORD}]+?)Type(?P<args>\(\d+,\d+\))?,"
)
_TABLE_SPEC = linear.compile(
    rf"TableSpec\(Map\([^)]*\),(?:Some\((?P<provider>[{linear.WORD}]+)\)|None),Map\([^)]*\),"
)
_SPEC_LOCATION = linear.compile(r"(?:Some\((?P<location>[^()]+)\)|None)")
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
    if table.database == "delta" and is_path(table.table):  # delta.`/path`: a path table
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
    return [ref if ddl else fed_by_query(ref, rest[1:])]


def _column(match: linear.Match) -> Field:
    kind = TYPE_NAMES.get(match["type"])
    if kind == "decimal" and match["args"]:
        kind += match["args"]
    return Field(match["name"].strip(), kind)
