"""Read what a SQL execution touches from its `sparkPlanInfo` tree and plan description.

`read_plan` walks the `sparkPlanInfo` tree (node names, metadata, metric accumulator ids)
and looks up the `physicalPlanDescription` (``explain formatted``) for what the tree leaves
out: the attribute lists (``Output [2]: [id#3L, k#4L]``), aliases and the arguments of
commands whose tree node prints none (CTAS). The result names each dataset by what Spark
printed (a path, a catalog table, a JDBC url); naming it the OpenLineage way is `naming`'s
job. Attributes keep their expression ids (``k#4L`` -> 4) so column lineage can grow here.

Understood: file scans (parquet, orc, csv, json, text, avro, any `FileFormat`) with their
read schema, Hive table scans, `InsertIntoHadoopFsRelationCommand`, the CTAS commands,
`InsertIntoHiveTable`, `SaveIntoDataSourceCommand` (path option or unredacted JDBC url).
Scans and writes of any other kind become datasets with `unknown_reason` set; plain
operators and DDL commands contribute nothing.

`rdd_inputs` and `rdd_job_suffix` read a JobStart's `Stage Infos` the same way for RDD jobs:
RDDs named by a path (`sc.textFile`) are inputs. An RDD save's output path never reaches the
event log, so RDD outputs are never known.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent.spark.naming import TableIdent, normalize, parse_table_ident

Role = Literal["input", "output"]

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
#: Writes seen in plans that this module does not name yet: an unknown dataset, not silence.
_UNSUPPORTED_WRITES: Final = frozenset(
    {
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
        "ReplaceData",
        "WriteDelta",
        "CreateTableAsSelect",
        "AtomicCreateTableAsSelect",
        "ReplaceTableAsSelect",
        "AtomicReplaceTableAsSelect",
        "Execute InsertIntoDataSourceCommand",
        "Execute InsertIntoDataSourceDirCommand",
        "Execute InsertIntoHiveDirCommand",
        "Execute LoadDataCommand",
        "Execute MergeIntoCommand",
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
_INPUT_METRICS: Final = {
    "number of output rows": "rows",
    "size of files read": "bytes",
    "number of files read": "files",
}
_OUTPUT_METRICS: Final = {
    "number of output rows": "rows",
    "written output": "bytes",
    "number of written files": "files",
}
#: catalogString spellings that differ from Spark's `DataType.typeName` (what OpenLineage uses).
_TYPE_NAMES: Final = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}
_FILE_RDD_SCOPES: Final = frozenset(
    {
        "textFile",
        "wholeTextFiles",
        "binaryFiles",
        "hadoopFile",
        "newAPIHadoopFile",
        "sequenceFile",
        "objectFile",
    }
)
_MAX_NODES: Final = 100_000
_ATTRIBUTE = re.compile(r"^(?P<name>.+)#(?P<id>\d+)(?P<long>L)?$", re.DOTALL)
_LOCATION = re.compile(r"^\w+\((?P<count>\d+) paths?\)\[(?P<paths>.*)\]$", re.DOTALL)
_LOCATION_TEXT = re.compile(r"Location: (\w+\(\d+ paths?\)\[[^\]]*\])")
_READ_SCHEMA_TEXT = re.compile(r"ReadSchema: (struct<.*>)")
_HEADER = re.compile(r"^\((?P<id>\d+)\) (?P<name>.*?)(?: \[codegen id : \d+\])?$")
_DETAIL = re.compile(r"^(?P<key>[A-Z][A-Za-z ]*?)\s*(?:\[\d+\])?\s*: ?(?P<value>.*)$")


@dataclass(frozen=True, slots=True)
class Field:
    """One schema field; `type` as Spark's `typeName` (`long`, `struct`), None if unknown."""

    name: str
    type: str | None = None
    fields: tuple[Field, ...] = ()


