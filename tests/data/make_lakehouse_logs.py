"""Regenerate the lakehouse event logs in `eventlogs/lakehouse/` beside this script.

    python3 tests/data/make_lakehouse_logs.py [SHAPE...] [--keep DIR]

Real PySpark 4.1.1 (Java 17, local[2], UI off) with Delta Lake 4.3.1, Iceberg 1.12.0, the
Kafka connector and spark-avro: the newest Spark they all run on, in the environment
`scripts/pyenv.py lakehouse` creates (this script re-executes itself there) with the jars of
`scripts/jars.py` passed through `spark.jars`. Kafka shapes get a throwaway KRaft broker on
127.0.0.1 (tests/kafka.py). Every shape is one application in its own process and JVM.

Per shape `<shape>.jsonl.zst` is the event log (written uncompressed, one file, then scrubbed
and zstd-compressed): every path under the job's temporary directory becomes `/data/lakehouse/...`,
the broker's address `127.0.0.1:9092`, the host name `driver-host`, and the environment event
keeps only a few Spark properties. `<shape>.tables.json` is what the tables' own metadata on
disk said after the job (Delta `_delta_log` commits, Iceberg snapshots): what the event log
does not tell. `--keep DIR` also copies each job's whole directory there, for inspection.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.data import logscrub
from tests.data.logscrub import trimmed

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "eventlogs" / "lakehouse"
PLACEHOLDER = "/data/lakehouse"
BROKER_PLACEHOLDER = "127.0.0.1:9092"
HOST_PLACEHOLDER = "driver-host"
ENV = "lakehouse"
BUNDLES = ("delta", "iceberg", "spark-kafka", "spark-avro", "sqlite-jdbc")
KEPT_PROPERTIES = {
    *logscrub.KEPT_PROPERTIES,
    "spark.sql.extensions",
    "spark.sql.catalog.spark_catalog",
    "spark.sql.catalog.lake",
    "spark.sql.catalog.lake.type",
    "spark.sql.catalog.lake.warehouse",
    "spark.sql.catalog.jcat",
    "spark.sql.catalog.jcat.catalog-impl",
    "spark.sql.catalog.jcat.warehouse",
}
CHILD_TIMEOUT = 420.0  # one application, JVM start included, on a shared two-core machine
SIGTERM_AFTER_PROGRESS = 3  # progress events of the endless query before SIGTERM
STOP_TIMEOUT = 60.0
METER_READINGS = [  # two windows of stream_kafka_window; the last reading moves the watermark
    json.dumps({"meter": f"m-{n % 2}", "kwh": 0.5 * n, "read_at": f"2026-03-01T08:{m:02d}:00"})
    for n, m in enumerate((1, 4, 8, 12, 16, 40))
]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


# ---------------------------------------------------------------- the jobs (child process)


def session(
    root: Path, name: str, jars: str, conf: dict[str, str], events: Path | None = None
) -> SparkSession:
    """Event log in `events` (`root/events` by default), catalog tables in `root/warehouse`."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(events or root / "events"))
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.eventLog.compress", "false")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.jars", jars)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


DELTA = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.snapshotPartitions": "2",  # the log replay's tasks (default 50)
}


def iceberg_conf(root: Path) -> dict[str, str]:
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": str(root / "iceberg_hadoop"),
        "spark.sql.catalog.jcat": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.jcat.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "spark.sql.catalog.jcat.uri": f"jdbc:sqlite:{root / 'catalog.db'}",
        "spark.sql.catalog.jcat.jdbc.schema-version": "V1",
        "spark.sql.catalog.jcat.warehouse": str(root / "iceberg_jdbc"),
    }


def describe(spark: SparkSession, text: str) -> None:
    spark.sparkContext.setJobDescription(text)


def expect_failure(action: Callable[[], object]) -> None:
    """Run `action`, which must raise (the shape is about its failure)."""
    try:
        action()
    except Exception as error:
        print("expected:", type(error).__name__, str(error)[:200], file=sys.stderr)
    else:
        raise AssertionError("the action was meant to fail")


def failing_sql(spark: SparkSession) -> None:
    """A table, an INSERT into it whose tasks fail on a cast (under ANSI mode), then a SELECT
    of a column that does not exist (an analysis error)."""
    describe(spark, "failure: create table")
    spark.sql("CREATE TABLE nums (n INT) USING parquet")
    describe(spark, "failure: sql insert whose tasks fail")
    expect_failure(
        lambda: spark.sql("INSERT INTO nums SELECT CAST(concat('n', id) AS INT) FROM range(3)")
    )
    describe(spark, "failure: unresolved column")
    expect_failure(lambda: spark.sql("SELECT no_such_col FROM range(3)").collect())


