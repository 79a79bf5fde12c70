"""Queries whose plans exercise column lineage: one application, one JVM, one write each.

Usage: python columns_jobs.py OUT_DIR

Writes the uncompressed single-file event log of one application to `OUT_DIR/events/`,
the data it reads and writes under `OUT_DIR/data/` (catalog tables under
`OUT_DIR/warehouse/`) and `OUT_DIR/manifest.json`: the application id, how long it took,
and for every query its job description (set before it runs, so a test finds its execution
by description) and the location it writes. Each query runs as its own SQL execution (a
JDBC or V2 write runs its query as a nested one); configuration it needs (no broadcast, a
join strategy) is set before and reset after it.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import (
    adults_projected,
    city_totals,
    event_log,
    local_session,
    orders_frame,
    people_frame,
    sql_settings,
)

WIDE_COLUMNS = 500
DERBY_URL = "jdbc:derby:memory:columns;create=true"
JDBC_CATALOG = "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"


def session(out: Path) -> SparkSession:
    events = out / "events"
    events.mkdir(parents=True)
    settings = sql_settings("2", str(out / "warehouse"))
    settings["spark.default.parallelism"] = "2"
    derby = {
        # JDBC urls stay readable, so the JDBC datasets are named
        "spark.sql.redaction.options.regex": "(?i)password",
        "spark.sql.catalog.derby": JDBC_CATALOG,
        "spark.sql.catalog.derby.url": DERBY_URL,
    }
    log = event_log(events.as_uri(), compress=False, rolling=False)
    return local_session("local[2]", "columns", settings, log, derby)


class Jobs:
    """Runs the queries in turn; remembers what each one wrote for the manifest."""

    def __init__(self, spark: SparkSession, data: Path) -> None:
        self.spark = spark
        self.data = data
        self.written: dict[str, str] = {}

    def path(self, name: str) -> str:
        return str(self.data / name)

    def run(self, name: str, action: Callable[[], object], **conf: str) -> None:
        spark = self.spark
        saved = {key: spark.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            spark.conf.set(key, value)
        spark.sparkContext.setJobDescription(name)
        try:
            action()
        finally:
            for key, old in saved.items():
                if old is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, old)

    def write(self, name: str, frame: DataFrame, fmt: str = "parquet", **conf: str) -> None:
        target = self.path(name)
        self.written[name] = target
        self.run(name, lambda: frame.write.mode("overwrite").format(fmt).save(target), **conf)


def seed(jobs: Jobs) -> None:
    """The inputs: people and orders as parquet files and as catalog tables."""
    spark = jobs.spark
    people, orders = people_frame(spark), orders_frame(spark)
    jobs.write("people", people)
    jobs.write("orders", orders)
    jobs.write("people_b", people.where("age > 30"))
    jobs.run("people table", lambda: people.write.mode("overwrite").saveAsTable("customers"))
    jobs.run("orders table", lambda: orders.write.mode("overwrite").saveAsTable("sales"))


def queries(jobs: Jobs) -> None:
    spark = jobs.spark
    people = spark.read.parquet(jobs.path("people"))
    orders = spark.read.parquet(jobs.path("orders"))
    no_broadcast = {"spark.sql.autoBroadcastJoinThreshold": "-1"}

    jobs.write("projection", adults_projected(people))
    jobs.write("aggregate", city_totals(people))
    jobs.write(
        "join_broadcast",
        people.join(orders, people.id == orders.customer_id).select("name", "order_id", "amount"),
    )
    jobs.write(
        "join_sort_merge",
        people.join(orders, people.id == orders.customer_id).select("name", "amount"),
        **no_broadcast,
    )
    jobs.write(
        "join_shuffled_hash",
        people.join(orders.hint("shuffle_hash"), people.id == orders.customer_id).select(
            "city", "amount"
        ),
        **no_broadcast,
    )
    jobs.write(
        "join_nested_loop",
        people.join(orders, people.salary > orders.amount * 10).select("name", "order_id"),
    )
    jobs.write(
        "join_cartesian",
        people.crossJoin(orders).select("name", "order_id"),
        **no_broadcast,
    )
    people_b = spark.read.parquet(jobs.path("people_b"))
    jobs.write(
        "union",
        people.select("id", "name").union(people_b.select(F.col("id") * 100, F.upper("name"))),
    )
    by_city = Window.partitionBy("city").orderBy(F.col("salary").desc())
    jobs.write(
        "window",
        people.select(
            "name",
            F.row_number().over(by_city).alias("rank_in_city"),
            F.sum("salary").over(Window.partitionBy("city")).alias("city_payroll"),
            F.lag("age").over(by_city).alias("previous_age"),
        ),
    )
    jobs.write("explode", people.select("id", F.explode("tags").alias("tag")))
    jobs.write("posexplode", people.select("name", F.posexplode_outer("tags")))
    jobs.write(
        "rollup",
        people.rollup("city", "age").agg(F.sum("salary").alias("payroll")),
    )
    jobs.write(
        "sorted_top",
        people.orderBy(F.col("salary").desc()).limit(2).select("name", "salary"),
    )
    jobs.write(
        "scalar_subquery",
        spark.sql(
            f"SELECT name, salary - (SELECT avg(amount) FROM parquet.`{jobs.path('orders')}`)"
            f" AS above FROM parquet.`{jobs.path('people')}`"
            f" WHERE age > (SELECT min(age) FROM parquet.`{jobs.path('people_b')}`)"
        ),
    )
    jobs.write(
        "semi_join",
        people.join(orders, people.id == orders.customer_id, "left_semi").select("name"),
    )
    cached = people.select("id", "name", "salary").cache()
    jobs.run("cache fill", cached.count)
    jobs.write("cached", cached.select("name", (F.col("salary") * 2).alias("double_salary")))
    local = spark.createDataFrame([(1, "x"), (2, "y")], "n int, s string")
    jobs.write("local", local.select((F.col("n") * 2).alias("n2"), "s"))
    jobs.write("range", spark.range(5).select((F.col("id") % 2).alias("parity")))
    jobs.write(
        "values",
        spark.sql("SELECT col1 * 2 AS doubled, col2 AS label FROM VALUES (1, 'a'), (2, 'b')"),
    )
    jobs.write(
        "json_nested",
        people.select("id", F.struct("name", "age").alias("who")),
        fmt="json",
    )
    jobs.run(
        "ctas_join",
        lambda: spark.sql(
            "CREATE TABLE customer_sales USING parquet AS "
            "SELECT c.name, c.city, s.amount, s.amount * 1.2 AS gross "
            "FROM customers c JOIN sales s ON c.id = s.customer_id WHERE s.amount > 2"
        ),
    )
    jobs.run(
        "insert_select",
        lambda: spark.sql(
            "INSERT INTO customer_sales SELECT name, city, salary, salary FROM customers"
        ),
    )
    jobs.run("collect top", lambda: people.orderBy("age").limit(2).collect())
    jobs.run("collect limit", lambda: people.limit(3).collect())
    jobs.write("sorted", people.orderBy("age").select("name", "age"))
    jobs.write("limited", people.limit(2).select("name"))
    jobs.write("sort_aggregate", people.groupBy("city").agg(F.max("name").alias("last_name")))
    jobs.write("distinct_count", people.groupBy("city").agg(F.countDistinct("age").alias("ages")))
    top_earner = Window.partitionBy("city").orderBy(F.col("salary").desc())
    jobs.write(
        "window_top",
        people.withColumn("r", F.rank().over(top_earner)).where("r = 1").select("city", "name"),
    )
    payroll = people.groupBy("city").agg(F.sum("salary").alias("payroll"))
    jobs.write(
        "reused_exchange",
        payroll.alias("a")
        .join(payroll.alias("b"), "city")
        .select("city", (F.col("a.payroll") + F.col("b.payroll")).alias("twice")),
        **{"spark.sql.autoBroadcastJoinThreshold": "-1"},
    )
    jobs.write(
        "pivot",
        people.groupBy("city").pivot("name", ["ada", "alan"]).agg(F.sum("salary").alias("pay")),
    )
    jobs.write(
        "pivot_strings",  # values of a type PivotFirst does not take: Spark writes `if`s
        people.groupBy("city").pivot("name", ["ada", "alan"]).agg(F.first("tags")),
    )
    jobs.run(
        "noop_v2",
        lambda: (
            people.select((F.col("age") * 2).alias("a2"))
            .write.format("noop")
            .mode("overwrite")
            .save()
        ),
    )


def wide(jobs: Jobs) -> None:
    """A table of WIDE_COLUMNS columns, copied column for column and hashed row by row."""
    spark = jobs.spark
    columns = [f"(id + {i}) AS c{i}" for i in range(WIDE_COLUMNS)]
    jobs.write("wide_source", spark.range(3).selectExpr(*columns))
    source = spark.read.parquet(jobs.path("wide_source"))
    jobs.write("wide_copy", source)
    row_hash = F.sha2(F.concat_ws(",", *[F.col(c) for c in source.columns]), 256)
    jobs.write("wide_hash", source.select("c0", row_hash.alias("row_hash")))
    # every column read from three: 1500 input fields, more than the facet keeps by default
    names = source.columns
    mixed = [
        F.coalesce(*(F.col(names[(i + k) % WIDE_COLUMNS]) for k in range(3))).alias(name)
        for i, name in enumerate(names)
    ]
    jobs.write("wide_mix", source.select(*mixed))


def jdbc(jobs: Jobs) -> None:
    """Reads through JDBCRelation and writes through the JDBC V2 catalog (Derby in memory):
    each V2 write runs its query as a nested execution (the V1 fallback)."""
    spark = jobs.spark
    people = spark.read.parquet(jobs.path("people"))
    source = f"parquet.`{jobs.path('people')}`"
    jobs.run(
        "jdbc seed",
        lambda: people.select("id", "name").write.jdbc(DERBY_URL, "APP.PEOPLE", mode="overwrite"),
    )
    jobs.write(
        "jdbc_read",
        spark.read.jdbc(DERBY_URL, "APP.PEOPLE").select(F.lower("NAME").alias("name")),
    )
    statements = {
        "v2 append": f"INSERT INTO derby.APP.PEOPLE SELECT id + 10, upper(name) FROM {source}",
        "v2 overwrite": f"INSERT OVERWRITE derby.APP.PEOPLE SELECT id, name FROM {source}",
        "v2 ctas": f"CREATE TABLE derby.APP.CITIES AS SELECT DISTINCT city FROM {source}",
    }
    for name, statement in statements.items():
        jobs.run(name, functools.partial(spark.sql, statement))


def run_steps(
    out: Path, spark: SparkSession, steps: tuple[Callable[[Jobs], None], ...], started: float
) -> None:
    """Run `steps` in turn on `spark`, stop it, write `out/manifest.json`."""
    jobs = Jobs(spark, out / "data")
    app_id = spark.sparkContext.applicationId
    for step in steps:
        step(jobs)
    spark.stop()
    manifest = {
        "app_id": app_id,
        "seconds": round(time.monotonic() - started, 2),
        "written": jobs.written,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def main(out: Path) -> None:
    started = time.monotonic()
    run_steps(out, session(out), (seed, queries, wide, jdbc), started)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
