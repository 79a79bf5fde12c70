"""Write commands in a plan: what each writes, as the plan names it.

`write_datasets` reads the node of a `sparkPlanInfo` tree that writes (with the plan
description's blocks for what the node itself does not print) into an output
`DatasetRef`: `InsertIntoHadoopFsRelationCommand` (path, format, mode, written columns),
the CTAS commands (the table only: the insert they run names its path), `InsertIntoHiveTable`,
`SaveIntoDataSourceCommand` (a path option or an unredacted JDBC url), INSERT OVERWRITE
DIRECTORY (`formats.directories`), V2 writes into
JDBC catalog tables (by table; the url stays in the catalog's configuration). Other writes
give a dataset with `unknown_reason` and a note, never silence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent import linear
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.formats.ddl import table_ddl
from agent.spark.plan.formats.delta import (
    DELTA_COMMANDS,
    DELTA_DML,
    delta_command,
    delta_dml,
    delta_v2_write,
)
from agent.spark.plan.formats.directories import directory_write
from agent.spark.plan.formats.iceberg import iceberg_write, v2_delete
from agent.spark.plan.formats.kafka import kafka_save
from agent.spark.plan.syntax.schema import Field, split_top
from agent.spark.plan.syntax.tables import TableIdent, parse_table_ident
from agent.spark.plan.syntax.text import Attribute, Block, block_detail, block_list, parse_attribute
from agent.spark.plan.touched.reading import Reading

#: V2 writes (the first word of the node); named when they write a JDBC table.
V2_WRITES: Final = frozenset(
    {
        "AppendData",
        "AppendDataExecV1",
        "OverwriteByExpression",
        "OverwriteByExpressionExecV1",
        "OverwritePartitionsDynamic",
        "ReplaceData",
        "WriteDelta",
    }
)
#: Writes seen in plans that this module does not name: an unknown dataset, not silence.
UNSUPPORTED_WRITES: Final = frozenset(
    {
        "CreateTableAsSelect",
        "AtomicCreateTableAsSelect",
        "ReplaceTableAsSelect",
        "AtomicReplaceTableAsSelect",
        "Execute InsertIntoDataSourceCommand",
        "Execute LoadDataCommand",
        "Execute WriteIntoDeltaCommand",
    }
)
_CTAS: Final = frozenset(
    {
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
    }
)
_MODES: Final = frozenset({"Overwrite", "Append", "ErrorIfExists", "Ignore"})
_OUTPUT_METRICS: Final = {
    "number of output rows": "rows",
    "written output": "bytes",
    "number of written files": "files",
}
_JDBC_TABLE = linear.compile(r"JDBCTable\((?P<table>[^,()]+),")
#: the table a Hive CTAS prints: `[Database: db, TableName: t, ...]`
_HIVE_CTAS = linear.compile(r"Database: ([^,\]]+), TableName: ([^,\]]+)")


def write_datasets(node: Mapping[str, Any], name: str, reading: Reading) -> list[DatasetRef] | None:
    """The dataset a write node writes; None when the node is no write."""
    described, notes = reading.described, reading.notes
    stripped = name.strip()
    if stripped == "Execute InsertIntoHadoopFsRelationCommand":
        return [_insert_into_hadoop_fs(node, reading)]
    command = stripped.removeprefix("Execute ")
    if command in _CTAS:
        return [_ctas(node, command, described, notes)]
    if command == "InsertIntoHiveTable":
        return [_insert_into_hive(node, reading)]
    if command == "SaveIntoDataSourceCommand":
        return _save_into_data_source(node, described, notes)
    directory = directory_write(node, command, described, notes)
    if directory is not None:
        return directory
    if command in DELTA_COMMANDS:  # the table is the command's or its ResolvedTable child's
        resolved = block_detail(described, "ResolvedTable", "Arguments") or ""
        found = delta_command(command, _arguments(node, command, described), resolved)
        if found is not None:
            return found
    if command in DELTA_DML:
        found = delta_dml(command, _arguments(node, command, described), described)
        if found is not None:
            return found
    if stripped.split(" ", 1)[0] in V2_WRITES:
        return _v2_write(node, stripped, _arguments(node, stripped, described), described, notes)
    if command == "DeleteFromTable":
        found = v2_delete(_arguments(node, command, described))
        if found is not None:
            return found
    ddl = table_ddl(node, command, _arguments(node, command, described), notes)
    if ddl is not None:
        return ddl
    if stripped in UNSUPPORTED_WRITES:
        notes.append(f"unrecognized write node {stripped!r}")
        return [DatasetRef("output", stripped, unknown_reason=f"write node {stripped!r}")]
    return None


def metrics_of(node: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, int]:
    """Statistic -> accumulator id of the node's SQL metrics named in `wanted`."""
    found: dict[str, int] = {}
    metrics = node.get("metrics")
    if not isinstance(metrics, Sequence) or isinstance(metrics, str):
        return found
    for metric in metrics:
        if not isinstance(metric, Mapping):
            continue
        name = metric.get("name")
        key = wanted.get(name) if isinstance(name, str) else None
        acc = metric.get("accumulatorId")
        if key is not None and isinstance(acc, int) and not isinstance(acc, bool):
            found[key] = acc
    return found


