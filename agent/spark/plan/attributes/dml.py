"""Column lineage and schema of Delta's row-level commands, from their arguments.

Delta's MERGE, UPDATE and DELETE run as commands whose plan holds no query: what they write
is in their arguments. The table rewrites itself, so every column keeps its own values
(DIRECT IDENTITY from the table's column) where no clause changes them.

* UPDATE: `Delta[…], [<new value of each column>], (<condition>)` over the table's
  `LogicalRelation` (its attributes): each column also takes the attributes its new value
  reads; the condition's columns decide which rows change (INDIRECT CONDITIONAL).
* DELETE: `DeltaLog@…, (<condition>)`: columns unchanged; the condition's columns decide
  which rows remain (INDIRECT FILTER).
* MERGE: `…, (<condition>), [matched], [not matched], [not matched by source],
  StructType(<target schema>), …`; clauses `Update [condition: …, actions: [`c` = <expr>, …]]`,
  `Insert [...]`, `Delete [condition: …]`. The schema comes from the StructType. The values
  the clauses assign come from the source, whose plan runs in the statement's other
  executions: those attributes are listed in `DmlLineage.assigned` for the translator to
  resolve there, and a column assigned from attributes no execution resolves is incomplete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agent import linear
from agent.spark.plan.attributes.columns import ColumnLineage, InputField, OutputColumn
from agent.spark.plan.syntax.expressions import IDENTITY, Transformation, indirect, references
from agent.spark.plan.syntax.schema import Field, split_top
from agent.spark.plan.syntax.text import Attribute, Block, block_detail, bracketed, parse_attribute

#: The scan id that stands for the table itself in a command's lineage.
TABLE_SCAN: Final = -1
_STRUCT_FIELD = linear.compile(
    rf"StructField\((?P<name>[^,()]+),(?P<type>[{linear.WORD}]+?)Type(?P<args>\(\d+,\d+\))?,"
)
_ACTION = linear.compile(r"(?s)^`(?P<column>(?:[^`]|``)+)` = (?P<expr>.*)$")
#: Spark's `<Name>Type` -> its type name (`DataType.typeName`), as schema facets spell it.
TYPE_NAMES: Final = {
    "Long": "long", "Integer": "integer", "Short": "short", "Byte": "byte",
    "Double": "double", "Float": "float", "String": "string", "Boolean": "boolean",
    "Date": "date", "Timestamp": "timestamp", "TimestampNTZ": "timestamp_ntz",
    "Binary": "binary", "Decimal": "decimal",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class DmlLineage:
    """What a row-level command writes: its columns, their lineage within the table, and
    for MERGE the source attributes each column is assigned from."""

    fields: tuple[Field, ...]
    lineage: ColumnLineage
    #: column -> (attribute id, transformation) its clauses assign it from
    assigned: Mapping[str, tuple[tuple[int, Transformation], ...]]
    #: attributes the clauses' conditions read (INDIRECT CONDITIONAL of every column)
    conditions: tuple[int, ...] = ()


def update_lineage(args: str, described: Sequence[Block]) -> DmlLineage | None:
    """UPDATE's columns from its table's attributes and the new value of each."""
    tokens = [t.strip() for t in split_top(args)]
    values = next((bracketed(t) for t in tokens if t.startswith("[")), None)
    table = _relation(described)
    if values is None or len(values) != len(table):
        return None
    condition = tokens[-1] if tokens and tokens[-1].startswith("(") else ""
    ids = {attr.expr_id: attr.name for attr in table}
    columns = []
    for attr, value in zip(table, values, strict=True):
        found = {(ids[a], how) for a, how in references(value).references if a in ids}
        found.add((attr.name, IDENTITY))  # rows the condition leaves keep their value
        columns.append(_column(attr.name, found))
    dataset = _fields(references(condition).references, ids, indirect("CONDITIONAL"))
    return DmlLineage(_typed(table), ColumnLineage(tuple(columns), dataset), {})


def delete_lineage(args: str, described: Sequence[Block]) -> DmlLineage | None:
    """DELETE's columns: unchanged; the condition filters the rows that remain."""
    table = _relation(described)
    if not table:
        return None
    tokens = [t.strip() for t in split_top(args)]
    condition = tokens[-1] if tokens and tokens[-1].startswith("(") else ""
    ids = {attr.expr_id: attr.name for attr in table}
    columns = tuple(_column(attr.name, {(attr.name, IDENTITY)}) for attr in table)
    dataset = _fields(references(condition).references, ids, indirect("FILTER"))
    return DmlLineage(_typed(table), ColumnLineage(columns, dataset), {})


