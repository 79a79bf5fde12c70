"""Schema fields as Spark prints them: `struct<a:int,b:array<string>>` catalog strings.

`Field.type` is Spark's `DataType.typeName` (what OpenLineage's schema facet uses: `long`,
`integer`, `decimal(10,2)`, `struct`); nested types keep their children in `fields`
(`_element` for arrays, `key` / `value` for maps). `split_top` is the splitter every plan
reader here uses: commas outside brackets, backticks and double quotes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

#: catalogString spellings that differ from Spark's `DataType.typeName` (what OpenLineage uses).
TYPE_NAMES: Final = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}
#: Avro's primitive types as spark-avro reads them.
_AVRO: Final = {
    "int": "integer", "long": "long", "float": "float", "double": "double", "string": "string",
    "boolean": "boolean", "bytes": "binary", "fixed": "binary", "enum": "string",
}  # fmt: skip
_AVRO_LOGICAL: Final = {
    "date": "date", "timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
    "local-timestamp-millis": "timestamp_ntz", "local-timestamp-micros": "timestamp_ntz",
}  # fmt: skip
_MAX_DEPTH: Final = 32


@dataclass(frozen=True, slots=True)
class Field:
    """One schema field; `type` as Spark's `typeName` (`long`, `struct`), None if unknown."""

    name: str
    type: str | None = None
    fields: tuple[Field, ...] = ()


def parse_struct(text: str) -> tuple[Field, ...]:
    """Parse a `struct<a:int,b:array<string>>` catalog string into schema fields."""
    text = text.strip()
    if not (text.startswith("struct<") and text.endswith(">")):
        raise ValueError(f"not a struct type: {text[:80]!r}")
    fields: list[Field] = []
    for item in split_top(text[len("struct<") : -1], separator=",", angle=True):
        if not item.strip():
            continue
        name, type_text = _split_field(item.strip())
        fields.append(field_of(name, type_text))
    return tuple(fields)


def field_of(name: str, type_text: str) -> Field:
    """The field `name` of catalog type `type_text` (`array<int>`, `decimal(10,2)`)."""
    type_text = type_text.strip()
    lower = type_text.lower()
    if lower.startswith("struct<"):
        return Field(name, "struct", parse_struct(type_text))
    if lower.startswith("array<") and lower.endswith(">"):
        return Field(name, "array", (field_of("_element", type_text[6:-1]),))
    if lower.startswith("map<") and lower.endswith(">"):
        parts = split_top(type_text[4:-1], separator=",", angle=True)
        if len(parts) != 2:
            raise ValueError(f"map type without key and value: {type_text[:80]!r}")
        return Field(name, "map", (field_of("key", parts[0]), field_of("value", parts[1])))
    if not type_text or "<" in type_text or ">" in type_text or len(split_top(type_text)) > 1:
        raise ValueError(f"unreadable type {type_text[:80]!r} of field {name!r}")
    return Field(name, TYPE_NAMES.get(lower, lower))


def spark_struct(schema_text: str) -> tuple[Field, ...]:
    """Spark's JSON schema (`StructType.json`: `{"type": "struct", "fields": [...]}`), as
    Delta keeps it in `metaData.schemaString` and Spark in parquet footers."""
    try:
        document = json.loads(schema_text)
        return tuple(_json_field(f["name"], f["type"], 0) for f in document["fields"])
    except (json.JSONDecodeError, RecursionError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable Spark schema: {exc!r}") from exc


def check_field(name: Any, depth: int) -> None:
    """A field of a JSON schema (Spark's or a table format's), `depth` levels down: refused,
    ValueError, when nested too deep, TypeError when its name is no string."""
    _check_depth(depth)
    if not isinstance(name, str):
        raise TypeError(f"field name {name!r} is not a string")


def _check_depth(depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValueError(f"schema nested deeper than {_MAX_DEPTH} levels")


def _json_field(name: str, kind: Any, depth: int) -> Field:
    check_field(name, depth)
    if isinstance(kind, str):
        return field_of(name, kind)
    form = kind["type"]
    if form == "struct":
        return Field(
            name,
            "struct",
            tuple(_json_field(f["name"], f["type"], depth + 1) for f in kind["fields"]),
        )
    if form == "array":
        return Field(name, "array", (_json_field("_element", kind["elementType"], depth + 1),))
    if form == "map":
        key = _json_field("key", kind["keyType"], depth + 1)
        return Field(name, "map", (key, _json_field("value", kind["valueType"], depth + 1)))
    if form == "udt" and "sqlType" in kind:
        return _json_field(name, kind["sqlType"], depth + 1)
    raise ValueError(f"unknown type {form!r} of field {name!r}")


def avro_field(name: str, schema_text: str) -> Field:
    """The field `name` of the type an Avro schema (JSON, as `from_avro` prints it) reads as
    in Spark (spark-avro's mapping: a record is a struct, a union with null its other type)."""
    try:
        return _avro(name, json.loads(schema_text), 0)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"unreadable Avro schema of field {name!r}: {exc}") from exc


def _avro(name: str, kind: Any, depth: int) -> Field:
    _check_depth(depth)
    if isinstance(kind, list):  # a union: spark-avro reads [null, t] as t
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise ValueError(f"Avro union {kind!r} of field {name!r} is not one type or null")
        return _avro(name, others[0], depth + 1)
    if isinstance(kind, str):
        kind = {"type": kind}
    if not isinstance(kind, dict):
        raise ValueError(f"unreadable Avro type {kind!r} of field {name!r}")
    form, logical = kind.get("type"), kind.get("logicalType")
    if isinstance(form, dict | list):
        return _avro(name, form, depth + 1)
    if logical == "decimal" and isinstance(kind.get("precision"), int):
        return Field(name, f"decimal({kind['precision']},{kind.get('scale', 0)})")
    if isinstance(logical, str) and logical in _AVRO_LOGICAL:
        return Field(name, _AVRO_LOGICAL[logical])
    if form == "record":
        children = kind.get("fields")
        if not isinstance(children, list):
            raise ValueError(f"Avro record {name!r} without fields")
        return Field(
            name,
            "struct",
            tuple(
                _avro(str(f.get("name")), f.get("type"), depth + 1)
                for f in children
                if isinstance(f, dict)
            ),
        )
    if form == "array":
        return Field(name, "array", (_avro("_element", kind.get("items"), depth + 1),))
    if form == "map":
        value = _avro("value", kind.get("values"), depth + 1)
        return Field(name, "map", (Field("key", "string"), value))
    if isinstance(form, str) and form in _AVRO:
        return Field(name, _AVRO[form])
    raise ValueError(f"unknown Avro type {form!r} of field {name!r}")


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


def split_top(text: str, separator: str = ",", *, angle: bool = False) -> list[str]:
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