@dataclass(frozen=True, slots=True)
class Attribute:
    """A plan attribute such as ``k#4L``: name, expression id, whether Spark marked it long."""

    name: str
    expr_id: int
    is_long: bool = False


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """A dataset as the plan names it: by location (with its catalog table, if it is one),
    by JDBC url and table, or by table alone (a CTAS, a Hive scan). `unknown_reason` says
    why it cannot be named."""

    role: Role
    node: str
    location: str | None = None
    table: TableIdent | None = None
    jdbc: tuple[str, str] | None = None  # (url, table)
    format: str | None = None
    fields: tuple[Field, ...] = ()
    #: statistic (`rows`, `bytes`, `files`) -> accumulator id of the node's SQL metric
    metrics: Mapping[str, int] = field(default_factory=dict)
    lifecycle: str | None = None  # OVERWRITE, CREATE
    unknown_reason: str | None = None


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """What one plan of one execution reads and writes."""

    command: str | None  # node that names the execution, e.g. "Execute InsertInto...Command"
    datasets: tuple[DatasetRef, ...]
    notes: tuple[str, ...]  # why something could not be read; the caller adds context

    @property
    def writes(self) -> bool:
        return any(d.role == "output" for d in self.datasets)


@dataclass(frozen=True, slots=True)
class _Described:
    name: str
    details: Mapping[str, str]


def read_plan(plan_info: object, description: object) -> PlanSummary:
    """Summarize one `sparkPlanInfo` tree plus its `physicalPlanDescription` (both untrusted)."""
    described = parse_description(description if isinstance(description, str) else "")
    types = _attribute_types(described)
    notes: list[str] = []
    datasets: list[DatasetRef] = []
    for node in _walk(plan_info, notes):
        name = node.get("nodeName")
        if not isinstance(name, str) or not name.strip():
            continue
        datasets.extend(_node_datasets(node, name, described, types, notes))
    return PlanSummary(_command(plan_info), tuple(datasets), tuple(notes))


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
        return name.strip()
    return None


def _node_datasets(
    node: Mapping[str, Any],
    name: str,
    described: Sequence[_Described],
    types: Mapping[int, Field],
    notes: list[str],
) -> list[DatasetRef]:
    stripped = name.strip()
    if stripped == "Execute InsertIntoHadoopFsRelationCommand":
        return [_insert_into_hadoop_fs(node, described, types, notes)]
    command = stripped.removeprefix("Execute ")
    if command in _CTAS:
        return [_ctas(node, command, described, notes)]
    if command == "InsertIntoHiveTable":
        return [_insert_into_hive(node, described, types, notes)]
    if command == "SaveIntoDataSourceCommand":
        return [_save_into_data_source(node, described, notes)]
    if stripped in _UNSUPPORTED_WRITES:
        notes.append(f"unrecognized write node {stripped!r}")
        return [DatasetRef("output", stripped, unknown_reason=f"write node {stripped!r}")]
    if stripped.startswith(("Scan ", "BatchScan", "FileScan", "HiveTableScan")):
        if stripped.startswith(_NOT_DATASETS):
            return []
        return _scan(node, stripped, described, types, notes)
    return []


def _metrics(node: Mapping[str, Any], wanted: Mapping[str, str]) -> dict[str, int]:
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