def merge_lineage(args: str) -> DmlLineage | None:
    """MERGE's columns from its target schema; what its clauses assign, to be resolved."""
    tokens = [t.strip() for t in split_top(args)]
    struct = next((t for t in tokens if t.startswith("StructType(")), None)
    if struct is None:
        return None
    fields = tuple(_struct_field(m) for m in _STRUCT_FIELD.finditer(struct))
    assigned: dict[str, list[tuple[int, Transformation]]] = {f.name: [] for f in fields}
    conditions: list[int] = []
    clauses = [t for t in tokens if t.startswith("[")]
    condition = next((t for t in tokens if t.startswith("(")), "")
    conditions += [a for a, _ in references(condition).references]
    for clause_list in clauses:
        for clause in bracketed(clause_list) or []:
            _clause(clause, assigned, conditions)
    columns = tuple(_column(f.name, {(f.name, IDENTITY)}) for f in fields)
    lineage = ColumnLineage(columns, ())
    frozen = {name: tuple(dict.fromkeys(found)) for name, found in assigned.items() if found}
    return DmlLineage(fields, lineage, frozen, tuple(dict.fromkeys(conditions)))


def query_lineage(query: str) -> DmlLineage | None:
    """What a write whose query runs in another execution writes (Delta's V1 fallback for
    INSERT / saveAsTable, CTAS): the query's output attributes as its top operator prints
    them (`Project [… AS id#7L, …]`, `Aggregate [keys], [outputs]`, `LocalRelation […]`), each
    column assigned from its attribute, to be resolved in that execution. None when the
    operator prints no output list (`Filter`)."""
    named = _query_output(query)
    if named is None:
        return None
    fields = tuple(Field(a.name, "long" if a.is_long else None) for a in named)
    columns = tuple(OutputColumn(a.name, ()) for a in named)
    assigned = {a.name: ((a.expr_id, IDENTITY),) for a in named}
    return DmlLineage(fields, ColumnLineage(columns, ()), assigned)


def query_attributes(query: str) -> tuple[int, ...]:
    """The ids of the attributes a write's nested query returns, as its top operator prints
    them (see `query_lineage`), else of those the operator reads: a `Filter (region#3 = eu)`
    returns its child's output, which holds them. They recognize the execution that runs
    the query (its root returns them all)."""
    named = _query_output(query)
    if named is not None:
        return tuple(dict.fromkeys(a.expr_id for a in named))
    return tuple(dict.fromkeys(a for a, _ in references(query).references))


def _query_output(query: str) -> list[Attribute] | None:
    """The output attributes the top operator of a query prints; None if it prints none."""
    lists = [b for t in split_top(query) if (b := bracketed(t.strip().split(" ", 1)[-1]))]
    lists += [b for t in split_top(query) if (b := bracketed(t.strip()))]
    for items in reversed(lists):
        attrs = [parse_attribute(i.strip().rpartition(" AS ")[2]) for i in items]
        if attrs and all(a is not None for a in attrs):
            return [a for a in attrs if a is not None]
    return None


def _clause(
    clause: str, assigned: dict[str, list[tuple[int, Transformation]]], conditions: list[int]
) -> None:
    """`Update [condition: c, actions: [`a` = e, ...]]`: record its condition and actions."""
    body = clause[clause.find("[") + 1 : clause.rfind("]")] if "[" in clause else ""
    for part in split_top(body):
        key, _, value = part.strip().partition(": ")
        if key == "condition":
            conditions += [a for a, _ in references(value).references]
        elif key == "actions":
            for action in bracketed(value.strip()) or []:
                matched = _ACTION.match(action.strip())
                if matched is None:
                    continue
                column = matched["column"].replace("``", "`")
                found = references(matched["expr"]).references
                assigned.setdefault(column, []).extend(found)


def _relation(described: Sequence[Block]) -> list[Attribute]:
    """The table's attributes, as its `LogicalRelation` lists them."""
    args = block_detail(described, "LogicalRelation", "Arguments") or ""
    tokens = split_top(args)
    listed = bracketed(tokens[1].strip()) if len(tokens) > 1 else None
    return [a for a in map(parse_attribute, listed or []) if a is not None]


def _typed(table: Sequence[Attribute]) -> tuple[Field, ...]:
    """The table's columns, typed long where the relation prints them so (`id#12L`)."""
    return tuple(Field(attr.name, "long" if attr.is_long else None) for attr in table)


def _column(name: str, found: set[tuple[str, Transformation]]) -> OutputColumn:
    inputs = tuple(InputField(TABLE_SCAN, field, (how,)) for field, how in sorted(found))
    return OutputColumn(name, inputs)


def _fields(
    found: Sequence[tuple[int, Transformation]], ids: Mapping[int, str], how: Transformation
) -> tuple[InputField, ...]:
    names = dict.fromkeys(ids[a] for a, _ in found if a in ids)
    return tuple(InputField(TABLE_SCAN, name, (how,)) for name in names)


def _struct_field(match: linear.Match) -> Field:
    kind = TYPE_NAMES.get(match["type"])
    if kind == "decimal" and match["args"]:
        kind += match["args"]
    return Field(match["name"].strip(), kind)
