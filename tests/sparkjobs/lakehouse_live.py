"""A PySpark application for tests/test_lakehouse_live*.py: Delta and Iceberg statements,
DDL included, in one session (one JVM), its event log uncompressed in `<root>/events`.

    python lakehouse_live.py ROOT JARS PART [KAFKA_BOOTSTRAP]

PART `paths`: a Delta path table's writes and rewrites, and its maintenance; `catalogs`: a
Delta catalog table's DDL, Iceberg hadoop-catalog tables copy-on-write and merge-on-read,
and with a broker's address a write to and reads from Kafka. Two parts of about the same
work, two applications: the test files that run them go to different worker processes.
Run under the lakehouse environment (`scripts/pyenv.py lakehouse`) with the Delta, Iceberg
and Kafka connector jars of `scripts/jars.py` as JARS (comma-separated). Every statement
sets its own job description.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession


def main(root: Path, jars: str, part: str, kafka: str | None) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"lakehouse_live_{part}")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(root / "events"))
        .config("spark.eventLog.compress", "false")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.jars", jars)
        .config(
            "spark.sql.extensions",
            "io.delta.sql.DeltaSparkSessionExtension,"
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.lake.type", "hadoop")
        .config("spark.sql.catalog.lake.warehouse", str(root / "iceberg"))
        # a second Iceberg catalog, never used: CREATE / CTAS targets, printed without their
        # catalog, are placed by which warehouse holds the table on disk
        .config("spark.sql.catalog.spare", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.spare.type", "hadoop")
        .config("spark.sql.catalog.spare.warehouse", str(root / "iceberg-spare"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if part == "paths":
        delta_paths(spark, root)
    else:
        delta_catalog(spark)
        iceberg(spark, root, kafka)
    spark.stop()


def delta_paths(spark: SparkSession, root: Path) -> None:
    say = spark.sparkContext.setJobDescription
    path = str(root / "data" / "events")

    say("delta path: create")
    spark.range(0, 4).selectExpr("id", "id * 10 AS amount").write.format("delta").save(path)
    say("delta path: append")
    spark.range(4, 6).selectExpr("id", "id * 10 AS amount").write.format("delta").mode(
        "append"
    ).save(path)
    updates = str(root / "data" / "updates")
    say("parquet: updates")
    spark.range(3, 8).selectExpr("id", "id * 100 AS amount").write.parquet(updates)
    spark.read.parquet(updates).createOrReplaceTempView("updates")
    say("delta path: merge")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING updates s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET amount = s.amount + t.amount "
        "WHEN NOT MATCHED THEN INSERT (id, amount) VALUES (s.id, s.amount)"
    )
    say("delta path: update")
    spark.sql(f"UPDATE delta.`{path}` SET amount = amount + 1 WHERE id < 2")
    say("delta path: delete")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 0")

    maintained = str(root / "data" / "maintained")
    say("delta maintenance: write")
    spark.range(0, 4).write.format("delta").save(maintained)
    say("delta maintenance: append")
    spark.range(4, 8).write.format("delta").mode("append").save(maintained)
    say("delta maintenance: optimize")
    spark.sql(f"OPTIMIZE delta.`{maintained}`")
    say("delta maintenance: restore")
    spark.sql(f"RESTORE TABLE delta.`{maintained}` TO VERSION AS OF 0")
    say("delta maintenance: vacuum")
    spark.sql(f"VACUUM delta.`{maintained}`")


def delta_catalog(spark: SparkSession) -> None:
    say = spark.sparkContext.setJobDescription
    say("delta table: create")
    spark.sql("CREATE TABLE accounts (id BIGINT, owner STRING) USING delta")
    say("delta table: insert")
    spark.sql("INSERT INTO accounts VALUES (1, 'a'), (2, 'b')")
    say("delta table: alter")
    spark.sql("ALTER TABLE accounts ADD COLUMNS (opened DATE)")
    say("delta table: ctas")
    spark.sql("CREATE TABLE owners USING delta AS SELECT DISTINCT owner FROM accounts")
    say("delta table: rename")
    spark.sql("ALTER TABLE owners RENAME TO owners_v2")
    say("delta table: drop")
    spark.sql("DROP TABLE owners_v2")


def iceberg(spark: SparkSession, root: Path, kafka: str | None) -> None:
    say = spark.sparkContext.setJobDescription
    say("iceberg: create")
    spark.sql("CREATE TABLE lake.db.orders (id BIGINT, status STRING) USING iceberg")
    say("iceberg: insert")
    spark.sql("INSERT INTO lake.db.orders VALUES (1, 'new'), (2, 'new'), (3, 'old')")
    say("iceberg: merge")
    spark.sql(
        "MERGE INTO lake.db.orders t USING (SELECT 2L AS id, 'paid' AS status) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET status = s.status "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    say("iceberg: delete")
    spark.sql("DELETE FROM lake.db.orders WHERE status = 'old'")
    say("iceberg: alter")
    spark.sql("ALTER TABLE lake.db.orders ADD COLUMNS (note STRING)")
    say("iceberg: ctas")
    spark.sql("CREATE TABLE lake.db.paid USING iceberg AS SELECT * FROM lake.db.orders")
    say("iceberg merge-on-read: create")
    spark.sql(
        "CREATE TABLE lake.db.visits (id BIGINT, page STRING) USING iceberg TBLPROPERTIES "
        "('format-version'='2', 'write.merge.mode'='merge-on-read', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    say("iceberg merge-on-read: insert")
    spark.sql("INSERT INTO lake.db.visits VALUES (1, 'a'), (2, 'b')")
    say("iceberg merge-on-read: merge")
    spark.sql(
        "MERGE INTO lake.db.visits t USING (SELECT 2L AS id, 'c' AS page) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET page = s.page WHEN NOT MATCHED THEN INSERT *"
    )
    say("iceberg merge-on-read: delete")
    spark.sql("DELETE FROM lake.db.visits WHERE id = 1")
    say("iceberg: truncate")
    spark.sql("TRUNCATE TABLE lake.db.paid")
    say("iceberg: drop")
    spark.sql("DROP TABLE lake.db.paid")

    if kafka:
        say("kafka: write")
        spark.range(4).selectExpr(
            "CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"
        ).write.format("kafka").option("kafka.bootstrap.servers", kafka).option(
            "topic", "clicks"
        ).save()
        for name, option in (("subscribe", "clicks"), ("subscribePattern", "cli.*")):
            say(f"kafka: read {name}")
            spark.read.format("kafka").option("kafka.bootstrap.servers", kafka).option(
                name, option
            ).option("startingOffsets", "earliest").load().selectExpr(
                "CAST(value AS STRING) AS v"
            ).write.mode("overwrite").parquet(str(root / "data" / f"from_{name}"))


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[3] not in ("paths", "catalogs"):
        sys.exit(__doc__)
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