def delta_path(spark: SparkSession, root: Path) -> None:
    """A Delta table addressed by path: write API, DeltaTable API and SQL on delta.`path`."""
    path = str(root / "data" / "delta_events")
    rows = ("id", "concat('n', id) AS name", "id * 10 AS amount")
    describe(spark, "delta path: create")
    spark.range(0, 5).selectExpr(*rows).write.format("delta").save(path)
    describe(spark, "delta path: append")
    spark.range(5, 8).selectExpr(*rows).write.format("delta").mode("append").save(path)
    describe(spark, "delta path: overwrite")
    spark.range(0, 6).selectExpr(*rows).write.format("delta").mode("overwrite").save(path)
    describe(spark, "delta path: merge, python api")
    delta_table: Any = importlib.import_module("delta.tables").DeltaTable
    updates = spark.range(4, 9).selectExpr("id", "concat('u', id) AS name", "id * 100 AS amount")
    (
        delta_table.forPath(spark, path)
        .alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"name": "s.name", "amount": "s.amount"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    describe(spark, "delta path: merge, sql")
    spark.sql(
        f"""MERGE INTO delta.`{path}` AS t
        USING (SELECT id, concat('m', id) AS name, id * 7 AS amount FROM range(0, 12)) AS s
        ON t.id = s.id
        WHEN MATCHED AND s.id = 0 THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.amount = s.amount
        WHEN NOT MATCHED AND s.id > 10 THEN INSERT (id, name, amount) VALUES (s.id, s.name, 0)
        WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.name = 'orphan'"""
    )
    describe(spark, "delta path: update")
    spark.sql(f"UPDATE delta.`{path}` SET amount = amount + 1 WHERE id < 3")
    describe(spark, "delta path: delete")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1")
    describe(spark, "delta path: time travel read")
    old = spark.read.format("delta").option("versionAsOf", 1).load(path)
    old.write.mode("overwrite").parquet(str(root / "data" / "events_v1"))


def delta_catalog(spark: SparkSession, root: Path) -> None:
    """Delta catalog tables (session catalog = DeltaCatalog): managed and external."""
    describe(spark, "delta table: create")
    spark.sql("CREATE TABLE sales (id BIGINT, region STRING, amount DOUBLE) USING delta")
    describe(spark, "delta table: insert values")
    spark.sql("INSERT INTO sales VALUES (1, 'eu', 10.0), (2, 'us', 20.0), (3, 'eu', 30.0)")
    describe(spark, "delta table: saveAsTable append")
    more = spark.createDataFrame(
        [(4, "apac", 40.0), (5, "us", 50.0)], "id long, region string, amount double"
    )
    more.write.format("delta").mode("append").saveAsTable("sales")
    describe(spark, "delta table: saveAsTable new")
    spark.table("sales").where("region = 'eu'").write.format("delta").saveAsTable("sales_eu")
    describe(spark, "delta table: ctas")
    spark.sql(
        "CREATE TABLE sales_by_region USING delta AS "
        "SELECT region, sum(amount) AS total FROM sales GROUP BY region"
    )
    describe(spark, "delta table: insert overwrite")
    spark.sql("INSERT OVERWRITE sales_eu SELECT * FROM sales WHERE region <> 'us'")
    describe(spark, "delta table: merge")
    spark.sql(
        """MERGE INTO sales AS t
        USING (SELECT * FROM VALUES (2, 'us', 25.0), (6, 'eu', 60.0) AS v(id, region, amount)) AS s
        ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *"""
    )
    describe(spark, "delta table: update")
    spark.sql("UPDATE sales SET amount = amount * 2 WHERE region = 'eu'")
    describe(spark, "delta table: delete")
    spark.sql("DELETE FROM sales WHERE amount > 100")
    describe(spark, "delta table: external create")
    location = root / "data" / "external_sales"
    spark.sql(f"CREATE TABLE sales_ext USING delta LOCATION '{location}' AS SELECT * FROM sales")
    describe(spark, "delta table: time travel ctas")
    spark.sql("CREATE TABLE sales_v1 USING delta AS SELECT * FROM sales VERSION AS OF 1")
    describe(spark, "delta table: time travel read")
    spark.sql("SELECT count(*) FROM sales VERSION AS OF 2").collect()


def _iceberg_ops(spark: SparkSession, catalog: str, root: Path) -> None:
    table = f"{catalog}.db.orders"
    describe(spark, f"iceberg {catalog}: create")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.db")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, status STRING, amount DOUBLE) USING iceberg")
    describe(spark, f"iceberg {catalog}: insert values")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'new', 10.0), (2, 'new', 20.0), (3, 'paid', 30.0)")
    describe(spark, f"iceberg {catalog}: writeTo append")
    more = spark.createDataFrame([(4, "new", 40.0)], "id long, status string, amount double")
    more.writeTo(table).append()
    describe(spark, f"iceberg {catalog}: merge")
    spark.sql(
        f"""MERGE INTO {table} AS t
        USING (SELECT * FROM VALUES (1, 'paid', 11.0), (3, 'void', 0.0), (5, 'new', 50.0)
               AS v(id, status, amount)) AS s
        ON t.id = s.id
        WHEN MATCHED AND s.status = 'void' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.status = s.status, t.amount = s.amount
        WHEN NOT MATCHED THEN INSERT *"""
    )
    describe(spark, f"iceberg {catalog}: update")
    spark.sql(f"UPDATE {table} SET amount = amount + 1 WHERE status = 'new'")
    describe(spark, f"iceberg {catalog}: delete")
    spark.sql(f"DELETE FROM {table} WHERE id = 2")
    describe(spark, f"iceberg {catalog}: ctas")
    spark.sql(
        f"CREATE TABLE {catalog}.db.order_totals USING iceberg AS "
        f"SELECT status, sum(amount) AS total FROM {table} GROUP BY status"
    )
    describe(spark, f"iceberg {catalog}: insert overwrite")
    spark.sql(f"INSERT OVERWRITE {catalog}.db.order_totals SELECT status, 0.0 FROM {table}")


