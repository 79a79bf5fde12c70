"""Schema fields read from table metadata within a memory bound, and what they keep.

Delta's `metaData.schemaString` and the schema Spark writes into parquet footers are Spark's
JSON schema in a string (up to a few MiB); `spark_schema` lets `spark_struct` read one only
when json.loads makes it within `SCHEMA_BUDGET`. A table's schema is far smaller: a schema
over the budget is a flood (tens of thousands of columns), and tells nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from agent.spark.plan.syntax.schema import Field, spark_struct
from agent.spark.tables.jsonstream import Budget, check_loads

#: The memory one schema's JSON may take while it is read (about 18 000 columns).
SCHEMA_BUDGET: Final = 16 * 1024 * 1024
_FIELD: Final = 136  # a Field, its slot in a tuple, and its name's str header


def spark_schema(text: str) -> tuple[Field, ...]:
    """Spark's JSON schema in `text` as fields; ValueError when it is unreadable or would
    take more than `SCHEMA_BUDGET` to read."""
    check_loads(text, Budget(SCHEMA_BUDGET, "the Spark schema"))
    return spark_struct(text)


def fields_size(fields: Iterable[Field]) -> int:
    """What the fields keep, about (names and nested fields counted)."""
    return sum(_FIELD + len(f.name) + fields_size(f.fields) for f in fields)