def _arguments(node: Mapping[str, Any], command: str, described: Sequence[Block]) -> str:
    """A command's arguments: its simpleString's tail (whole, where the plan description
    keeps the first line of multi-line arguments only), else its description block's."""
    simple = node.get("simpleString")
    if isinstance(simple, str):
        tail = simple.strip().removeprefix("Execute ").removeprefix(command).strip()
        if tail:
            return tail
    return block_detail(described, command, "Arguments") or ""


def _row_level_target(name: str, described: Sequence[Block]) -> DatasetRef | None:
    """Iceberg's merge-on-read write (`SparkPositionDeltaWrite@…`) prints no table: it
    writes the table whose scan reads the rows' positions (`_pos`)."""
    for block in described:
        if block.name.startswith("BatchScan ") and "_pos#" in block.details.get("Output", ""):
            table = block.name.removeprefix("BatchScan ").strip()
            return iceberg_write(name, f"IcebergWrite(table={table}, format=)")
    return None


def _v2_write(
    node: Mapping[str, Any], name: str, args: str, described: Sequence[Block], notes: list[str]
) -> list[DatasetRef]:
    """A V2 write (`AppendData`, `OverwriteByExpressionExecV1`, ...): a Delta or Iceberg
    table, or a JDBC table, whose url stays in the catalog's configuration. The insert a
    Delta CTAS runs into its staged table names nothing: the CTAS names the table."""
    if args.startswith("org.apache.spark.sql.delta.catalog.") and "StagedDeltaTableV2" in args:
        return []
    lakehouse = delta_v2_write(name, args) or iceberg_write(name, args)
    if lakehouse is None and name.startswith("WriteDelta") and "PositionDeltaWrite" in args:
        lakehouse = _row_level_target(name, described)
    if lakehouse is not None:
        return [lakehouse]
    simple = node.get("simpleString")
    jdbc = _JDBC_TABLE.search(simple) if isinstance(simple, str) else None
    if jdbc is None and not args:  # an AQE update of a plan whose first version named it:
        # no note, the translator keeps the table the first plan named
        return [DatasetRef("output", name, unknown_reason=f"write node {name!r} without arguments")]
    if jdbc is None:
        notes.append(f"unrecognized write node {name!r}")
        return [DatasetRef("output", name, unknown_reason=f"write node {name!r}")]
    table = jdbc["table"].strip()
    notes.append(f"JDBC table {table} is written, but its url is not in the event log")
    lifecycle = "OVERWRITE" if name.startswith("Overwrite") else None
    return [
        DatasetRef(
            "output",
            name,
            jdbc=("", table),
            format="jdbc",
            lifecycle=lifecycle,
            unknown_reason="JDBC url not in the event log",
        )
    ]


