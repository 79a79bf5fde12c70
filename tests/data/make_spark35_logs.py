"""Regenerate the Spark 3.5 event logs in `eventlogs/spark35/` beside this script.

    python3 tests/data/make_spark35_logs.py [SHAPE...] [--keep DIR]

Real PySpark 3.5.9 (Scala 2.12, Java 17, local[2], UI off) with Delta Lake 3.3.3, the Kafka
connector and spark-avro for Spark 3.5, in the environment `scripts/pyenv.py spark35` creates
(this script re-executes itself there) with the jars of `scripts/jars.py`. Many platforms still
run Spark 3.5, whose plan text differs from Spark 4's: these are the shapes a translation
depends on, the Delta and Kafka ones the very jobs of `make_lakehouse_logs.py`, whose
machinery (child process per shape, Kafka broker, scrubbing, zstd) runs them. Paths under the
job's temporary directory become `/data/spark35/...`; see `eventlogs/spark35/NOTES.md`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.data import make_lakehouse_logs as lake
from tests.data.make_lakehouse_logs import describe, expect_failure

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HERE = Path(__file__).resolve().parent
DERBY_URL = "jdbc:derby:memory:spark35;create=true"
DERBY_CATALOG = {
    "spark.sql.catalog.derby": (
        "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"
    ),
    "spark.sql.catalog.derby.url": DERBY_URL,
    "spark.sql.catalog.derby.driver": "org.apache.derby.jdbc.EmbeddedDriver",
}


def files(spark: SparkSession, root: Path) -> None:
    """Parquet, CSV and JSON writes and reads, a read of two paths, INSERT OVERWRITE
    DIRECTORY, and a join + aggregate + explode whose columns come from two inputs."""
    from pyspark.sql import functions as F

    data = root / "data"
    people = spark.createDataFrame(
        [(1, "ann", "leeds", ["a", "b"]), (2, "bob", "york", ["b"]), (3, "cy", "leeds", [])],
        "id long, name string, city string, tags array<string>",
    )
    describe(spark, "files: parquet write")
    people.write.parquet(str(data / "people"))
    describe(spark, "files: parquet write, second part")
    people.selectExpr("id + 10 AS id", "name", "city", "tags").write.parquet(
        str(data / "people_more")
    )
    describe(spark, "files: csv write")
    spark.read.parquet(str(data / "people")).where("id > 1").select("id", "name").write.option(
        "header", "true"
    ).csv(str(data / "people_csv"))
    describe(spark, "files: json write")
    spark.createDataFrame(
        [(1, 10.0), (1, 5.5), (2, 7.0), (13, 1.0)], "person long, amount double"
    ).write.json(str(data / "orders"))
    describe(spark, "files: two paths read")
    spark.read.parquet(str(data / "people"), str(data / "people_more")).select(
        "id", "city"
    ).write.mode("overwrite").parquet(str(data / "all_people"))
    describe(spark, "files: csv and json read")
    spark.read.option("header", "true").csv(str(data / "people_csv")).join(
        spark.read.json(str(data / "orders")), F.col("id") == F.col("person")
    ).select("name", "amount").write.json(str(data / "named_orders"))
    describe(spark, "files: insert overwrite directory")
    spark.sql(
        f"INSERT OVERWRITE DIRECTORY '{data / 'leeds'}' USING parquet "
        f"SELECT id, upper(name) AS name FROM parquet.`{data / 'people'}` WHERE city = 'leeds'"
    )
    describe(spark, "files: join aggregate explode")
    orders = spark.read.json(str(data / "orders"))
    (
        spark.read.parquet(str(data / "people"))
        .join(orders, F.col("id") == F.col("person"))
        .select("city", F.explode("tags").alias("tag"), "amount")
        .groupBy("city", "tag")
        .agg(F.sum("amount").alias("total"), F.count("*").alias("orders"))
        .write.parquet(str(data / "city_tags"))
    )


def tables(spark: SparkSession, root: Path) -> None:
    """Session-catalog tables without Hive: CREATE, INSERT INTO, saveAsTable (new and
    append), CTAS, INSERT OVERWRITE, a table read written to files, then ALTER, TRUNCATE
    and DROP (command nodes that Spark 4 names otherwise)."""
    describe(spark, "tables: create")
    spark.sql("CREATE TABLE owners (id BIGINT, name STRING) USING parquet")
    describe(spark, "tables: insert values")
    spark.sql("INSERT INTO owners VALUES (1, 'ann'), (2, 'bob')")
    pets = spark.createDataFrame(
        [(10, "rex", 1), (11, "tom", 2)], "pet_id long, pet string, owner_id long"
    )
    describe(spark, "tables: saveAsTable new")
    pets.write.saveAsTable("pets")
    describe(spark, "tables: saveAsTable append")
    pets.selectExpr("pet_id + 10 AS pet_id", "pet", "owner_id").write.mode("append").saveAsTable(
        "pets"
    )
    describe(spark, "tables: ctas")
    spark.sql(
        "CREATE TABLE pet_owners USING parquet AS "
        "SELECT p.pet, o.name AS owner FROM pets p JOIN owners o ON p.owner_id = o.id"
    )
    describe(spark, "tables: insert select")
    spark.sql("INSERT INTO pet_owners SELECT pet, 'nobody' FROM pets WHERE owner_id > 1")
    describe(spark, "tables: insert overwrite")
    spark.sql("INSERT OVERWRITE TABLE owners SELECT owner_id, concat('o', pet) FROM pets")
    describe(spark, "tables: read to files")
    spark.table("pet_owners").where("owner <> 'nobody'").write.parquet(
        str(root / "data" / "pet_owners")
    )
    describe(spark, "tables: alter add columns")
    spark.sql("ALTER TABLE pets ADD COLUMNS (age INT)")
    describe(spark, "tables: truncate")
    spark.sql("TRUNCATE TABLE owners")
    describe(spark, "tables: drop")
    spark.sql("DROP TABLE pet_owners")


def jdbc(spark: SparkSession, root: Path) -> None:
    """In-memory Derby: a V1 write and read, and an INSERT through the V2 JDBC catalog (the
    statements of the Spark 4 `jdbc_derby` log)."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(1, "Ann"), (2, "Bob")], "ID int, NAME string")
    describe(spark, "jdbc: write")
    frame.write.jdbc(DERBY_URL, "APP.PEOPLE", mode="overwrite")
    describe(spark, "jdbc: read")
    back = spark.read.jdbc(DERBY_URL, "APP.PEOPLE").select(F.lower("NAME").alias("name"))
    back.write.parquet(str(root / "data" / "jdbc_read"))
    source = root / "data" / "more_people"
    spark.createDataFrame([(3, "cy")], "id int, name string").write.parquet(str(source))
    describe(spark, "jdbc: v2 catalog insert")
    spark.sql(f"INSERT INTO derby.APP.PEOPLE SELECT id + 10, upper(name) FROM parquet.`{source}`")


