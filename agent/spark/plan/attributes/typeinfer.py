"""Types of computed columns, read from the expressions that define them.

The plan text gives types only where a scan prints its `ReadSchema` or an expression casts.
Every other written column is typed here from the expression that defines it
(`columns.PlanGraph.expressions`): functions by what they return (`upper` -> string, `count`
-> long, `avg` -> double, `max` -> its argument's type, `collect_list` -> an array of it),
binary operators by Spark's numeric promotion, `CASE` by its branches, `struct(...)` by its
fields, a bare word (`x AS s#8`: Spark prints string literals unquoted) as a string. What
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
from agent.spark.plan.columns import PlanGraph
from agent.spark.plan.expressions import IDENTITY, attribute_id, whole_words
from agent.spark.plan.schema import Field, avro_field, field_of, split_top

_STRING: Final = frozenset(
    {
        "upper", "lower", "ucase", "lcase", "concat", "concat_ws", "substring", "substr",
        "trim", "ltrim", "rtrim", "btrim", "lpad", "rpad", "regexp_replace",
        "regexp_extract", "replace", "translate", "initcap", "repeat", "format_string",
        "printf", "format_number", "date_format", "from_unixtime", "sha", "sha1", "sha2",
        "md5", "base64", "hex", "split_part", "left", "right", "uuid", "current_user",
        "input_file_name", "to_json", "string", "char", "chr", "soundex", "overlay", "elt",
        "mask", "to_char", "to_varchar", "string_agg", "listagg", "quote", "typeof",
    }
)  # fmt: skip
_INTEGER: Final = frozenset(
    {
        "length", "char_length", "character_length", "size", "cardinality", "array_size",
        "hash", "instr", "locate", "position", "ascii", "dayofmonth", "day", "month", "year",
        "hour", "minute", "quarter", "dayofweek", "weekday", "weekofyear", "dayofyear",
        "row_number", "rank", "dense_rank", "ntile", "datediff", "spark_partition_id",
        "bit_length", "octet_length", "levenshtein", "int", "find_in_set", "sign",
    }
)  # fmt: skip
_LONG: Final = frozenset(
    {
        "count", "count_if", "approx_count_distinct", "xxhash64", "crc32",
        "monotonically_increasing_id", "unix_timestamp", "bigint", "regr_count",
        "unix_seconds", "unix_millis", "unix_micros", "bit_count",
    }
)  # fmt: skip
_DOUBLE: Final = frozenset(
    {
        "stddev", "stddev_pop", "stddev_samp", "std", "variance", "var_pop",
        "var_samp", "corr", "covar_pop", "covar_samp", "percent_rank", "cume_dist", "rand",
        "randn", "sqrt", "cbrt", "exp", "expm1", "log", "ln", "log10", "log2", "log1p", "pow",
        "power", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
        "skewness", "kurtosis", "percentile", "median", "degrees", "radians", "double",
    }
)  # fmt: skip
_BOOLEAN: Final = frozenset(
    {
        "isnull", "isnotnull", "isnan", "exists", "forall", "array_contains", "startswith",
        "endswith", "contains", "like", "ilike", "rlike", "bool_and", "bool_or", "every",
        "some", "any", "in", "boolean", "arrays_overlap",
    }
)  # fmt: skip
_DATE: Final = frozenset(
    {"to_date", "current_date", "date_add", "date_sub", "add_months", "last_day", "next_day",
     "make_date", "date_from_unix_date", "curdate"}
)  # fmt: skip
_TIMESTAMP: Final = frozenset(
    {"current_timestamp", "now", "to_timestamp", "timestamp", "from_utc_timestamp",
     "to_utc_timestamp", "date_trunc", "timestamp_seconds", "timestamp_millis",
     "make_timestamp", "localtimestamp"}
)  # fmt: skip
#: Functions whose result has their first argument's type.
_SAME_AS_ARGUMENT: Final = frozenset(
    {
        "min", "max", "first", "last", "any_value", "first_value", "last_value", "lag",
        "lead", "nth_value", "coalesce", "nvl", "ifnull", "nullif", "abs", "negative",
        "positive", "greatest", "least", "knownfloatingpointnormalized",
        "normalizenanandzero", "sort_array", "array_distinct", "array_sort", "shuffle",
        "assert_not_null", "mode", "max_by", "min_by", "knownnullable", "knownnotnull",
    }
)  # fmt: skip
#: Spark's data types as `from_json` and `precisetimestampconversion` print them.
_DATA_TYPES: Final = {
    "StringType": "string", "LongType": "long", "IntegerType": "integer", "ShortType": "short",
    "ByteType": "byte", "DoubleType": "double", "FloatType": "float", "BooleanType": "boolean",
    "DateType": "date", "TimestampType": "timestamp", "TimestampNTZType": "timestamp_ntz",
    "BinaryType": "binary",
}  # fmt: skip
#: `StructField(name,StringType,true)`: a field of the schema `from_json` reads with.
_STRUCT_FIELD = linear.compile(
    rf"^StructField\((?P<name>[^,()]+),(?P<type>[{linear.WORD}]+),(?:true|false)\)$"
)
_COLLECTIONS: Final = frozenset({"collect_list", "collect_set", "array_agg"})
_COMPARISONS: Final = (" AND ", " OR ", " = ", " <=> ", " > ", " >= ", " < ", " <= ", " != ")
_ARITHMETIC: Final = (" + ", " - ", " * ", " / ", " % ", " div ")
_OPERATORS: Final = (*_COMPARISONS, *_ARITHMETIC)
#: Nested expressions typed at most (a sum of 64 terms nests 64 deep); deeper ones stay None.
_MAX_NESTING: Final = 64
_INTEGRAL: Final = ("byte", "short", "integer", "long")
_CALL = linear.compile(r"(?s)^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<args>.*)\)$")
_CAST = linear.compile(
    r"^(?:try_)?cast\((?P<value>.*) as "
    rf"(?P<type>[^()]+(?:\(\d+(?:,[{linear.SPACE}]*\d+)?\))?)\)$"
)
_WINDOW = linear.compile(r"(?s) windowspecdefinition\(.*\)$")
_FILTER = linear.compile(r"(?s) FILTER \(WHERE .*\)$")
#: `Subquery subquery#164, [id=#1111]`: the subquery's value is attribute 164
#: What only a string literal prints as: Spark prints them bare (`x AS s#8`). Numbers,
#: dates, timestamps and binaries start with a digit or a sign, intervals with INTERVAL;
#: an attribute has `#`, a call or operator brackets.
_STRING_LITERAL = linear.compile(r"[A-Za-z_][^#()\[\]{}]*")
_NOT_STRINGS: Final = frozenset({"null", "NaN", "Infinity"})
_INTEGER_LITERAL = linear.compile(r"-?\d+")
_LONG_LITERAL = linear.compile(r"-?\d+L")
#: `o#12.amount`: a field of a struct-typed value
_FIELD_ACCESS = linear.compile(
    rf"(?s)^(?P<value>.*[#)\]`{linear.WORD}])\.(?P<field>[A-Za-z_][{linear.WORD}]*)$"
)
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
        return _literal(text)

    def _call(self, name: str, args: list[str], nesting: int) -> Field | None:
        for prefix in ("partial_", "merge_", "try_"):
            name = name.removeprefix(prefix)
        for names, type_name in (
            (_STRING, "string"),
            (_INTEGER, "integer"),
            (_LONG, "long"),
            (_DOUBLE, "double"),
            (_BOOLEAN, "boolean"),
            (_DATE, "date"),
            (_TIMESTAMP, "timestamp"),
        ):
            if name in names:
                return Field("", type_name)
        first = self._typed(args[0], nesting) if args else None
        if name in _SAME_AS_ARGUMENT:
            return first
        if name == "sum":
            return _sum(first)
        if name in ("avg", "mean"):  # the average of decimals is a decimal of its own scale
            return _sum(first) and Field("", "double")
        if name in _COLLECTIONS or name == "array":
            return Field("", "array", (_named(first, "_element"),))
        if name in ("struct", "named_struct"):
            pairs = zip(args[0::2], args[1::2], strict=False)
            return Field(
                "",
                "struct",
                tuple(_named(self._typed(v, nesting), n.strip()) for n, v in pairs),
            )
        if name == "from_avro" and len(args) >= 2:  # the Avro schema the value is read with
            try:
                return avro_field("", args[1].strip())
            except ValueError:
                return None
        if name == "from_json":  # the schema's fields first, then the value and options
            return _json_struct(args)
        if name == "precisetimestampconversion" and len(args) == 3:  # (value, from, to)
            found = _DATA_TYPES.get(args[2].strip())
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
        if any(operator in at for operator in _COMPARISONS):
            return Field("", "boolean")
        for operator in _ARITHMETIC:
            if operator in at:
                left = self._typed(inner[: at[operator]], nesting)
                right = self._typed(inner[at[operator] + len(operator) :], nesting)
                return _promote(left, right, operator.strip())
        return self._typed(inner, nesting)

    def _first_known(self, values: list[str], nesting: int) -> Field | None:
        for value in values:
            found = self._typed(value, nesting)
            if found is not None and found.type is not None:
                return found
        return None


def _json_struct(args: list[str]) -> Field | None:
    """`from_json(StructField(a,LongType,true), …, <value>, …)`: a struct of those fields
    when all of them are of a plain type; None when one is nested (printed unreadably)."""
    fields: list[Field] = []
    for arg in args:
        text = arg.strip()
        matched = _STRUCT_FIELD.match(text)
        if matched is None:
            if text.startswith("StructField("):
                return None  # a field of a nested type: the struct is not read in part
            break  # the schema's fields are over: the options and the value follow
        found = _DATA_TYPES.get(matched["type"])
        if found is None:
            return None
        fields.append(Field(matched["name"].strip(), found))
    return Field("", "struct", tuple(fields)) if fields else None


def _literal(text: str) -> Field | None:
    if _INTEGER_LITERAL.fullmatch(text):
        return Field("", "integer")
    if _LONG_LITERAL.fullmatch(text):
        return Field("", "long")
    if text in ("true", "false"):
        return Field("", "boolean")
    if (
        _STRING_LITERAL.fullmatch(text)
        and not text.startswith("INTERVAL ")
        and text not in _NOT_STRINGS
    ):
        return Field("", "string")
    return None  # decimals, doubles, dates and strings of digits print alike


def _sum(argument: Field | None) -> Field | None:
    if argument is None:
        return None
    if argument.type in _INTEGRAL:
        return Field("", "long")
    if argument.type in ("double", "float"):
        return Field("", "double")
    return None  # decimals widen by ten digits of precision: the plan does not say which


def _promote(left: Field | None, right: Field | None, operator: str) -> Field | None:
    """Spark's arithmetic result type for two operands of known simple types."""
    types = {side.type for side in (left, right) if side is not None}
    if operator == "div":
        return Field("", "long")
    if types & {"double", "float"}:  # whatever the other side is, it is cast to double
        return Field("", "double")
    if left is None or right is None:
        return None
    if operator == "/" and types <= set(_INTEGRAL):
        return Field("", "double")
    if types <= set(_INTEGRAL):
        wider = max(types, key=lambda t: _INTEGRAL.index(str(t)))
        return Field("", wider)
    return None


def _named(found: Field | None, name: str) -> Field:
    return Field(name, found.type, found.fields) if found is not None else Field(name)


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