def _insert_into_hadoop_fs(node: Mapping[str, Any], reading: Reading) -> DatasetRef:
    name = "Execute InsertIntoHadoopFsRelationCommand"
    simple = node.get("simpleString")
    args = simple.removeprefix(name).strip() if isinstance(simple, str) else ""
    if not args:
        args = block_detail(reading.described, name, "Arguments") or ""
    tokens = [t.strip() for t in split_top(args)]
    location = tokens[0] if tokens and tokens[0] else None
    mode = next((t for t in tokens if t in _MODES), None)
    table = next(
        (parse_table_ident(t) for t in tokens if t.startswith("`") and parse_table_ident(t)),
        None,
    )
    fmt = next((format_name(t) for t in tokens[1:] if format_name(t)), None)
    columns = _written_columns(tokens, reading)
    if location is None:
        reading.notes.append(f"no output path in {name!r}")
        return DatasetRef("output", name, unknown_reason="output path missing from the plan")
    return DatasetRef(
        "output",
        name,
        location=location,
        table=table,
        format=fmt,
        fields=columns,
        metrics=metrics_of(node, _OUTPUT_METRICS),
        lifecycle="OVERWRITE" if mode == "Overwrite" else None,
    )


def _written_columns(tokens: Sequence[str], reading: Reading) -> tuple[Field, ...]:
    """Output column names from the command, types from the attributes `WriteFiles` feeds it.

    The command's list is cut at `spark.sql.debug.maxToStringFields`; the `WriteFiles` input
    list never is, so it wins when the two disagree in length.
    """
    names = _column_list(tokens)
    written = block_list(reading.described, "WriteFiles", "Input")
    attrs = [a for a in map(parse_attribute, written) if a]
    if names and attrs and len(names) == len(attrs):
        return tuple(typed(n, a, reading.types) for n, a in zip(names, attrs, strict=True))
    if attrs:
        if names:
            reading.notes.append(
                "output column list truncated in the plan; names taken from WriteFiles"
            )
        return tuple(typed(a.name, a, reading.types) for a in attrs)
    return tuple(Field(n) for n in names if "more field" not in n)


def _column_list(tokens: Sequence[str]) -> list[str]:
    """The command's output column names: its last bracketed argument holding plain names
    (not attributes `a#1`, options `k=v` or a Hive CTAS's `[Database: db, TableName: t]`)."""
    for token in reversed(tokens):
        if token.startswith("[") and token.endswith("]"):
            items = [n.strip() for n in split_top(token[1:-1]) if n.strip()]
            if not any("#" in n or "=" in n or ": " in n for n in items):
                return items
    return []


def typed(name: str, attr: Attribute, types: Mapping[int, Field]) -> Field:
    """The field `name` with the type the plan gives attribute `attr` (long if marked `L`)."""
    known = types.get(attr.expr_id)
    if known is not None:
        return Field(name, known.type, known.fields)
    return Field(name, "long" if attr.is_long else None)


def _ctas(
    node: Mapping[str, Any], command: str, described: Sequence[Block], notes: list[str]
) -> DatasetRef:
    args = block_detail(described, command, "Arguments") or ""
    simple = node.get("simpleString")
    if not args and isinstance(simple, str):
        args = simple.removeprefix("Execute").strip().removeprefix(command).strip()
    tokens = [t.strip() for t in split_top(args)]
    table = parse_table_ident(tokens[0]) if tokens else None
    if table is None:  # Hive CTAS prints [Database: db, TableName: t, ...]
        match = _HIVE_CTAS.search(args)
        table = TableIdent(match[2].strip(), match[1].strip()) if match else None
    columns = tuple(Field(n) for n in _column_list(tokens) if "more field" not in n)
    if table is None:
        notes.append(f"no table in {command!r}")
        return DatasetRef("output", command, unknown_reason=f"table missing from {command!r}")
    return DatasetRef("output", command, table=table, fields=columns, lifecycle="CREATE")


