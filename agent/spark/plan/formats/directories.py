"""`INSERT OVERWRITE [LOCAL] DIRECTORY`: the directory is the one dataset written.

The data source form (`... USING parquet`) is the command `InsertIntoDataSourceDirCommand`,
whose plan prints `Storage(Location: <dir>), <provider>, <overwrite>` on the command block
beneath `Execute InsertIntoDataSourceDirCommand`; the files are written by a nested
`InsertIntoHadoopFsRelationCommand` execution into the same directory, which carries the
column lineage. The Hive form (`... ROW FORMAT ... STORED AS ...`) is
`InsertIntoHiveDirCommand`: `<isLocal>, Storage(Location: <dir>, Serde Library: ...,
OutputFormat: ...), <overwrite>, [columns]`, its query its child in the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent import linear
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.schema import Field, split_top
from agent.spark.plan.syntax.text import Block, block_detail, block_list, parse_attribute

DATA_SOURCE_DIR: Final = "InsertIntoDataSourceDirCommand"
HIVE_DIR: Final = "InsertIntoHiveDirCommand"
_STORAGE = linear.compile(r"Storage\((?P<body>.*)\)$")
#: Hive output formats by a word of their class name.
_HIVE_FORMATS: Final = (("Parquet", "parquet"), ("Orc", "orc"), ("Avro", "avro"), ("Text", "text"))


def directory_write(
    node: Mapping[str, Any], command: str, described: Sequence[Block], notes: list[str]
) -> list[DatasetRef] | None:
    """The directory an INSERT OVERWRITE DIRECTORY command writes; None for other nodes,
    [] (and a note) when the plan does not print it."""
    if command not in (DATA_SOURCE_DIR, HIVE_DIR):
        return None
    simple = node.get("simpleString")
    args = (
        simple.strip().removeprefix("Execute ").removeprefix(command).strip()
        if (isinstance(simple, str))
        else ""
    )
    args = args or block_detail(described, command, "Arguments") or ""
    args = args or block_detail(described, f"Execute {command}", "Arguments") or ""
    tokens = [t.strip() for t in split_top(args)]
    storage = next((_STORAGE.match(t) for t in tokens if t.startswith("Storage(")), None)
    parts = dict(_entry(p) for p in split_top(storage["body"])) if storage else {}
    location = parts.get("Location")
    if not location:
        notes.append(f"no directory in {command!r}")
        return []
    overwrite = tokens[-1] == "true" if command == DATA_SOURCE_DIR else tokens[2:3] == ["true"]
    lifecycle = "OVERWRITE" if overwrite else None
    if command == DATA_SOURCE_DIR:
        provider = tokens[1].lower() if len(tokens) > 1 else None
        return [
            DatasetRef("output", command, location=location, format=provider, lifecycle=lifecycle)
        ]
    output = parts.get("OutputFormat", "")
    fmt = next((f for word, f in _HIVE_FORMATS if word in output.rsplit(".", 1)[-1]), None)
    columns = [c.strip() for c in split_top(tokens[-1][1:-1])] if tokens[-1].startswith("[") else []
    attrs = [
        a for a in map(parse_attribute, block_list(described, f"Execute {command}", "Input")) if a
    ]
    fields = tuple(Field(c) for c in columns if c)
    if attrs and len(attrs) == len(columns):
        fields = tuple(
            Field(c, "long" if a.is_long else None) for c, a in zip(columns, attrs, strict=True)
        )
    return [
        DatasetRef(
            "output", command, location=location, format=fmt, fields=fields, lifecycle=lifecycle
        )
    ]


def _entry(part: str) -> tuple[str, str]:
    key, _, value = part.strip().partition(": ")
    return key.strip(), value.strip()