def _scan(
    node: Mapping[str, Any],
    name: str,
    described: Sequence[_Described],
    types: Mapping[int, Field],
    notes: list[str],
) -> list[DatasetRef]:
    raw_meta = node.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    simple = node.get("simpleString")
    simple = simple if isinstance(simple, str) else ""
    location = _text(meta.get("Location")) or _search(_LOCATION_TEXT, simple)
    read_schema = _text(meta.get("ReadSchema")) or _search(_READ_SCHEMA_TEXT, simple)
    raw_format = _text(meta.get("Format")) or (name.split()[1] if len(name.split()) > 1 else "")
    fmt = _format_name(raw_format) or raw_format.lower() or None
    fields: tuple[Field, ...] = ()
    if read_schema:
        try:
            fields = parse_struct(read_schema)
        except ValueError as exc:
            notes.append(f"unreadable ReadSchema of {name!r}: {exc}")
    else:  # Hive scans print no read schema: the output attributes carry what is known
        attrs = map(parse_attribute, _list_detail(described, name, "Output"))
        fields = tuple(_typed(a.name, a, types) for a in attrs if a is not None)
    metrics = _metrics(node, _INPUT_METRICS)
    table = _scan_table(name)
    if location:
        match = _LOCATION.match(location)
        if match is None:
            notes.append(f"unreadable Location of {name!r}: {location[:200]!r}")
        else:
            paths = [p.strip() for p in _split_top(match["paths"]) if p.strip()]
            declared = int(match["count"])
            if declared > len(paths):
                notes.append(f"{name!r} reads {declared} paths but the plan lists {len(paths)}")
            if len(paths) > 1:
                metrics = {}  # the node's totals cannot be split between its paths
            return [
                DatasetRef(
                    "input",
                    name,
                    location=p,
                    table=table,
                    format=fmt,
                    fields=fields,
                    metrics=metrics,
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
    notes.append(f"unrecognized plan node {name!r}")
    return [DatasetRef("input", name, fields=fields, unknown_reason=f"scan node {name!r}")]


def _scan_table(name: str) -> TableIdent | None:
    """`Scan parquet spark_catalog.default.people` -> the table; None for path scans."""
    parts = name.split(maxsplit=2)
    if len(parts) == 3 and parts[0] == "Scan":
        return parse_table_ident(parts[2])
    return None


def _insert_into_hadoop_fs(
    node: Mapping[str, Any],
    described: Sequence[_Described],
    types: Mapping[int, Field],
    notes: list[str],
) -> DatasetRef:
    name = "Execute InsertIntoHadoopFsRelationCommand"
    simple = node.get("simpleString")
    args = simple.removeprefix(name).strip() if isinstance(simple, str) else ""
    if not args:
        args = _described_detail(described, name, "Arguments") or ""
    tokens = [t.strip() for t in _split_top(args)]
    location = tokens[0] if tokens and tokens[0] else None
    mode = next((t for t in tokens if t in _MODES), None)
    table = next(
        (parse_table_ident(t) for t in tokens if t.startswith("`") and parse_table_ident(t)),
        None,
    )
    fmt = next((_format_name(t) for t in tokens[1:] if _format_name(t)), None)
    columns = _written_columns(tokens, described, types, notes)
    if location is None:
        notes.append(f"no output path in {name!r}")
        return DatasetRef("output", name, unknown_reason="output path missing from the plan")
    return DatasetRef(
        "output",
        name,
        location=location,
        table=table,
        format=fmt,
        fields=columns,
        metrics=_metrics(node, _OUTPUT_METRICS),
        lifecycle="OVERWRITE" if mode == "Overwrite" else None,
    )


def _written_columns(
    tokens: Sequence[str],
    described: Sequence[_Described],
    types: Mapping[int, Field],
    notes: list[str],
) -> tuple[Field, ...]:
    """Output column names from the command, types from the attributes `WriteFiles` feeds it.

    The command's list is cut at `spark.sql.debug.maxToStringFields`; the `WriteFiles` input
    list never is, so it wins when the two disagree in length.
    """
    names = _column_list(tokens)
    attrs = [a for a in map(parse_attribute, _list_detail(described, "WriteFiles", "Input")) if a]
    if names and attrs and len(names) == len(attrs):
        return tuple(_typed(n, a, types) for n, a in zip(names, attrs, strict=True))
    if attrs:
        if names:
            notes.append("output column list truncated in the plan; names taken from WriteFiles")
        return tuple(_typed(a.name, a, types) for a in attrs)
    return tuple(Field(n) for n in names if "more field" not in n)


def _column_list(tokens: Sequence[str]) -> list[str]:
    """The command's output column names: its last bracketed argument holding plain names
    (not attributes `a#1`, not options `k=v`)."""
    for token in reversed(tokens):
        if token.startswith("[") and token.endswith("]"):
            items = [n.strip() for n in _split_top(token[1:-1]) if n.strip()]
            if not any("#" in n or "=" in n for n in items):
                return items
    return []


def _typed(name: str, attr: Attribute, types: Mapping[int, Field]) -> Field:
    known = types.get(attr.expr_id)
    if known is not None:
        return Field(name, known.type, known.fields)
    return Field(name, "long" if attr.is_long else None)


def _ctas(
    node: Mapping[str, Any], command: str, described: Sequence[_Described], notes: list[str]
) -> DatasetRef:
    args = _described_detail(described, command, "Arguments") or ""
    simple = node.get("simpleString")
    if not args and isinstance(simple, str):
        args = simple.removeprefix("Execute").strip().removeprefix(command).strip()
    tokens = [t.strip() for t in _split_top(args)]
    table = parse_table_ident(tokens[0]) if tokens else None
    if table is None:  # Hive CTAS prints [Database: db, TableName: t, ...]
        match = re.search(r"Database: ([^,\]]+), TableName: ([^,\]]+)", args)
        table = TableIdent(match[2].strip(), match[1].strip()) if match else None
    columns = tuple(Field(n) for n in _column_list(tokens) if "more field" not in n)
    if table is None:
        notes.append(f"no table in {command!r}")
        return DatasetRef("output", command, unknown_reason=f"table missing from {command!r}")
    return DatasetRef("output", command, table=table, fields=columns, lifecycle="CREATE")


def _insert_into_hive(
    node: Mapping[str, Any],
    described: Sequence[_Described],
    types: Mapping[int, Field],
    notes: list[str],
) -> DatasetRef:
    simple = node.get("simpleString")
    args = simple.split("InsertIntoHiveTable", 1)[-1] if isinstance(simple, str) else ""
    args = args.strip() or _described_detail(described, "InsertIntoHiveTable", "Arguments") or ""
    tokens = [t.strip() for t in _split_top(args.strip())]
    table = parse_table_ident(tokens[0]) if tokens else None
    if table is None:
        notes.append("no table in 'InsertIntoHiveTable'")
        return DatasetRef("output", "InsertIntoHiveTable", unknown_reason="table missing")
    columns = _written_columns(tokens, described, types, notes)
    # Spark 3.4+ prints the table's location as `HiveTempPath(file:/warehouse/t)`
    located = next((t[13:-1] for t in tokens if t.startswith("HiveTempPath(")), None)
    return DatasetRef(
        "output",
        "InsertIntoHiveTable",
        location=located or None,
        table=table,
        format="hive",
        fields=columns,
        metrics=_metrics(node, _OUTPUT_METRICS),
    )


def _save_into_data_source(
    node: Mapping[str, Any], described: Sequence[_Described], notes: list[str]
) -> DatasetRef:
    name = "SaveIntoDataSourceCommand"
    simple = node.get("simpleString")
    args = simple.split(name, 1)[-1].strip() if isinstance(simple, str) else ""
    args = args or _described_detail(described, name, "Arguments") or ""
    tokens = [t.strip() for t in _split_top(args)]
    provider = tokens[0].split("@")[0].rsplit(".", 1)[-1] if tokens else ""
    options: dict[str, str] = {}
    mode = next((t for t in tokens if t in _MODES), None)
    for token in tokens[1:]:
        if token.startswith("[") and token.endswith("]"):
            for item in _split_top(token[1:-1]):
                key, _, value = item.strip().partition("=")
                options[key.strip().lower()] = value.strip()
    lifecycle = "OVERWRITE" if mode == "Overwrite" else None
    fmt = _format_name(provider) or provider.removesuffix("DataSource").lower() or None
    if "path" in options:
        return DatasetRef("output", name, location=options["path"], format=fmt, lifecycle=lifecycle)
    table = options.get("dbtable") or options.get("table")
    url = options.get("url")
    if url and table and "redacted" not in url:
        return DatasetRef("output", name, jdbc=(url, table), format="jdbc", lifecycle=lifecycle)
    if url and table:
        notes.append(
            f"JDBC table {table} is written, but its url is redacted in the event log "
            "(spark.sql.redaction.options.regex)"
        )
        return DatasetRef(
            "output", name, jdbc=("", table), format="jdbc", unknown_reason="JDBC url redacted"
        )
    notes.append(f"no path or table in {name!r} of {provider or 'an unknown source'}")
    return DatasetRef("output", name, format=fmt, unknown_reason="no path or table")


def _format_name(token: str) -> str | None:
    """`Parquet`, `ORC`, `org.apache.spark.sql.avro.AvroFileFormat@1a` -> parquet, orc, avro."""
    simple = token.split("@")[0].rsplit(".", 1)[-1]
    if simple.lower() in ("parquet", "orc", "csv", "json", "text", "avro", "binaryfile", "xml"):
        return simple.lower()
    if simple.endswith("FileFormat") and simple != "FileFormat":
        return simple.removesuffix("FileFormat").lower()
    return None


def parse_description(text: str) -> list[_Described]:
    """Split `explain formatted` text into its `(N) Node` detail blocks, in order."""
    blocks: list[_Described] = []
    name: str | None = None
    details: dict[str, str] = {}
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            if name is not None:
                blocks.append(_Described(name, details))
            name, details = header["name"].strip(), {}
            continue
        if name is None:
            continue
        detail = _DETAIL.match(line)
        if detail:
            details.setdefault(detail["key"].strip(), detail["value"])
    if name is not None:
        blocks.append(_Described(name, details))
    return blocks


def _described_detail(described: Sequence[_Described], name: str, key: str) -> str | None:
    for block in described:
        if block.name == name and key in block.details:
            return block.details[key]
    return None


def _list_detail(described: Sequence[_Described], name: str, key: str) -> list[str]:
    value = (_described_detail(described, name, key) or "").strip()
    if not (value.startswith("[") and value.endswith("]")):
        return []
    return [item.strip() for item in _split_top(value[1:-1]) if item.strip()]


def _attribute_types(described: Sequence[_Described]) -> dict[int, Field]:
    """Types of attributes the plan reveals: scan read schemas and `cast(... as t) AS x#n`."""
    types: dict[int, Field] = {}
    for block in described:
        schema_text = block.details.get("ReadSchema")
        if schema_text and "Output" in block.details:
            try:
                by_name = {f.name: f for f in parse_struct(schema_text)}
            except ValueError:
                by_name = {}
            for item in _list_detail([block], block.name, "Output"):
                attr = parse_attribute(item)
                if attr is not None and attr.name in by_name:
                    types[attr.expr_id] = by_name[attr.name]
        for key in ("Output", "Results"):
            for item in _list_detail([block], block.name, key):
                expr, sep, alias = item.rpartition(" AS ")
                attr = parse_attribute(alias) if sep else None
                cast = re.fullmatch(
                    r"cast\(.* as (?P<type>[^()]+(?:\(\d+(?:,\s*\d+)?\))?)\)", expr, re.DOTALL
                )
                if attr is not None and cast is not None and attr.expr_id not in types:
                    with contextlib.suppress(ValueError):  # an exotic type stays unknown
                        types[attr.expr_id] = _field(attr.name, cast["type"].strip())
    return types


def parse_attribute(text: str) -> Attribute | None:
    """``k#4L`` -> Attribute('k', 4, True); ``a + 1 AS b#7`` -> Attribute('b', 7)."""
    text = text.strip().rpartition(" AS ")[2]
    match = _ATTRIBUTE.match(text)
    if match is None:
        return None
    return Attribute(match["name"], int(match["id"]), match["long"] is not None)


def parse_struct(text: str) -> tuple[Field, ...]:
    """Parse a `struct<a:int,b:array<string>>` catalog string into schema fields."""
    text = text.strip()
    if not (text.startswith("struct<") and text.endswith(">")):
        raise ValueError(f"not a struct type: {text[:80]!r}")
    fields: list[Field] = []
    for item in _split_top(text[len("struct<") : -1], separator=",", angle=True):
        if not item.strip():
            continue
        name, type_text = _split_field(item.strip())
        fields.append(_field(name, type_text))
    return tuple(fields)


def _split_field(item: str) -> tuple[str, str]:
    if item.startswith("`"):
        end = item.find("`:", 1)
        while end != -1 and item[1:end].count("`") % 2:  # `` is an escaped backtick
            end = item.find("`:", end + 1)
        if end == -1:
            raise ValueError(f"unterminated quoted field name: {item[:80]!r}")
        return item[1:end].replace("``", "`"), item[end + 2 :]
    name, sep, type_text = item.partition(":")
    if not sep or not name:
        raise ValueError(f"field without a type: {item[:80]!r}")
    return name, type_text


def _field(name: str, type_text: str) -> Field:
    type_text = type_text.strip()
    lower = type_text.lower()
    if lower.startswith("struct<"):
        return Field(name, "struct", parse_struct(type_text))
    if lower.startswith("array<") and lower.endswith(">"):
        return Field(name, "array", (_field("_element", type_text[6:-1]),))
    if lower.startswith("map<") and lower.endswith(">"):
        parts = _split_top(type_text[4:-1], separator=",", angle=True)
        if len(parts) != 2:
            raise ValueError(f"map type without key and value: {type_text[:80]!r}")
        return Field(name, "map", (_field("key", parts[0]), _field("value", parts[1])))
    if not type_text or "<" in type_text or ">" in type_text or len(_split_top(type_text)) > 1:
        raise ValueError(f"unreadable type {type_text[:80]!r} of field {name!r}")
    return Field(name, _TYPE_NAMES.get(lower, lower))


def _split_top(text: str, separator: str = ",", *, angle: bool = False) -> list[str]:
    """Split on `separator` outside brackets, backticks and double quotes."""
    opening, closing = ("([{<", ")]}>") if angle else ("([{", ")]}")
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in '`"':
            quote = ch
        elif ch in opening:
            depth += 1
        elif ch in closing:
            depth = max(0, depth - 1)
        elif ch == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts if text else []


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _search(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match[1] if match else None


def command_name(command: str | None) -> str | None:
    """The command part of a job name: `Execute InsertInto...Command` -> `execute_insert_...`."""
    return (normalize(command) or None) if command else None


def rdd_inputs(stage_infos: object) -> tuple[str, ...]:
    """Paths read by an RDD job: RDDs that `textFile` and friends name after their input."""
    found: list[str] = []
    for rdd in _rdds(stage_infos):
        name = rdd.get("Name")
        if not isinstance(name, str) or not _looks_like_location(name):
            continue
        scope = _scope_name(rdd.get("Scope"))
        if scope is not None and scope not in _FILE_RDD_SCOPES:
            continue
        for path in name.split(","):  # textFile accepts comma-joined paths
            if path.strip() and path.strip() not in found:
                found.append(path.strip())
    return tuple(found)


def rdd_job_suffix(stage_infos: object) -> str | None:
    """Name an RDD job after its RDD lineage (`python_map_partitions_hadoop`), as the
    OpenLineage integration does: class names for unnamed RDDs, `hadoop` for the RDD named
    after its input path, `map_partitions` for one named like its parent."""
    rdds: dict[int, Mapping[str, Any]] = {}
    final_stage: tuple[int, list[int]] | None = None
    if not isinstance(stage_infos, Sequence) or isinstance(stage_infos, str):
        return None
    for stage in stage_infos:
        if not isinstance(stage, Mapping):
            continue
        ids = [r["RDD ID"] for r in _rdds([stage]) if isinstance(r.get("RDD ID"), int)]
        for rdd in _rdds([stage]):
            if isinstance(rdd.get("RDD ID"), int):
                rdds[rdd["RDD ID"]] = rdd
        stage_id = stage.get("Stage ID")
        if isinstance(stage_id, int) and ids and (final_stage is None or stage_id > final_stage[0]):
            final_stage = (stage_id, ids)
    if final_stage is None:
        return None
    suffix = _name_rdd(max(final_stage[1]), rdds, depth=0)
    return normalize(suffix) or None


def _name_rdd(rdd_id: int, rdds: Mapping[int, Mapping[str, Any]], depth: int) -> str:
    rdd = rdds[rdd_id]
    name = rdd.get("Name") if isinstance(rdd.get("Name"), str) else ""
    parents = [p for p in _int_list(rdd.get("Parent IDs")) if p in rdds and p != rdd_id]
    if re.fullmatch(r"[A-Z]\w*RDD\d*", name or ""):
        own = normalize(re.sub(r"RDD\d*$", "", name or ""))
    elif not name or _looks_like_location(name):
        same_as_parent = any(rdds[p].get("Name") == name for p in parents)
        own = "map_partitions" if same_as_parent else "hadoop"
    else:
        own = name
    if not parents or depth > 50:
        return own
    deps = "_".join(_name_rdd(p, rdds, depth + 1) for p in parents)[:100]
    return deps if deps.startswith(own) else f"{own}_{deps}"


def _rdds(stage_infos: object) -> Iterator[Mapping[str, Any]]:
    if not isinstance(stage_infos, Sequence) or isinstance(stage_infos, str):
        return
    for stage in stage_infos:
        infos = stage.get("RDD Info") if isinstance(stage, Mapping) else None
        if isinstance(infos, Sequence) and not isinstance(infos, str):
            yield from (r for r in infos if isinstance(r, Mapping))


def _scope_name(scope: object) -> str | None:
    if not isinstance(scope, str):
        return None
    match = re.search(r'"name":"((?:[^"\\]|\\.)*)"', scope)
    return match[1] if match else None


def _looks_like_location(name: str) -> bool:
    return name.startswith("/") or re.match(r"^[A-Za-z][A-Za-z0-9+.\-]+:/", name) is not None


def _int_list(value: object) -> list[int]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