def sql_failure(spark: SparkSession, root: Path) -> None:
    """Statements that fail under ANSI mode (on from the start: Spark 3.5's default is off): a
    division by zero collected, a file write and a SQL INSERT whose tasks fail on a cast, a
    write to a path that exists, an unresolved column."""
    data = root / "data"
    describe(spark, "failure: ansi divide by zero")
    expect_failure(spark.range(0, 10).selectExpr("id", "10 / (id - id) AS boom").collect)
    describe(spark, "failure: write whose tasks fail")
    failing = spark.range(0, 4).selectExpr("id", "CAST(concat('n', id) AS INT) AS bad")
    expect_failure(lambda: failing.write.parquet(str(data / "fail_out")))
    describe(spark, "failure: a write that works")
    spark.range(0, 3).write.parquet(str(data / "exists"))
    describe(spark, "failure: write to existing path")
    expect_failure(lambda: spark.range(0, 3).write.parquet(str(data / "exists")))
    lake.failing_sql(spark)


def conf(shape: str, root: Path) -> dict[str, str]:
    """The Spark settings a shape's session starts with."""
    if shape == "jdbc":  # the url shows in the write's options, as in the Spark 4 logs
        return {**DERBY_CATALOG, "spark.sql.redaction.options.regex": "(?i)password"}
    if shape in ("sql_failure", "stream_failure"):  # Spark 4's default, off in Spark 3.5
        return {"spark.sql.ansi.enabled": "true"}
    return lake.shape_conf(shape, root)


SPARK35 = lake.LogSet(
    script=Path(__file__).resolve(),
    out=HERE / "eventlogs" / "spark35",
    placeholder="/data/spark35",
    env="spark35",
    bundles=("delta-3.5", "spark-kafka-3.5", "spark-avro-3.5"),
    kept=frozenset({*lake.KEPT_PROPERTIES, *DERBY_CATALOG, "spark.sql.redaction.options.regex"}),
    shapes={  # name -> (job, needs the Kafka broker)
        "files": (files, False),
        "tables": (tables, False),
        "jdbc": (jdbc, False),
        "sql_failure": (sql_failure, False),
        "delta_path": (lake.delta_path, False),
        "delta_catalog": (lake.delta_catalog, False),
        "kafka_batch": (lake.kafka_batch, True),
        "stream_file_parquet": (lake.stream_file_parquet, False),
        "stream_failure": (lake.stream_failure, False),
    },
    app_prefix="spark35",
    conf=conf,
)

if __name__ == "__main__":
    sys.exit(lake.main(sys.argv[1:], SPARK35))