def iceberg_hadoop(spark: SparkSession, root: Path) -> None:
    """Iceberg on a Hadoop catalog (metadata files only, no metastore)."""
    _iceberg_ops(spark, "lake", root)
    describe(spark, "iceberg lake: saveAsTable")
    spark.range(3).selectExpr("id", "'x' AS tag").write.format("iceberg").saveAsTable(
        "lake.db.tags"
    )
    describe(spark, "iceberg lake: writeTo create")
    spark.table("lake.db.orders").writeTo("lake.db.orders_copy").using("iceberg").create()
    describe(spark, "iceberg lake: snapshots metadata table")
    snapshots = spark.sql(
        "SELECT snapshot_id FROM lake.db.orders.snapshots ORDER BY committed_at"
    ).collect()
    first = snapshots[1]["snapshot_id"]
    describe(spark, "iceberg lake: time travel read")
    old = spark.sql(f"SELECT * FROM lake.db.orders VERSION AS OF {first}")
    old.write.mode("overwrite").parquet(str(root / "data" / "orders_at_snapshot"))
    describe(spark, "iceberg lake: read to parquet")
    spark.table("lake.db.orders").write.mode("overwrite").parquet(str(root / "data" / "orders_pq"))


def iceberg_jdbc(spark: SparkSession, root: Path) -> None:
    """Iceberg on a JDBC catalog (SQLite): the catalog names a metadata file, not a path."""
    _iceberg_ops(spark, "jcat", root)
    describe(spark, "iceberg jcat: read to parquet")
    spark.table("jcat.db.orders").write.mode("overwrite").parquet(str(root / "data" / "orders_pq"))


def kafka_batch(spark: SparkSession, root: Path) -> None:
    """Batch writes to Kafka (fixed topic, topic column, avro value) and batch reads."""
    from pyspark.sql.avro.functions import from_avro, to_avro
    from pyspark.sql.functions import col, struct

    servers = os.environ["LAKEHOUSE_KAFKA"]
    data = root / "data"
    describe(spark, "kafka: write to topic option")
    spark.range(6).selectExpr(
        "CAST(id AS STRING) AS key", "to_json(named_struct('id', id, 'kind', 'click')) AS value"
    ).write.format("kafka").option("kafka.bootstrap.servers", servers).option(
        "topic", "clicks"
    ).save()
    describe(spark, "kafka: write with topic column")
    spark.range(4).selectExpr(
        "CASE WHEN id % 2 = 0 THEN 'events-a' ELSE 'events-b' END AS topic",
        "CAST(id AS STRING) AS value",
    ).write.format("kafka").option("kafka.bootstrap.servers", servers).save()
    describe(spark, "kafka: write avro")
    orders = spark.range(3).selectExpr("id", "id * 1.5 AS amount")
    orders.select(to_avro(struct("id", "amount")).alias("value")).write.format("kafka").option(
        "kafka.bootstrap.servers", servers
    ).option("topic", "orders-avro").save()

    def source(**options: str) -> DataFrame:
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
        for key, value in {"startingOffsets": "earliest", **options}.items():
            reader = reader.option(key, value)
        return reader.load()

    describe(spark, "kafka: read subscribe list")
    source(subscribe="clicks,events-a").selectExpr(
        "topic", "CAST(value AS STRING) AS v"
    ).write.mode("overwrite").parquet(str(data / "from_subscribe"))
    describe(spark, "kafka: read subscribePattern")
    source(subscribePattern="events-.*").selectExpr(
        "topic", "CAST(value AS STRING) AS v"
    ).write.mode("overwrite").json(str(data / "from_pattern"))
    describe(spark, "kafka: read assign")
    source(assign='{"clicks":[0]}').selectExpr("offset").write.mode("overwrite").json(
        str(data / "from_assign")
    )
    describe(spark, "kafka: read avro")
    schema = json.dumps(
        {
            "type": "record",
            "name": "topLevelRecord",
            "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
        }
    )
    source(subscribe="orders-avro").select(from_avro(col("value"), schema).alias("o")).select(
        "o.*"
    ).write.mode("overwrite").parquet(str(data / "orders_from_avro"))


