"""The PySpark program of the side-by-side harness: every shape of a plan as its own
application, in one JVM, with the OpenLineage Spark listener registered and event logging on.

Usage: python jobs.py PLAN_JSON

The plan: `{"out", "jars": [...], "postgres": {url, user, password} | null, "shapes":
[{"name", "job", "conf", "hive"}]}`. Event logs go to `OUT/events` (Spark 4's defaults:
rolling, zstd), the listener of shape S writes `OUT/listener/S.jsonl`, data lands in
`OUT/data`, catalog tables in `OUT/warehouse/S`. `OUT/manifest.json` is rewritten after every
application: app id and name per shape, and what the job raised (the failure shapes raise
by design). It imports only PySpark and `tests/sparkjobs/local.py`.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import (
    adults_projected,
    cancelled_write,
    city_totals,
    event_log,
    local_builder,
    orders_frame,
    people_frame,
    sql_settings,
    started,
    write_atomic,
    write_inputs,
)

LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
NAMESPACE = "spark"
DERBY_URL = "jdbc:derby:memory:peer;create=true"
WIDE_COLUMNS = 500
TIMEOUT = 120.0


@dataclass
class Context:
    """What a job function sees: where data goes, and the PostgreSQL server if any."""

    out: Path
    shape: str
    postgres: dict[str, str] | None

    @property
    def data(self) -> Path:
        return self.out / "data"

    def path(self, name: str) -> str:
        return str(self.data / self.shape / name)

    def shared(self, name: str) -> str:
        return str(self.data / "inputs" / name)


def session(
    plan: dict[str, Any], shape: dict[str, Any], extra: dict[str, str] | None = None
) -> SparkSession:
    out = Path(plan["out"])
    name = shape["name"]
    settings = sql_settings("2", str(out / "warehouse" / name))
    settings["spark.default.parallelism"] = "2"
    listener = {
        "spark.jars": ",".join(plan["jars"]),
        "spark.extraListeners": LISTENER,
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(out / "listener" / f"{name}.jsonl"),
        "spark.openlineage.namespace": NAMESPACE,
    }
    log = event_log((out / "events").as_uri())
    builder = local_builder("local[2]", f"peer {name}", settings, log, listener)
    if shape.get("hive"):
        metastore = out / "metastore" / name
        builder = builder.enableHiveSupport().config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={metastore};create=true",
        )
    else:
        builder = builder.config("spark.sql.catalogImplementation", "in-memory")
    for key, value in {**shape.get("conf", {}), **(extra or {})}.items():
        builder = builder.config(key, value)
    return started(builder)


# -- inputs ----------------------------------------------------------------------------------


def inputs(spark: SparkSession, ctx: Context) -> None:
    """Hand-written files and the people / orders parquet files the shapes read. Written by
    the first application (without any lineage interest of its own: it is not compared)."""
    folder = ctx.data / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    write_inputs(folder)
    (folder / "nested.json").write_text(
        '{"id": 1, "info": {"tags": ["a", "b"], "score": 1.5}, "m": {"k": 2}}\n'
        '{"id": 2, "info": {"tags": [], "score": 2.5}, "m": {}}\n'
    )
    (folder / "words.txt").write_text("alpha beta\ngamma\n")
    people, orders = people_frame(spark), orders_frame(spark)
    people.write.mode("overwrite").parquet(ctx.shared("people"))
    people.where("age > 30").write.mode("overwrite").parquet(ctx.shared("people_b"))
    orders.write.mode("overwrite").parquet(ctx.shared("orders"))
    columns = [f"(id + {i}) AS c{i}" for i in range(WIDE_COLUMNS)]
    spark.range(3).selectExpr(*columns).write.mode("overwrite").parquet(ctx.shared("wide"))


# -- shapes ------------------------------------------------------------------------------------


def parquet(spark: SparkSession, ctx: Context) -> None:
    rows = spark.range(0, 100).selectExpr("id", "id % 5 AS bucket", "CAST(id AS STRING) AS label")
    rows.write.parquet(ctx.path("parquet_in"))
    source = spark.read.parquet(ctx.path("parquet_in"))
    source.where("bucket = 1").write.mode("overwrite").parquet(ctx.path("parquet_out"))


def csv(spark: SparkSession, ctx: Context) -> None:
    people = spark.read.option("header", "true").option("inferSchema", "true")
    frame = people.csv(ctx.shared("people.csv")).select("name", "age")
    frame.write.option("header", "true").csv(ctx.path("csv_out"))


def json_(spark: SparkSession, ctx: Context) -> None:
    events = spark.read.json(ctx.shared("events.json"))
    events.where("score > 1").select("id", "kind").write.json(ctx.path("json_out"))


def orc(spark: SparkSession, ctx: Context) -> None:
    people = spark.read.option("header", "true").option("inferSchema", "true")
    people.csv(ctx.shared("people.csv")).write.saveAsTable("people")
    spark.table("people").write.partitionBy("age").orc(ctx.path("people_orc"))


def text(spark: SparkSession, ctx: Context) -> None:
    spark.read.text(ctx.shared("words.txt")).write.csv(ctx.path("words_csv"))


def nested_json(spark: SparkSession, ctx: Context) -> None:
    nested = spark.read.json(ctx.shared("nested.json"))
    nested.select("id", "info").write.json(ctx.path("nested_out"))


def people(spark: SparkSession, ctx: Context) -> Any:
    return spark.read.parquet(ctx.shared("people"))


def orders(spark: SparkSession, ctx: Context) -> Any:
    return spark.read.parquet(ctx.shared("orders"))


def projection(spark: SparkSession, ctx: Context) -> None:
    adults_projected(people(spark, ctx)).write.parquet(ctx.path("projection"))


def aggregate(spark: SparkSession, ctx: Context) -> None:
    city_totals(people(spark, ctx)).write.parquet(ctx.path("aggregate"))


def join_broadcast(spark: SparkSession, ctx: Context) -> None:
    left, right = people(spark, ctx), orders(spark, ctx)
    joined = left.join(right, left.id == right.customer_id)
    joined.select("name", "order_id", "amount").write.parquet(ctx.path("join_broadcast"))


def join_sort_merge(spark: SparkSession, ctx: Context) -> None:
    left, right = people(spark, ctx), orders(spark, ctx)
    joined = left.join(right, left.id == right.customer_id)
    joined.select("name", "amount").write.parquet(ctx.path("join_sort_merge"))


def join_csv_json(spark: SparkSession, ctx: Context) -> None:
    customers = spark.read.option("header", "true").csv(ctx.shared("customers.csv"))
    placed = spark.read.json(ctx.shared("orders.json"))
    joined = placed.join(customers, "customer_id").select("order_id", "name", "amount")
    joined.write.parquet(ctx.path("join_out"))


def union(spark: SparkSession, ctx: Context) -> None:
    older = people(spark, ctx).select("id", "name")
    newer = spark.read.parquet(ctx.shared("people_b")).select(F.col("id") * 100, F.upper("name"))
    older.union(newer).write.parquet(ctx.path("union"))


def union_by_name(spark: SparkSession, ctx: Context) -> None:
    older = spark.read.option("header", "true").csv(ctx.shared("people.csv"))
    newer = spark.read.json(ctx.shared("people_new.json"))
    both = older.select("name", "city").unionByName(newer.select("name", "city"))
    both.write.json(ctx.path("union_out"))


def window(spark: SparkSession, ctx: Context) -> None:
    by_city = Window.partitionBy("city").orderBy(F.col("salary").desc())
    people(spark, ctx).select(
        "name",
        F.row_number().over(by_city).alias("rank_in_city"),
        F.sum("salary").over(Window.partitionBy("city")).alias("city_payroll"),
        F.lag("age").over(by_city).alias("previous_age"),
    ).write.parquet(ctx.path("window"))


def explode(spark: SparkSession, ctx: Context) -> None:
    frame = people(spark, ctx)
    frame.select("id", F.explode("tags").alias("tag")).write.parquet(ctx.path("explode"))
    frame.select("name", F.posexplode_outer("tags")).write.parquet(ctx.path("posexplode"))


def rollup(spark: SparkSession, ctx: Context) -> None:
    frame = people(spark, ctx).rollup("city", "age").agg(F.sum("salary").alias("payroll"))
    frame.write.parquet(ctx.path("rollup"))


def scalar_subquery(spark: SparkSession, ctx: Context) -> None:
    spark.sql(
        f"SELECT name, salary - (SELECT avg(amount) FROM parquet.`{ctx.shared('orders')}`)"
        f" AS above FROM parquet.`{ctx.shared('people')}`"
        f" WHERE age > (SELECT min(age) FROM parquet.`{ctx.shared('people_b')}`)"
    ).write.parquet(ctx.path("scalar_subquery"))


def cached(spark: SparkSession, ctx: Context) -> None:
    frame = people(spark, ctx).select("id", "name", "salary").cache()
    frame.count()
    frame.select("name", (F.col("salary") * 2).alias("double_salary")).write.parquet(
        ctx.path("cached")
    )


def temp_view(spark: SparkSession, ctx: Context) -> None:
    people(spark, ctx).createOrReplaceTempView("people_view")
    adults = spark.sql("SELECT name, age * 12 AS months FROM people_view WHERE age >= 18")
    adults.write.parquet(ctx.path("temp_view"))


def tables(spark: SparkSession, ctx: Context) -> None:
    spark.sql("CREATE TABLE sales USING parquet AS SELECT id, id * 10 AS amount FROM range(5)")
    spark.sql("INSERT INTO sales SELECT id + 100, id FROM range(3)")
    spark.table("sales").where("amount > 10").write.saveAsTable("big_sales")


def ctas_join(spark: SparkSession, ctx: Context) -> None:
    people(spark, ctx).drop("tags").write.saveAsTable("customers")
    orders(spark, ctx).write.saveAsTable("sales")
    spark.sql(
        "CREATE TABLE customer_sales USING parquet AS "
        "SELECT c.name, c.city, s.amount, s.amount * 1.2 AS gross "
        "FROM customers c JOIN sales s ON c.id = s.customer_id WHERE s.amount > 2"
    )
    spark.sql("INSERT INTO customer_sales SELECT name, city, salary, salary FROM customers")


def hive(spark: SparkSession, ctx: Context) -> None:
    spark.sql(
        "CREATE TABLE events STORED AS TEXTFILE AS SELECT id, CAST(id AS STRING) AS s FROM range(3)"
    )
    spark.sql("INSERT INTO events SELECT id + 10, 'x' FROM range(2)")
    spark.table("events").write.parquet(ctx.path("events_pq"))


def jdbc_props(postgres: dict[str, str]) -> dict[str, str]:
    return {"user": postgres["user"], "password": postgres["password"]} | {
        "driver": "org.postgresql.Driver"
    }


def jdbc_postgres(spark: SparkSession, ctx: Context) -> None:
    assert ctx.postgres is not None
    url, props = ctx.postgres["url"], jdbc_props(ctx.postgres)
    placed = spark.range(0, 20).selectExpr("id AS order_id", "id * 3 AS amount")
    placed.write.jdbc(url, "public.orders", mode="overwrite", properties=props)
    back = spark.read.jdbc(url, "public.orders", properties=props)
    back.where("amount > 30").write.parquet(ctx.path("jdbc_out"))


def jdbc_redacted(spark: SparkSession, ctx: Context) -> None:
    assert ctx.postgres is not None
    url, props = ctx.postgres["url"], jdbc_props(ctx.postgres)
    spark.range(0, 3).write.jdbc(url, "public.hidden", mode="overwrite", properties=props)


def jdbc_derby(spark: SparkSession, ctx: Context) -> None:
    frame = people(spark, ctx).select("id", "name")
    frame.write.jdbc(DERBY_URL, "APP.PEOPLE", mode="overwrite")
    back = spark.read.jdbc(DERBY_URL, "APP.PEOPLE").select(F.lower("NAME").alias("name"))
    back.write.parquet(ctx.path("jdbc_read"))
    source = f"parquet.`{ctx.shared('people')}`"
    spark.sql(f"INSERT INTO derby.APP.PEOPLE SELECT id + 10, upper(name) FROM {source}")


def divide_by_zero(spark: SparkSession, ctx: Context) -> None:
    ratios = people(spark, ctx).selectExpr("id", "10 / (age - age) AS ratio")
    ratios.write.parquet(ctx.path("ratios"))


def udf_failure(spark: SparkSession, ctx: Context) -> None:
    @udf("long")
    def boom(value: int) -> int:
        raise ValueError(f"bad value {value}")

    people(spark, ctx).select(boom("id").alias("id")).write.parquet(ctx.path("boom"))


def cancelled(spark: SparkSession, ctx: Context) -> None:
    control = ctx.data / ctx.shape
    control.mkdir(parents=True, exist_ok=True)
    target = ctx.path("cancelled_out")
    cancelled_write(spark, control, "peer-group", target, TIMEOUT, TIMEOUT, must_run=False)


def rdd(spark: SparkSession, ctx: Context) -> None:
    sc = spark.sparkContext
    sc.textFile(ctx.shared("words.txt")).count()
    # the agent's hint for the path an RDD save writes, which the event log never names
    sc.setLocalProperty("spark.lineageAgent.output", ctx.path("rdd_out"))
    sc.parallelize(["x", "y"], 1).saveAsTextFile(ctx.path("rdd_out"))
    sc.setLocalProperty("spark.lineageAgent.output", None)  # type: ignore[arg-type]  # unsets


def wide(spark: SparkSession, ctx: Context) -> None:
    source = spark.read.parquet(ctx.shared("wide"))
    source.write.parquet(ctx.path("wide_copy"))
    row_hash = F.sha2(F.concat_ws(",", *[F.col(c) for c in source.columns]), 256)
    source.select("c0", row_hash.alias("row_hash")).write.parquet(ctx.path("wide_hash"))
    names = source.columns
    mixed = [
        F.coalesce(*(F.col(names[(i + k) % WIDE_COLUMNS]) for k in range(3))).alias(name)
        for i, name in enumerate(names)
    ]
    source.select(*mixed).write.parquet(ctx.path("wide_mix"))


def pivot(spark: SparkSession, ctx: Context) -> None:
    names = ["ada", "alan", "grace"]
    people(spark, ctx).groupBy("city").pivot("name", names).agg(
        F.sum("salary").alias("pay"), F.max("age").alias("oldest")
    ).write.parquet(ctx.path("pivot"))


def hive_dynamic_partition(spark: SparkSession, ctx: Context) -> None:
    spark.sql("SET hive.exec.dynamic.partition.mode=nonstrict")
    spark.sql(
        "CREATE TABLE visits (name STRING, age INT) PARTITIONED BY (city STRING) STORED AS PARQUET"
    )
    people(spark, ctx).createOrReplaceTempView("people_src")
    spark.sql(
        "INSERT INTO visits PARTITION (city) SELECT upper(name), age, city FROM people_src"
        " WHERE age > 18"
    )
    spark.sql("CREATE TABLE visits_far (name STRING, age INT) PARTITIONED BY (city STRING)")
    # no partition of visits matches: the scan lists no file, yet it reads visits
    spark.sql(
        "INSERT INTO visits_far PARTITION (city) SELECT name, age, city FROM visits"
        " WHERE city = 'atlantis'"
    )


JOBS: dict[str, Callable[[SparkSession, Context], None]] = {
    "parquet": parquet,
    "csv": csv,
    "json": json_,
    "orc": orc,
    "text": text,
    "nested_json": nested_json,
    "projection": projection,
    "aggregate": aggregate,
    "join_broadcast": join_broadcast,
    "join_sort_merge": join_sort_merge,
    "join_csv_json": join_csv_json,
    "union": union,
    "union_by_name": union_by_name,
    "window": window,
    "explode": explode,
    "rollup": rollup,
    "scalar_subquery": scalar_subquery,
    "cached": cached,
    "temp_view": temp_view,
    "tables": tables,
    "ctas_join": ctas_join,
    "hive": hive,
    "jdbc_postgres": jdbc_postgres,
    "jdbc_redacted": jdbc_redacted,
    "jdbc_derby": jdbc_derby,
    "divide_by_zero": divide_by_zero,
    "udf_failure": udf_failure,
    "cancelled": cancelled,
    "rdd": rdd,
    "wide": wide,
    "pivot": pivot,
    "hive_dynamic_partition": hive_dynamic_partition,
}


def _with_context(
    job: Callable[[SparkSession, Context], None], ctx: Context, spark: SparkSession
) -> None:
    job(spark, ctx)


def lake_job(name: str, out: Path) -> tuple[Callable[[SparkSession], None], dict[str, str]]:
    """A shape of the lakehouse log generator (`lake:<name>`): its job and Spark conf. Each
    gets a root of its own, laid out as the generator's jobs expect."""
    from tests.data import make_lakehouse_logs as lake

    root = out / "lake" / name
    (root / "data").mkdir(parents=True, exist_ok=True)
    conf = dict(lake.DELTA) if "delta" in name else {}
    if name.startswith("iceberg"):
        conf = lake.iceberg_conf(root)
    job = lake.SHAPES[name][0]
    return (lambda spark: job(spark, root)), conf


