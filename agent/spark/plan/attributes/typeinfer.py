"""Types of computed columns, read from the expressions that define them.

The plan text gives types only where a scan prints its `ReadSchema` or an expression casts.
Every other written column is typed here from the expression that defines it
(`columns.PlanGraph.expressions`): functions by what they return (`upper` -> string, `count`
-> long, `avg` -> double, `max` -> its argument's type, `collect_list` -> an array of it),
binary operators by Spark's numeric promotion, `CASE` by its branches, `struct(...)` by its
fields, a bare word (`x AS s#8`: Spark prints string literals unquoted) as a string (what
functions, operators and literals return is in `returns`). What
cannot be told for sure (decimal precision after arithmetic, literals of digits that may be
decimals, doubles or strings, user-defined functions) stays None: an absent type, never a
wrong one.

Expressions are single lines of untrusted plan text (`$` is their end): the patterns are
RE2's (`agent.linear`), linear in the text. Each nested expression is read again from its
own text, so nesting is followed `_MAX_NESTING` levels deep at most: typing one expression
takes time linear in its length, however deep a crafted one nests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from agent import linear
from agent.spark.plan.attributes.columns import PlanGraph
from agent.spark.plan.attributes.returns import (
    ARITHMETIC,
    COLLECTIONS,
    COMPARISONS,
    DATA_TYPES,
    SAME_AS_ARGUMENT,
    fixed_type,
    json_struct,
    literal,
    named,
    promote,
    sum_of,
)
from agent.spark.plan.syntax.expressions import IDENTITY, attribute_id, whole_words
from agent.spark.plan.syntax.schema import Field, avro_field, field_of, split_top

_OPERATORS: Final = (*COMPARISONS, *ARITHMETIC)
#: Nested expressions typed at most (a sum of 64 terms nests 64 deep); deeper ones stay None.
_MAX_NESTING: Final = 64
_CALL = linear.compile(r"(?s)^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\)$")
_CAST = linear.compile(
    r"^(?:try_)?cast\((?P<value>.*) as "
    rf"(?P<type>[^()]+(?:\(\d+(?:,[{linear.SPACE}]*\d+)?\))?)\)$"
)
_WINDOW = linear.compile(r"(?s) windowspecdefinition\(.*\)$")
_FILTER = linear.compile(r"(?s) FILTER \(WHERE .*\)$")
#: `o#12.amount`: a field of a struct-typed value
_FIELD_ACCESS = linear.compile(
    rf"(?s)^(?P<value>.*[#)\]`{linear.WORD}])\.(?P<field>[A-Za-z_][{linear.WORD}]*)$"
)
#: `Subquery subquery#164, [id=#1111]`: the subquery's value is attribute 164
_SUBQUERY = linear.compile(
    rf"^(?:ReusedSubquery )?Subquery (?P<value>[^{linear.SPACE}]+#\d+L?), \[id=#\d+\]$"
)


class TypeOracle:
    """Types of a plan's attributes: known ones first, else inferred and remembered."""

    def __init__(self, graph: PlanGraph, known: Mapping[int, Field]) -> None:
        self._graph = graph
        self._known = known
        self._memo: dict[int, Field | None] = {}

    def of(self, attr: int) -> Field | None:
        """The type of an attribute as a nameless field, None if the plan does not tell."""
        if attr in self._memo:
            return self._memo[attr]
        self._memo[attr] = None  # a cycle types nothing
        try:
            found = self._infer(attr)
        except RecursionError:  # an absurdly deep chain of definitions
            found = None
        self._memo[attr] = found
        return found

    def _infer(self, attr: int) -> Field | None:
        known = self._known.get(attr)
        if known is not None:
            return known
        graph = self._graph
        generated = graph.generated.get(attr)
        if generated is not None:
            return self._generated(*generated)
        expression = graph.expressions.get(attr)
        if expression is not None:
            return self.expression(expression)
        for child, how in graph.edges.get(attr, ()):
            if how == IDENTITY and (found := self.of(child)) is not None:
                return found
        return None

    def expression(self, text: str) -> Field | None:
        """The type of an expression's value."""
        return self._typed(text, 0)

    def _typed(self, text: str, nesting: int) -> Field | None:
        """The type of an expression `nesting` levels inside the one typed."""
        if nesting > _MAX_NESTING:
            return None
        inner = nesting + 1
        text = _FILTER.sub("", _WINDOW.sub("", text.strip()))
        subquery = _SUBQUERY.match(text)
        alone = attribute_id(subquery["value"] if subquery else text)
        if alone is not None:
            return self.of(alone)
        access = _FIELD_ACCESS.match(text)
        if access is not None and "#" in access["value"]:
            found = self._field_of(access["value"], access["field"], inner)
            if found is not None:
                return found
        if text.startswith("(") and text.endswith(")") and _closes_at_end(text):
            return self._binary(text[1:-1], inner)
        if text.startswith("CASE WHEN ") and text.endswith(" END"):
            return self._first_known(_case_values(text[5:-4]), inner)
        if text.startswith("NOT ") or " IN (" in text or " LIKE " in text:
            return Field("", "boolean")
        cast = _CAST.match(text)
        if cast is not None:
            try:
                return field_of("", cast["type"])
            except ValueError:
                return None
        call = _CALL.match(text)
        if call is not None:
            return self._call(call["name"].lower(), split_top(call["args"]), inner)
        return literal(text)

    def _call(self, name: str, args: list[str], nesting: int) -> Field | None:
        for prefix in ("partial_", "merge_", "try_"):
            name = name.removeprefix(prefix)
        fixed = fixed_type(name)
        if fixed is not None:
            return fixed
        first = self._typed(args[0], nesting) if args else None
        if name in SAME_AS_ARGUMENT:
            return first
        if name == "sum":
            return sum_of(first)
        if name in ("avg", "mean"):  # the average of decimals is a decimal of its own scale
            return sum_of(first) and Field("", "double")
        if name in COLLECTIONS or name == "array":
            return Field("", "array", (named(first, "_element"),))
        if name in ("struct", "named_struct"):
            pairs = zip(args[0::2], args[1::2], strict=False)
            return Field(
                "",
                "struct",
                tuple(named(self._typed(v, nesting), n.strip()) for n, v in pairs),
            )
        if name == "from_avro" and len(args) >= 2:  # the Avro schema the value is read with
            try:
                return avro_field("", args[1].strip())
            except ValueError:
                return None
        if name == "from_json":  # the schema's fields first, then the value and options
            return json_struct(args)
        if name == "precisetimestampconversion" and len(args) == 3:  # (value, from, to)
            found = DATA_TYPES.get(args[2].strip())
            return Field("", found) if found else None
        if name == "if" and len(args) == 3:
            return self._first_known(args[1:], nesting)
        return None

    def _field_of(self, value: str, name: str, nesting: int) -> Field | None:
        """The type of a field of a struct-typed value (`o#12.amount`)."""
        struct = self._typed(value, nesting)
        if struct is None or struct.type != "struct":
            return None
        for child in struct.fields:
            if child.name == name:
                return Field("", child.type, child.fields)
        return None

    def _generated(self, generator: str, position: int) -> Field | None:
        """An output of `explode`, `posexplode`, `inline`: element, position, key / value."""
        call = _CALL.match(generator.strip())
        if call is None:
            return None
        name = call["name"].lower().removesuffix("_outer")
        args = split_top(call["args"])
        source = self.expression(args[0]) if args else None
        if name.startswith("pos"):
            if position == 0:
                return Field("", "integer")
            name, position = name[3:], position - 1
        parts = source.fields if source is not None else ()
        if name == "explode" and source is not None:
            if source.type == "array" and position == 0 and parts:
                return parts[0]
            if source.type == "map" and position < len(parts):
                return parts[position]
        if name == "inline" and parts and parts[0].type == "struct":
            inner = parts[0].fields
            return inner[position] if position < len(inner) else None
        return None

    def _binary(self, inner: str, nesting: int) -> Field | None:
        at = _top_level(inner)
        if any(operator in at for operator in COMPARISONS):
            return Field("", "boolean")
        for operator in ARITHMETIC:
            if operator in at:
                left = self._typed(inner[: at[operator]], nesting)
                right = self._typed(inner[at[operator] + len(operator) :], nesting)
                return promote(left, right, operator.strip())
        return self._typed(inner, nesting)

    def _first_known(self, values: list[str], nesting: int) -> Field | None:
        for value in values:
            found = self._typed(value, nesting)
            if found is not None and found.type is not None:
                return found
        return None


def _closes_at_end(text: str) -> bool:
    """Whether the opening parenthesis at 0 is closed by the last character."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(text) - 1
    return False


def _top_level(text: str) -> dict[str, int]:
    """Where each operator first stands outside brackets, in one pass (they all start with a
    space)."""
    found: dict[str, int] = {}
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == " " and depth == 0:
            for operator in _OPERATORS:
                if operator not in found and text.startswith(operator, i):
                    found[operator] = i
    return found


def _case_values(body: str) -> list[str]:
    """The THEN and ELSE values of `WHEN c THEN v ... ELSE v` (outside brackets)."""
    values: list[str] = []
    depth = 0
    start: int | None = None
    words = dict(whole_words(body, ("WHEN", "THEN", "ELSE")))
    for i, ch in enumerate(body):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and i in words:
            if start is not None:
                values.append(body[start:i].strip())
            start = i + 4 if words[i] in ("THEN", "ELSE") else None
    if start is not None:
        values.append(body[start:].strip())
    return values