def stream_file_parquet(spark: SparkSession, root: Path) -> None:
    """File source -> parquet sink, trigger availableNow, one file per micro-batch."""
    source = root / "data" / "incoming"
    source.mkdir(parents=True)
    for n in range(2):
        lines = [
            json.dumps({"id": n * 10 + i, "kind": "view" if i % 2 else "click"}) for i in range(3)
        ]
        (source / f"part-{n}.json").write_text("\n".join(lines) + "\n")
        os.utime(source / f"part-{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))  # the order
    query = available_now(
        spark.readStream.schema("id LONG, kind STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .where("kind = 'click'")
        .writeStream.format("parquet")
        .option("path", str(root / "data" / "clicks_parquet")),
        root,
        "file_to_parquet",
    )
    query.awaitTermination(300)


def stream_kafka_delta(spark: SparkSession, root: Path) -> None:
    """Kafka source -> foreachBatch that MERGEs each micro-batch into a Delta table."""
    servers = os.environ["LAKEHOUSE_KAFKA"]
    target = str(root / "data" / "orders_delta")
    describe(spark, "create the delta target")
    spark.sql(
        f"CREATE TABLE delta.`{target}` (id STRING, body STRING, kafka_offset LONG) USING delta"
    )
    spark.sparkContext._jsc.setLocalProperty("spark.job.description", None)
    delta_table: Any = importlib.import_module("delta.tables").DeltaTable

    def upsert(batch: DataFrame, batch_id: int) -> None:
        (
            delta_table.forPath(batch.sparkSession, target)
            .alias("t")
            .merge(batch.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    orders_to_delta(spark, servers, "orders", upsert, root)


def orders_to_delta(
    spark: SparkSession,
    servers: str,
    topic: str,
    upsert: Callable[[DataFrame, int], None],
    root: Path,
) -> None:
    """Kafka `topic` from its start, three records a micro-batch (id, body, kafka_offset), each
    handed to `upsert` by the query `orders_to_delta` (checkpoint under `root/checkpoints`),
    until it has caught up."""
    orders = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 3)
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS id", "CAST(value AS STRING) AS body", "offset AS kafka_offset"
        )
    )
    until_caught_up(orders.writeStream.foreachBatch(upsert), root, "orders_to_delta")


def available_now(writer: DataStreamWriter, root: Path, name: str) -> StreamingQuery:
    """`writer` started as the availableNow query `name`, checkpoint in `root/checkpoints`."""
    return (
        writer.option("checkpointLocation", str(root / "checkpoints" / name))
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )


def to_iceberg(rows: DataFrame, root: Path, name: str, table: str) -> StreamingQuery:
    """`rows` appended to the Iceberg `table` (`toTable`) by the availableNow query `name`,
    started, checkpoint in `root/checkpoints`."""
    return (
        rows.writeStream.format("iceberg")
        .outputMode("append")
        .option("checkpointLocation", str(root / "checkpoints" / name))
        .queryName(name)
        .trigger(availableNow=True)
        .toTable(table)
    )


def until_caught_up(writer: DataStreamWriter, root: Path, name: str) -> None:
    """`available_now(writer, root, name)`, waited for (300 s at most)."""
    available_now(writer, root, name).awaitTermination(300)


def ticks_forever(spark: SparkSession, root: Path) -> StreamingQuery:
    """An endless rate -> parquet query (`root/data/ticks`), started."""
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.format("parquet")
        .option("path", str(root / "data" / "ticks"))
        .option("checkpointLocation", str(root / "checkpoints" / "ticks"))
        .queryName("ticks_forever")
        .trigger(processingTime="1 second")
        .start()
    )


def stream_sigterm(spark: SparkSession, root: Path) -> None:
    """An endless rate -> parquet query; the generator sends SIGTERM to the driver JVM."""
    query = ticks_forever(spark, root)
    query.awaitTermination(int(CHILD_TIMEOUT))