def main(plan: dict[str, Any]) -> None:
    out = Path(plan["out"])
    (out / "events").mkdir(parents=True, exist_ok=True)
    (out / "listener").mkdir(parents=True, exist_ok=True)
    if plan.get("inputs", True):
        seed = SparkSession.builder.master("local[1]").appName("peer inputs")
        seed = seed.config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
        seed = seed.config("spark.driver.bindAddress", "127.0.0.1")
        seed = seed.config("spark.jars", ",".join(plan["jars"]))  # the JVM's class path
        spark = seed.getOrCreate()
        inputs(spark, Context(out, "inputs", None))
        spark.stop()
    manifest = out / "manifest.json"  # shared with the other environment's process
    apps: dict[str, dict[str, Any]] = (
        json.loads(manifest.read_text())["apps"] if manifest.exists() else {}
    )
    for shape in plan["shapes"]:
        began = time.monotonic()
        job: Callable[[SparkSession], None]
        extra: dict[str, str] = {}
        if shape["job"].startswith("lake:"):
            job, extra = lake_job(shape["job"].removeprefix("lake:"), out)
        else:
            job = functools.partial(
                _with_context, JOBS[shape["job"]], Context(out, shape["name"], plan.get("postgres"))
            )
        spark = session(plan, shape, extra)
        record: dict[str, Any] = {
            "app_id": spark.sparkContext.applicationId,
            "app_name": f"peer {shape['name']}",
        }
        apps[shape["name"]] = record
        try:
            job(spark)
        except Exception as error:  # the failure shapes raise by design; recorded
            record["error"] = f"{type(error).__name__}: {str(error)[:500]}"
        spark.stop()
        record["seconds"] = round(time.monotonic() - began, 2)
        write_atomic(manifest, json.dumps({"apps": apps}, indent=2) + "\n")


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