def _insert_into_hive(node: Mapping[str, Any], reading: Reading) -> DatasetRef:
    simple = node.get("simpleString")
    args = simple.split("InsertIntoHiveTable", 1)[-1] if isinstance(simple, str) else ""
    args = args.strip() or (
        block_detail(reading.described, "InsertIntoHiveTable", "Arguments") or ""
    )
    tokens = [t.strip() for t in split_top(args.strip())]
    table = parse_table_ident(tokens[0]) if tokens else None
    if table is None:
        reading.notes.append("no table in 'InsertIntoHiveTable'")
        return DatasetRef("output", "InsertIntoHiveTable", unknown_reason="table missing")
    columns = _written_columns(tokens, reading)
    # Spark 3.4+ prints the table's location as `HiveTempPath(file:/warehouse/t)`
    located = next((t[13:-1] for t in tokens if t.startswith("HiveTempPath(")), None)
    return DatasetRef(
        "output",
        "InsertIntoHiveTable",
        location=located or None,
        table=table,
        format="hive",
        fields=columns,
        metrics=metrics_of(node, _OUTPUT_METRICS),
    )


def _save_into_data_source(
    node: Mapping[str, Any], described: Sequence[Block], notes: list[str]
) -> list[DatasetRef]:
    name = "SaveIntoDataSourceCommand"
    simple = node.get("simpleString")
    args = simple.split(name, 1)[-1].strip() if isinstance(simple, str) else ""
    args = args or block_detail(described, name, "Arguments") or ""
    tokens = [t.strip() for t in split_top(args)]
    provider = tokens[0].split("@")[0].rsplit(".", 1)[-1] if tokens else ""
    options: dict[str, str] = {}
    mode = next((t for t in tokens if t in _MODES), None)
    for token in tokens[1:]:
        if token.startswith("[") and token.endswith("]"):
            for item in split_top(token[1:-1]):
                key, _, value = item.strip().partition("=")
                options[key.strip().lower()] = value.strip()
    lifecycle = "OVERWRITE" if mode == "Overwrite" else None
    fmt = format_name(provider) or provider.removesuffix("DataSource").lower() or None
    if provider == "KafkaSourceProvider":
        return kafka_save(name, options, described, notes)
    if fmt == "delta" and mode == "ErrorIfExists":  # a path table that must not exist yet
        lifecycle = "CREATE"
    if "path" in options:
        path = options["path"]
        return [DatasetRef("output", name, location=path, format=fmt, lifecycle=lifecycle)]
    table = options.get("dbtable") or options.get("table")
    url = options.get("url")
    if url and table and "redacted" not in url:
        return [DatasetRef("output", name, jdbc=(url, table), format="jdbc", lifecycle=lifecycle)]
    if url and table:
        notes.append(
            f"JDBC table {table} is written, but its url is redacted in the event log "
            "(spark.sql.redaction.options.regex)"
        )
        return [
            DatasetRef(
                "output", name, jdbc=("", table), format="jdbc", unknown_reason="JDBC url redacted"
            )
        ]
    notes.append(f"no path or table in {name!r} of {provider or 'an unknown source'}")
    return [DatasetRef("output", name, format=fmt, unknown_reason="no path or table")]


def format_name(token: str) -> str | None:
    """`Parquet`, `ORC`, `org.apache.spark.sql.avro.AvroFileFormat@1a` -> parquet, orc, avro."""
    simple = token.split("@")[0].rsplit(".", 1)[-1]
    if simple.lower() in ("parquet", "orc", "csv", "json", "text", "avro", "binaryfile", "xml"):
        return simple.lower()
    if simple.endswith("FileFormat") and simple != "FileFormat":
        return simple.removesuffix("FileFormat").lower()
    return None