def stream_failure(spark: SparkSession, root: Path) -> None:
    """A file -> parquet query whose second micro-batch fails (ANSI cast of a bad value)."""
    source = root / "data" / "incoming"
    source.mkdir(parents=True)
    (source / "part-0.json").write_text('{"id": 1, "qty": "3"}\n{"id": 2, "qty": "4"}\n')
    (source / "part-1.json").write_text('{"id": 3, "qty": "three"}\n')
    for n in range(2):  # the file source takes files oldest first: the bad one second
        os.utime(source / f"part-{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    bad_cast(spark, source, root / "data" / "quantities", root / "checkpoints" / "quantities")


def bad_cast(spark: SparkSession, source: Path, sink: Path, checkpoint: Path) -> None:
    """The availableNow file -> parquet query `bad_cast`: `qty` cast to INT under ANSI, so a
    file with a word there fails its micro-batch; the failure is printed, not raised."""
    query = (
        spark.readStream.schema("id LONG, qty STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr("id", "CAST(qty AS INT) AS qty")
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .queryName("bad_cast")
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(300)
    except Exception as exc:  # the query's failure, as the driver program sees it
        print(f"query failed as intended: {type(exc).__name__}", file=sys.stderr)


def stream_iceberg(spark: SparkSession, root: Path) -> None:
    """File source -> an Iceberg table of the Hadoop catalog (`toTable`), then that table as
    a streaming source -> parquet; availableNow, one file per micro-batch."""
    source = root / "data" / "incoming"
    source.mkdir(parents=True)
    for n in range(2):
        (source / f"part-{n}.json").write_text(f'{{"id": {n}, "kind": "click"}}\n')
        os.utime(source / f"part-{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    spark.sql("CREATE TABLE lake.db.clicks (id BIGINT, kind STRING) USING iceberg")
    to_iceberg(
        spark.readStream.schema("id LONG, kind STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(source)),
        root,
        "file_to_iceberg",
        "lake.db.clicks",
    ).awaitTermination(300)
    until_caught_up(
        spark.readStream.format("iceberg")
        .load("lake.db.clicks")
        .writeStream.format("parquet")
        .option("path", str(root / "data" / "clicks_from_iceberg")),
        root,
        "iceberg_to_parquet",
    )


def kafka_sink_columns(spark: SparkSession, root: Path) -> None:
    """Batch writes into Kafka from files: a JSON `value` built with to_json(struct(...)) and a
    key, to a topic option; then a write whose topic is computed per row from a column."""
    from pyspark.sql import functions as F

    servers = os.environ["LAKEHOUSE_KAFKA"]
    data = root / "data"
    (data / "meters.json").write_text(
        "".join(
            json.dumps({"meter": f"m-{n}", "site": "north" if n % 2 else "south", "kwh": n * 0.75})
            + "\n"
            for n in range(5)
        )
    )
    (data / "alarms.csv").write_text(
        "device,level,note\npump-1,high,overheat\nfan-2,low,dust\nvalve-3,high,stuck\n"
    )
    describe(spark, "kafka sink: json value from a file")
    meters = spark.read.json(str(data / "meters.json")).where("kwh > 0")
    meters.select(
        F.col("meter").alias("key"),
        F.to_json(F.struct("site", F.round(F.col("kwh") * 1000).alias("wh"))).alias("value"),
    ).write.format("kafka").option("kafka.bootstrap.servers", servers).option(
        "topic", "meter-json"
    ).save()
    describe(spark, "kafka sink: topic from a column")
    alarms = spark.read.option("header", "true").csv(str(data / "alarms.csv"))
    alarms.select(
        F.concat(F.lit("alarms-"), F.col("level")).alias("topic"),
        F.col("device").alias("key"),
        F.upper("note").alias("value"),
    ).write.format("kafka").option("kafka.bootstrap.servers", servers).save()


def stream_kafka_window(spark: SparkSession, root: Path) -> None:
    """Kafka source -> from_json -> watermark -> 10-minute tumbling window sum per meter ->
    a JSON file sink in append mode, availableNow."""
    from pyspark.sql import functions as F

    servers = os.environ["LAKEHOUSE_KAFKA"]
    reading = "meter STRING, kwh DOUBLE, read_at TIMESTAMP"
    until_caught_up(
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", "meter-readings")
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), reading).alias("r"))
        .select("r.*")
        .withWatermark("read_at", "5 minutes")
        .groupBy(F.window("read_at", "10 minutes"), "meter")
        .agg(F.sum("kwh").alias("total_kwh"), F.count("*").alias("readings"))
        .select(F.col("window.start").alias("window_start"), "meter", "total_kwh", "readings")
        .writeStream.format("json")
        .outputMode("append")
        .option("path", str(root / "data" / "meter_windows")),
        root,
        "meter_windows",
    )


def stream_join_delta(spark: SparkSession, root: Path) -> None:
    """A JSON file stream joined with a static parquet dimension into a Delta path table, then
    a plain file stream into parquet; two files per micro-batch, named long enough that the
    plans cut their file lists (`[file:/…/a.json, ... 1 entries]`)."""
    from pyspark.sql import functions as F

    data = root / "data"
    shops = spark.createDataFrame(
        [(1, "harbour", "west"), (2, "market", "east")], "shop_id INT, shop STRING, zone STRING"
    )
    describe(spark, "the shops dimension")
    shops.write.parquet(str(data / "shops"))
    spark.sparkContext._jsc.setLocalProperty("spark.job.description", None)
    incoming = data / "sales_in"  # the file names below pass the 100 characters Spark prints
    incoming.mkdir(parents=True)
    for n in range(4):
        rows = [
            {"sale": n * 10 + i, "shop_id": 1 + i % 2, "euros": 2.5 * (i + 1)} for i in range(3)
        ]
        name = f"register-export-{n}-{'x' * 64}.json"
        (incoming / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(incoming / name, (1_700_000_000 + n, 1_700_000_000 + n))
    sales = (
        spark.readStream.schema("sale LONG, shop_id INT, euros DOUBLE")
        .option("maxFilesPerTrigger", 2)
        .json(str(incoming))
    )
    dimension = spark.read.parquet(str(data / "shops"))
    until_caught_up(
        sales.join(dimension, "shop_id")
        .select("sale", "shop", "zone", (F.col("euros") * 100).cast("long").alias("cents"))
        .writeStream.format("delta")
        .option("path", str(data / "sales_by_shop")),
        root,
        "sales_by_shop",
    )
    until_caught_up(
        spark.readStream.schema("sale LONG, shop_id INT, euros DOUBLE")
        .option("maxFilesPerTrigger", 2)
        .json(str(incoming))
        .select("sale", "euros")
        .writeStream.format("parquet")
        .option("path", str(data / "sales_copy")),
        root,
        "sales_copy",
    )


def failing_stream(spark: SparkSession, root: Path) -> DataFrame:
    """A CSV file stream of `root/data/landing` whose first micro-batch fails (FAILFAST on
    the malformed row of the one file this writes there, the first time)."""
    landing = root / "data" / "landing"
    if not landing.exists():
        landing.mkdir(parents=True)
        (landing / "batch-0.csv").write_text("id,litres\n1,4.5\n2,not-a-number\n")
    return (
        spark.readStream.schema("id INT, litres DOUBLE")
        .option("header", "true")
        .option("mode", "FAILFAST")
        .csv(str(landing))
    )


def caught(query: StreamingQuery) -> None:
    """Wait for a query that fails, as a program that handles its failure and goes on."""
    try:
        query.awaitTermination(300)
    except Exception as exc:
        print(f"query failed as intended: {type(exc).__name__}", file=sys.stderr)


def stream_fail_caught(spark: SparkSession, root: Path) -> None:
    """A CSV file stream whose first micro-batch fails (FAILFAST on a malformed row); the
    program catches the query's failure, says so and stops the session cleanly: exit 0."""
    query = available_now(
        failing_stream(spark, root)
        .selectExpr("id", "litres * 1000 AS millilitres")
        .writeStream.format("parquet")
        .option("path", str(root / "data" / "volumes")),
        root,
        "volumes",
    )
    caught(query)


def delta_merge_window(spark: SparkSession, root: Path) -> None:
    """Delta MERGE from the latest row per key of a JSON feed (row_number over a window),
    with a date derived from a timestamp string: through a SQL view (whose aliases the
    optimizer drops) and through the Python API."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    feed = root / "data" / "stock_counts"
    feed.mkdir(parents=True, exist_ok=True)
    counts = [
        ("bolt-m4", 120, "2026-03-02 07:15:00", "leeds", "kim"),
        ("bolt-m4", 95, "2026-03-04 18:40:00", "leeds", "ola"),
        ("nut-m4", 300, "2026-03-03 09:05:00", "york", "kim"),
        ("washer-8", 40, "2026-03-01 12:00:00", "hull", "raj"),
    ]
    keys = ("item", "qty", "counted_at", "depot", "clerk")
    (feed / "counts-1.json").write_text(
        "".join(json.dumps(dict(zip(keys, row, strict=True))) + "\n" for row in counts)
    )
    describe(spark, "delta merge window: create")
    spark.sql(
        "CREATE TABLE stock (item STRING, qty BIGINT, depot STRING, count_day DATE)"
        " USING delta PARTITIONED BY (count_day)"
    )
    spark.sql("INSERT INTO stock VALUES ('bolt-m4', 100, 'leeds', DATE'2026-02-27')")
    spark.read.json(str(feed)).createOrReplaceTempView("stock_counts_raw")
    spark.sql(
        """CREATE OR REPLACE TEMP VIEW stock_counts_latest AS
        SELECT item, qty, depot, to_date(counted_at) AS count_day FROM (
          SELECT *, row_number() OVER (PARTITION BY item ORDER BY counted_at DESC) AS pick
          FROM stock_counts_raw) WHERE pick = 1"""
    )
    describe(spark, "delta merge window: sql view")
    spark.sql(
        """MERGE INTO stock AS t USING stock_counts_latest AS s ON t.item = s.item
        WHEN MATCHED AND s.qty <> t.qty THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *"""
    )
    describe(spark, "delta merge window: python api")
    newest = Window.partitionBy("item").orderBy(F.col("counted_at").desc())
    latest = (
        spark.read.json(str(feed))
        .withColumn("pick", F.row_number().over(newest))
        .where(F.col("pick") == 1)
        .select(
            "item",
            (F.col("qty") * 2).alias("qty"),
            "depot",
            F.to_date("counted_at", "yyyy-MM-dd HH:mm:ss").alias("count_day"),
        )
    )
    delta_table: Any = importlib.import_module("delta.tables").DeltaTable
    (
        delta_table.forName(spark, "stock")
        .alias("t")
        .merge(latest.alias("s"), "t.item = s.item")
        .whenMatchedUpdate(set={"qty": "s.qty", "count_day": "s.count_day"})
        .whenNotMatchedInsertAll()
        .execute()
    )


def kafka_save_files(spark: SparkSession, root: Path) -> None:
    """Batch saves into Kafka from files: a CSV frame (header, inferred types) to a topic
    option, written to parquet, then saved with a topic computed per row and grouped; a
    parquet read saved to a topic. Then two file streams into Kafka whose first micro-batch
    fails (FAILFAST): one names its topic in a column, one in the topic option."""
    from pyspark.sql import functions as F

    servers = os.environ["LAKEHOUSE_KAFKA"]
    data = root / "data"
    (data / "sensors.csv").write_text(
        "sensor_id,site,reading,ts\ns-1,north,1.5,2026-03-01 08:00:00\n"
        "s-2,south,2.5,2026-03-01 08:05:00\ns-3,north,3.5,2026-03-01 08:10:00\n"
    )

    def kafka(frame: DataFrame, topic: str | None = None) -> None:
        writer = frame.write.format("kafka").option("kafka.bootstrap.servers", servers)
        (writer.option("topic", topic) if topic else writer).save()

    describe(spark, "kafka save files: csv to a topic")
    sensors = (
        spark.read.option("header", "true")
        .option("inferSchema", "true")
        .csv(str(data / "sensors.csv"))
    )
    kafka(
        sensors.select(
            F.col("sensor_id").alias("key"),
            F.to_json(F.struct("site", "reading", "ts")).alias("value"),
        ),
        "c3-readings",
    )
    describe(spark, "kafka save files: csv to parquet")
    sensors.write.parquet(str(data / "sensors_parquet"))
    describe(spark, "kafka save files: topic per row")
    kafka(
        sensors.selectExpr(
            "concat('c3_site_', site) AS topic",
            "sensor_id AS key",
            "CAST(reading AS STRING) AS value",
        )
    )
    describe(spark, "kafka save files: grouped")
    kafka(
        sensors.groupBy("site")
        .agg(F.sum("reading").alias("total"))
        .select(F.col("site").alias("key"), F.col("total").cast("string").alias("value")),
        "c3-totals",
    )
    describe(spark, "kafka save files: parquet to a topic")
    kafka(
        spark.read.parquet(str(data / "sensors_parquet")).select(
            F.col("sensor_id").alias("key"), F.col("reading").cast("string").alias("value")
        ),
        "c3-parquet",
    )
    spark.sparkContext._jsc.setLocalProperty("spark.job.description", None)
    for name, topic in (("volumes_by_column", None), ("volumes_by_option", "volumes")):
        rows = failing_stream(spark, root).selectExpr(
            "CAST(id AS STRING) AS key", "CAST(litres * 1000 AS STRING) AS value"
        )
        if topic is None:
            rows = rows.selectExpr("'volumes' AS topic", "key", "value")
        writer = rows.writeStream.format("kafka").option("kafka.bootstrap.servers", servers)
        caught(available_now(writer.option("topic", topic) if topic else writer, root, name))


def stream_fail_iceberg(spark: SparkSession, root: Path) -> None:
    """A CSV file stream into an Iceberg table of the Hadoop catalog (`toTable`) whose first
    micro-batch fails (FAILFAST on a malformed row); the program catches the failure."""
    spark.sql("CREATE TABLE lake.db.volumes (id INT, millilitres DOUBLE) USING iceberg")
    rows = failing_stream(spark, root).selectExpr("id", "litres * 1000 AS millilitres")
    caught(to_iceberg(rows, root, "volumes", "lake.db.volumes"))


Job = Callable[["SparkSession", Path], None]
SHAPES: dict[str, tuple[Job, bool]] = {  # name -> (job, needs the Kafka broker)
    "delta_path": (delta_path, False),
    "delta_catalog": (delta_catalog, False),
    "iceberg_hadoop": (iceberg_hadoop, False),
    "iceberg_jdbc": (iceberg_jdbc, False),
    "kafka_batch": (kafka_batch, True),
    "stream_file_parquet": (stream_file_parquet, False),
    "stream_kafka_delta": (stream_kafka_delta, True),
    "stream_sigterm": (stream_sigterm, False),
    "stream_failure": (stream_failure, False),
    "stream_iceberg": (stream_iceberg, False),
    "kafka_sink_columns": (kafka_sink_columns, True),
    "stream_kafka_window": (stream_kafka_window, True),
    "stream_join_delta": (stream_join_delta, False),
    "stream_fail_caught": (stream_fail_caught, False),
    "delta_merge_window": (delta_merge_window, False),
    "kafka_save_files": (kafka_save_files, True),
    "stream_fail_iceberg": (stream_fail_iceberg, False),
}


def shape_conf(shape: str, root: Path) -> dict[str, str]:
    """The Spark settings a shape's session starts with, by its name."""
    if "iceberg" in shape:
        return iceberg_conf(root)
    return dict(DELTA) if "delta" in shape else {}


@dataclass(frozen=True)
class LogSet:
    """What one generator makes: its shapes, the environment and jars they run with, where
    their logs go and how they are scrubbed (a sibling generator reuses the machinery below)."""

    script: Path  # run again as each shape's child process, in the environment `env`
    out: Path
    placeholder: str  # what the job's temporary directory becomes
    env: str  # of scripts/pyenv.py
    bundles: tuple[str, ...]  # of scripts/jars.py
    kept: frozenset[str]  # Spark properties of the environment event
    shapes: dict[str, tuple[Job, bool]]
    app_prefix: str
    conf: Callable[[str, Path], dict[str, str]]


LAKEHOUSE = LogSet(
    Path(__file__).resolve(),
    OUT,
    PLACEHOLDER,
    ENV,
    BUNDLES,
    frozenset(KEPT_PROPERTIES),
    SHAPES,
    "lakehouse",
    shape_conf,
)


def child(logs: LogSet, shape: str, root: Path, jars: str) -> None:
    job, _ = logs.shapes[shape]
    spark = session(root, f"{logs.app_prefix}_{shape}", jars, logs.conf(shape, root))
    job(spark, root)
    spark.stop()


# ---------------------------------------------------------------- the generator (parent)


def scrub(raw: str, root: Path, broker: str | None, logs: LogSet = LAKEHOUSE) -> str:
    """One log line made machine-independent: placeholders, trimmed environment."""
    text = trimmed(raw, logs.kept)
    for prefix in (str(root.resolve()), str(root), str(ROOT), str(Path.home())):
        text = text.replace(prefix, logs.placeholder)
    if broker:
        text = text.replace(broker, BROKER_PLACEHOLDER)
    for name in {socket.gethostname(), socket.getfqdn()} - {"localhost"}:
        text = text.replace(f'"{name}"', f'"{HOST_PLACEHOLDER}"')
    return text


def table_facts(root: Path, placeholder: str = PLACEHOLDER) -> dict[str, Any]:
    """Delta commits and Iceberg snapshots as the tables' own metadata on disk records them."""
    facts: dict[str, Any] = {}
    for log in sorted(root.rglob("_delta_log")):
        commits = []
        for commit in sorted(log.glob("*.json")):
            for line in commit.read_text().splitlines():
                info = json.loads(line).get("commitInfo")
                if info:
                    params = info.get("operationParameters", {})
                    commits.append(
                        {
                            "version": int(commit.stem),
                            "operation": info.get("operation"),
                            "readVersion": info.get("readVersion"),
                            "parameters": sorted(params),
                            "metrics": {
                                k: v
                                for k, v in info.get("operationMetrics", {}).items()
                                if k.startswith("num") and "Row" in k
                            },
                        }
                    )
        key = str(log.parent).replace(str(root), placeholder)
        facts[key] = {"format": "delta", "commits": commits}
    for meta in sorted(root.rglob("metadata")):
        files = sorted(
            meta.glob("*.metadata.json"), key=lambda p: json.loads(p.read_text())["last-updated-ms"]
        )
        if not files:
            continue
        last = json.loads(files[-1].read_text())
        key = str(meta.parent).replace(str(root), placeholder)
        facts[key] = {
            "format": "iceberg",
            "metadata_files": [p.name for p in files],
            "current-snapshot-id": last.get("current-snapshot-id"),
            "snapshots": [
                {
                    "snapshot-id": s["snapshot-id"],
                    "parent-snapshot-id": s.get("parent-snapshot-id"),
                    "sequence-number": s.get("sequence-number"),
                    "operation": s.get("summary", {}).get("operation"),
                    "added-records": s.get("summary", {}).get("added-records"),
                    "deleted-records": s.get("summary", {}).get("deleted-records"),
                }
                for s in last.get("snapshots", [])
            ],
        }
    catalog = root / "catalog.db"
    if catalog.exists():  # Iceberg's JDBC catalog: the table's current metadata file
        with contextlib.closing(sqlite3.connect(catalog)) as db:
            rows = db.execute(
                "SELECT catalog_name, table_namespace, table_name, metadata_location"
                " FROM iceberg_tables ORDER BY table_name"
            ).fetchall()
        facts["jdbc catalog iceberg_tables"] = [
            [*row[:3], str(row[3]).replace(str(root), placeholder)] for row in rows
        ]
    return facts


def _java_children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"java" in cmdline.split(b"\0")[0]:
            found.append(int(entry.name))
    return found


def _stream_state(events: Path) -> tuple[int, bool]:
    """Progress events so far, and whether a SQL execution is running right now."""
    body = "".join(f.read_text(errors="replace") for f in events.glob("*"))
    running = body.count("SparkListenerSQLExecutionStart") > body.count(
        "SparkListenerSQLExecutionEnd"
    )
    return body.count("QueryProgressEvent"), running


def run_child(logs: LogSet, shape: str, root: Path, env: dict[str, str]) -> None:
    jars = ",".join(
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "jars.py"), "--classpath", b],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .replace(":", ",")
        for b in logs.bundles
    )
    command = [sys.executable, str(logs.script), "--child", shape, str(root), jars]
    with (root / "child.log").open("wb") as out:
        # in the job's directory: what a job leaves in its working directory (Derby's
        # derby.log) goes with it
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + CHILD_TIMEOUT
    try:
        if shape == "stream_sigterm":
            while True:  # a few batches done and the next one running: then SIGTERM
                progress, running = _stream_state(root / "events")
                if progress >= SIGTERM_AFTER_PROGRESS and running:
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{shape}: the query made no progress in time")
                time.sleep(0.05)
            (jvm,) = _java_children(process.pid)
            os.kill(jvm, signal.SIGTERM)
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
    if process.returncode != 0 and shape != "stream_sigterm":
        tail = (root / "child.log").read_text(errors="replace")[-6000:]
        raise RuntimeError(f"{shape}: the job exited {process.returncode}:\n{tail}")


def generate(logs: LogSet, shape: str, keep: Path | None) -> None:
    from tests.kafka import running_kafka

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"{logs.app_prefix}-") as tmp:
        root = Path(tmp)
        (root / "events").mkdir()
        (root / "data").mkdir()
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        # Python workers import the repository's modules: a UDTF's class is pickled by name
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
        broker = None
        if logs.shapes[shape][1]:
            with running_kafka(root) as kafka:
                broker = kafka.bootstrap
                env["LAKEHOUSE_KAFKA"] = broker
                if shape == "stream_kafka_delta":
                    kafka.create_topic("orders", partitions=2)
                    kafka.produce("orders", [json.dumps({"n": n}) for n in range(7)])
                if shape == "stream_kafka_window":
                    kafka.create_topic("meter-readings", partitions=1)
                    kafka.produce("meter-readings", METER_READINGS)
                run_child(logs, shape, root, env)
        else:
            run_child(logs, shape, root, env)
        (log,) = (root / "events").iterdir()
        lines = [scrub(line, root, broker, logs) for line in log.read_text().splitlines() if line]
        tables = table_facts(root, logs.placeholder)
        if keep:
            shutil.copytree(root, keep / shape, dirs_exist_ok=True)
    body = ("\n".join(lines) + "\n").encode()
    import zstandard

    logs.out.mkdir(parents=True, exist_ok=True)
    out = logs.out / f"{shape}.jsonl.zst"
    out.write_bytes(zstandard.ZstdCompressor(level=19).compress(body))
    if tables:
        (logs.out / f"{shape}.tables.json").write_text(json.dumps(tables, indent=1) + "\n")
    took = time.monotonic() - started
    print(
        f"{out.name}: {len(lines)} events, {len(body)} bytes, "
        f"{out.stat().st_size} compressed, {took:.0f}s",
        file=sys.stderr,
    )


def main(argv: list[str], logs: LogSet = LAKEHOUSE) -> int:
    if argv[:1] == ["--child"]:
        child(logs, argv[1], Path(argv[2]), argv[3])
        return 0
    env_python = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pyenv.py"), logs.env],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if Path(sys.prefix).resolve() != Path(env_python).parents[1].resolve():
        os.execv(env_python, [env_python, str(logs.script), *argv])
    keep = None
    if "--keep" in argv:
        at = argv.index("--keep")
        keep = Path(argv[at + 1]).resolve()
        argv = argv[:at] + argv[at + 2 :]
    for shape in argv or list(logs.shapes):
        generate(logs, shape, keep)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
