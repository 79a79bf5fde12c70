"""The job shapes the side-by-side harness runs, one Spark application each.

A shape names a job function of `jobs.py` (the PySpark program), the Spark configuration
that application needs beyond the common one, and what it needs from the machine. To add a
shape (Delta, Iceberg, Kafka, streaming), write its job function in `jobs.py` and add a row
here; `packages` lists the bundles of `scripts/jars.py` it needs on the driver's class path
(fetched and passed with `spark.jars`). `pyspark` names the PySpark version a shape needs
when it is not the project's: such shapes are reported as skipped until the harness builds
that environment (a venv under build/ and a second jobs.py process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Need = Literal["postgres", "hive"]


@dataclass(frozen=True)
class Shape:
    """One application: `job` is a function of jobs.py; `origin` says where the test suite
    already runs this shape."""

    name: str
    job: str
    what: str
    origin: str
    conf: dict[str, str] = field(default_factory=dict)
    needs: tuple[Need, ...] = ()
    packages: tuple[str, ...] = ()
    pyspark: str | None = None


SCENARIOS = "tests/sparkjobs/scenarios.py"
COLUMNS = "tests/sparkjobs/columns_jobs.py"
GOLDEN = "tests/golden/make_golden_logs.py"
SHOW_URLS = {"spark.sql.redaction.options.regex": "(?i)secret|password"}
NO_BROADCAST = {"spark.sql.autoBroadcastJoinThreshold": "-1"}
JDBC_CATALOG = "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"
DERBY = {
    "spark.sql.catalog.derby": JDBC_CATALOG,
    "spark.sql.catalog.derby.url": "jdbc:derby:memory:peer;create=true",
    "spark.sql.redaction.options.regex": "(?i)password",
}

SHAPES: tuple[Shape, ...] = (
    Shape("parquet", "parquet", "parquet write, read back, filter, overwrite", SCENARIOS),
    Shape("csv", "csv", "CSV with header and schema inference to CSV", SCENARIOS),
    Shape("json", "json", "JSON filtered to JSON", SCENARIOS),
    Shape("orc", "orc", "catalog table to partitioned ORC", GOLDEN),
    Shape("text", "text", "text file to CSV", GOLDEN),
    Shape("nested_json", "nested_json", "nested JSON (struct, array, map) to JSON", GOLDEN),
    Shape("projection", "projection", "renames, functions, CASE, literals", COLUMNS),
    Shape("aggregate", "aggregate", "group by with six aggregates", COLUMNS),
    Shape("join_broadcast", "join_broadcast", "broadcast hash join", COLUMNS),
    Shape("join_sort_merge", "join_sort_merge", "sort-merge join", COLUMNS, NO_BROADCAST),
    Shape("join_csv_json", "join_csv_json", "CSV joined with JSON to parquet", SCENARIOS),
    Shape("union", "union", "union of two parquet inputs", COLUMNS),
    Shape("union_by_name", "union_by_name", "CSV unionByName JSON to JSON", SCENARIOS),
    Shape("window", "window", "row_number, windowed sum, lag", COLUMNS),
    Shape("explode", "explode", "explode and posexplode_outer", COLUMNS),
    Shape("rollup", "rollup", "rollup over two keys", COLUMNS),
    Shape("scalar_subquery", "scalar_subquery", "two scalar subqueries", COLUMNS),
    Shape("cached", "cached", "a cached DataFrame filled, then written", COLUMNS),
    Shape("temp_view", "temp_view", "a temp view queried with SQL and written", "new"),
    Shape("tables", "tables", "CTAS, INSERT INTO, saveAsTable", SCENARIOS),
    Shape("ctas_join", "ctas_join", "CTAS over a join of two tables, then INSERT", COLUMNS),
    Shape(
        "hive", "hive", "Hive-format CTAS, INSERT, Hive scan to parquet", GOLDEN, needs=("hive",)
    ),
    Shape(
        "jdbc_postgres",
        "jdbc_postgres",
        "JDBC write and read (PostgreSQL)",
        SCENARIOS,
        SHOW_URLS,
        ("postgres",),
    ),
    Shape(
        "jdbc_redacted",
        "jdbc_redacted",
        "JDBC write with Spark's default redaction",
        SCENARIOS,
        needs=("postgres",),
    ),
    Shape(
        "jdbc_derby",
        "jdbc_derby",
        "JDBC V1 write and read, V2 catalog INSERT (Derby)",
        COLUMNS,
        DERBY,
    ),
    Shape("divide_by_zero", "divide_by_zero", "a write failing at run time (ANSI)", SCENARIOS),
    Shape("udf_failure", "udf_failure", "a Python UDF raising inside a write", "spark-eventlogs"),
    Shape("cancelled", "cancelled", "a write in a job group cancelled by the driver", SCENARIOS),
    Shape("rdd", "rdd", "RDD textFile count and saveAsTextFile", GOLDEN),
    Shape("wide", "wide", "the 500-column table: copy, row hash, mixed columns", COLUMNS),
)


def by_name(names: list[str] | None = None) -> list[Shape]:
    """The shapes to run: all, or those named (in table order); unknown names are an error."""
    if not names:
        return list(SHAPES)
    known = {shape.name for shape in SHAPES}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"unknown shapes {unknown}; known: {sorted(known)}")
    return [shape for shape in SHAPES if shape.name in names]
