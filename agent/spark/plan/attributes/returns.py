"""What Spark's functions, operators and literals return, as `typeinfer` reads them: the
functions of one fixed result type by name, those whose result has their argument's type,
the numeric promotion of arithmetic, the types `from_json` reads with and the literals Spark
prints bare. What cannot be told for sure stays None: an absent type, never a wrong one."""

from __future__ import annotations

from typing import Final

from agent import linear
from agent.spark.plan.syntax.schema import Field

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
SAME_AS_ARGUMENT: Final = frozenset(
    {
        "min", "max", "first", "last", "any_value", "first_value", "last_value", "lag",
        "lead", "nth_value", "coalesce", "nvl", "ifnull", "nullif", "abs", "negative",
        "positive", "greatest", "least", "knownfloatingpointnormalized",
        "normalizenanandzero", "sort_array", "array_distinct", "array_sort", "shuffle",
        "assert_not_null", "mode", "max_by", "min_by", "knownnullable", "knownnotnull",
    }
)  # fmt: skip
#: Spark's data types as `from_json` and `precisetimestampconversion` print them.
DATA_TYPES: Final = {
    "StringType": "string", "LongType": "long", "IntegerType": "integer", "ShortType": "short",
    "ByteType": "byte", "DoubleType": "double", "FloatType": "float", "BooleanType": "boolean",
    "DateType": "date", "TimestampType": "timestamp", "TimestampNTZType": "timestamp_ntz",
    "BinaryType": "binary",
}  # fmt: skip
#: `StructField(name,StringType,true)`: a field of the schema `from_json` reads with.
_STRUCT_FIELD = linear.compile(
    rf"^StructField\((?P<name>[^,()]+),(?P<type>[{linear.WORD}]+),(?:true|false)\)$"
)
COLLECTIONS: Final = frozenset({"collect_list", "collect_set", "array_agg"})
COMPARISONS: Final = (" AND ", " OR ", " = ", " <=> ", " > ", " >= ", " < ", " <= ", " != ")
ARITHMETIC: Final = (" + ", " - ", " * ", " / ", " % ", " div ")
_INTEGRAL: Final = ("byte", "short", "integer", "long")
#: What only a string literal prints as: Spark prints them bare (`x AS s#8`). Numbers,
#: dates, timestamps and binaries start with a digit or a sign, intervals with INTERVAL;
#: an attribute has `#`, a call or operator brackets.
_STRING_LITERAL = linear.compile(r"[A-Za-z_][^#()\[\]{}]*")
_NOT_STRINGS: Final = frozenset({"null", "NaN", "Infinity"})
_INTEGER_LITERAL = linear.compile(r"-?\d+")
_LONG_LITERAL = linear.compile(r"-?\d+L")


def fixed_type(name: str) -> Field | None:
    """The result of a function whose result type is fixed (`upper` -> string, `count` ->
    long), by its lower-case name; None for any other function."""
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
    return None


def json_struct(args: list[str]) -> Field | None:
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
        found = DATA_TYPES.get(matched["type"])
        if found is None:
            return None
        fields.append(Field(matched["name"].strip(), found))
    return Field("", "struct", tuple(fields)) if fields else None


def literal(text: str) -> Field | None:
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


def sum_of(argument: Field | None) -> Field | None:
    if argument is None:
        return None
    if argument.type in _INTEGRAL:
        return Field("", "long")
    if argument.type in ("double", "float"):
        return Field("", "double")
    return None  # decimals widen by ten digits of precision: the plan does not say which


def promote(left: Field | None, right: Field | None, operator: str) -> Field | None:
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


def named(found: Field | None, name: str) -> Field:
    return Field(name, found.type, found.fields) if found is not None else Field(name)
