"""The job shapes the side-by-side harness runs, one Spark application each.

A shape names a job function of `jobs.py` (the PySpark program), the Spark configuration
that application needs beyond the common one, and what it needs from the machine. To add a
shape (Delta, Iceberg, Kafka, streaming), write its job function in `jobs.py` and add a row
here; `packages` lists the bundles of `scripts/jars.py` it needs on the driver's class path
(fetched and passed with `spark.jars`). `pyspark` names the PySpark version a shape needs
when it is not the project's: those shapes run in a second jobs.py process in the
environment `scripts/pyenv.py lakehouse` builds under build/ (PySpark 4.1.1, the newest Spark
the Delta, Iceberg and Kafka connectors support). Their jobs (`lake:<name>`) are the
functions of `tests/data/make_lakehouse_logs.py` that made the checked-in lakehouse logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Need = Literal["postgres", "hive", "kafka"]


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
LAKE = "tests/data/make_lakehouse_logs.py"
LAKE_PYSPARK = "4.1.1"
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


def lake(name: str, what: str, packages: tuple[str, ...], *, kafka: bool = False) -> Shape:
    """A shape of the lakehouse log generator, run on its PySpark."""
    needs: tuple[Need, ...] = ("kafka",) if kafka else ()
    return Shape(
        name, f"lake:{name}", what, LAKE, packages=packages, needs=needs, pyspark=LAKE_PYSPARK
    )


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
    lake(
        "delta_path",
        "Delta path table: create, append, overwrite, MERGE, UPDATE, DELETE, time travel",
        ("delta",),
    ),
    lake(
        "delta_catalog",
        "Delta catalog tables: CREATE, INSERT, CTAS, saveAsTable, MERGE, UPDATE, DELETE",
        ("delta",),
    ),
    lake(
        "iceberg_hadoop",
        "Iceberg (Hadoop catalog): CREATE, INSERT, MERGE, UPDATE, DELETE, CTAS",
        ("iceberg",),
    ),
    lake(
        "iceberg_jdbc",
        "Iceberg (JDBC catalog on SQLite): the same statements",
        ("iceberg", "sqlite-jdbc"),
    ),
    lake(
        "kafka_batch",
        "Kafka batch writes (topic option, topic column, avro) and reads",
        ("spark-kafka", "spark-avro"),
        kafka=True,
    ),
    lake("stream_file_parquet", "Structured Streaming: JSON files to parquet, availableNow", ()),
    lake(
        "stream_kafka_delta",
        "Structured Streaming: Kafka to a Delta MERGE in foreachBatch",
        ("spark-kafka", "delta"),
        kafka=True,
    ),
    lake("stream_failure", "Structured Streaming: a micro-batch failing at run time", ()),
    lake(
        "kafka_sink_columns",
        "Kafka batch saves from files: to_json value and key, a topic computed from a column",
        ("spark-kafka",),
        kafka=True,
    ),
    lake(
        "stream_kafka_window",
        "Structured Streaming: Kafka, from_json, watermark, window aggregation to JSON files",
        ("spark-kafka",),
        kafka=True,
    ),
    lake(
        "stream_join_delta",
        "Structured Streaming: file stream joined with a parquet dimension into Delta, cut lists",
        ("delta",),
    ),
    lake(
        "stream_fail_caught",
        "Structured Streaming: first micro-batch fails, the program catches it and exits 0",
        (),
    ),
    Shape("pivot", "pivot", "pivot with two aggregates over listed values", COLUMNS),
    Shape(
        "hive_dynamic_partition",
        "hive_dynamic_partition",
        "Hive CREATE TABLE, dynamic-partition INSERT ... SELECT (one pruned to no file)",
        "tests/golden/plans/hive_dynamic_partition.json",
        needs=("hive",),
    ),
    lake(
        "delta_merge_window",
        "Delta MERGE from the latest row per key of JSON (row_number window, to_date)",
        ("delta",),
    ),
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
