"""Schema fields as Spark prints them: `struct<a:int,b:array<string>>` catalog strings.

`Field.type` is Spark's `DataType.typeName` (what OpenLineage's schema facet uses: `long`,
`integer`, `decimal(10,2)`, `struct`); nested types keep their children in `fields`
(`_element` for arrays, `key` / `value` for maps). `split_top` is the splitter every plan
reader here uses: commas outside brackets, backticks and double quotes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: catalogString spellings that differ from Spark's `DataType.typeName` (what OpenLineage uses).
TYPE_NAMES: Final = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}


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
