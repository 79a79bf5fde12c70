"""Regenerate the golden Spark event logs beside this script (real PySpark 4.3, Java 17).

    .venv/bin/python tests/golden/make_golden_logs.py [catalog] [hive_jdbc]

`catalog.jsonl.zst`: CSV -> saveAsTable, CTAS, INSERT INTO, table -> partitioned ORC,
nested JSON -> JSON, text -> CSV, an RDD `textFile` read and an RDD save.
`hive_jdbc.jsonl.zst`: Hive-format tables (metastore in embedded Derby): CTAS, INSERT,
a Hive table scan; a JDBC write and read against in-memory Derby, once with the url
redacted (Spark's default) and once with redaction of `url` options turned off.

Each job runs in a temporary directory; every path under it is rewritten to
`/data/golden/...`, the environment event keeps only a few Spark properties (the rest names
the machine), and the log is zstd-compressed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import zstandard
from pyspark.sql import SparkSession

HERE = Path(__file__).resolve().parent
PLACEHOLDER = "/data/golden"
KEPT_PROPERTIES = {
    "spark.app.name",
    "spark.app.id",
    "spark.master",
    "spark.sql.warehouse.dir",
    "spark.sql.catalogImplementation",
}


def session(root: Path, name: str, *, hive: bool = False) -> SparkSession:
    builder = (
        SparkSession.builder.master("local[1]")
        .appName(name)
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(root / "events"))
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.eventLog.compress", "false")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.ui.enabled", "false")
    )
    if hive:
        builder = builder.enableHiveSupport().config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def catalog_job(root: Path) -> None:
    """Every statement is one SQL execution (or an RDD job) in the log."""
    data = root / "data"
    (data / "people.csv").write_text("name,age,city\nada,36,london\nalan,41,wilmslow\n")
    (data / "nested.json").write_text(
        '{"id": 1, "info": {"tags": ["a", "b"], "score": 1.5}, "m": {"k": 2}}\n'
        '{"id": 2, "info": {"tags": [], "score": 2.5}, "m": {}}\n'
    )
    (data / "words.txt").write_text("alpha beta\ngamma\n")
    spark = session(root, "Golden Catalog-App")
    sc = spark.sparkContext

    sc.setJobDescription("csv to catalog table")
    people = spark.read.option("header", "true").option("inferSchema", "true")
    people.csv(str(data / "people.csv")).write.mode("overwrite").saveAsTable("people")
    sc.setJobDescription("ctas")
    spark.sql("CREATE TABLE adults USING parquet AS SELECT name, age FROM people WHERE age > 18")
    sc.setJobDescription("insert into")
    spark.sql("INSERT INTO adults SELECT name, age + 1 FROM people")
    sc.setJobDescription("table to orc, partitioned")
    spark.table("adults").write.mode("overwrite").partitionBy("age").orc(str(data / "adults_orc"))
    sc.setJobDescription("nested json to json")
    nested = spark.read.json(str(data / "nested.json"))
    nested.select("id", "info").write.mode("overwrite").json(str(data / "nested_out"))
    sc.setJobDescription("text to csv")
    spark.read.text(str(data / "words.txt")).write.mode("overwrite").csv(str(data / "words_csv"))
    sc.setJobDescription("rdd text file")
    sc.textFile(str(data / "words.txt")).count()
    sc.setJobDescription("rdd save")
    sc.parallelize(["x", "y"], 1).saveAsTextFile(str(data / "rdd_out"))
    spark.stop()


def hive_jdbc_job(root: Path) -> None:
    spark = session(root, "golden_hive_jdbc", hive=True)
    sc = spark.sparkContext
    sc.setJobDescription("hive ctas")
    spark.sql(
        "CREATE TABLE events STORED AS TEXTFILE AS SELECT id, CAST(id AS STRING) AS s FROM range(3)"
    )
    sc.setJobDescription("hive insert")
    spark.sql("INSERT INTO events SELECT id + 10, 'x' FROM range(2)")
    sc.setJobDescription("hive scan to parquet")
    spark.table("events").write.mode("overwrite").parquet(str(root / "data" / "events_pq"))
    url = "jdbc:derby:memory:shop;create=true"
    sc.setJobDescription("jdbc write, url redacted")
    spark.range(3).write.jdbc(url, "APP.ORDERS", mode="overwrite")
    sc.setJobDescription("jdbc read")
    spark.read.jdbc(url, "APP.ORDERS").write.mode("overwrite").json(str(root / "data" / "orders"))
    sc.setJobDescription("jdbc write, url shown")
    spark.conf.set("spark.sql.redaction.options.regex", "(?i)password")
    spark.range(2).write.jdbc(url, "APP.ITEMS", mode="overwrite")
    spark.stop()


def scrub(raw: str, root: Path) -> str:
    """Make one log line machine-independent: placeholder paths, trimmed environment."""
    event = json.loads(raw)
    if event.get("Event") == "SparkListenerEnvironmentUpdate":
        props = event.get("Spark Properties", {})
        event = {
            "Event": event["Event"],
            "Spark Properties": {k: v for k, v in props.items() if k in KEPT_PROPERTIES},
        }
    text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    for prefix in (str(root.resolve()), str(root), str(HERE.parents[1]), str(Path.home())):
        text = text.replace(prefix, PLACEHOLDER)
    return text


def generate(name: str, job: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "events").mkdir()
        (root / "data").mkdir(exist_ok=True)
        job(root)
        (log,) = (root / "events").iterdir()
        lines = [scrub(line, root) for line in log.read_text().splitlines() if line]
    body = ("\n".join(lines) + "\n").encode()
    out = HERE / f"{name}.jsonl.zst"
    out.write_bytes(zstandard.ZstdCompressor(level=19).compress(body))
    print(f"{out.name}: {len(lines)} events, {len(body)} bytes, {out.stat().st_size} compressed")


JOBS = {"catalog": catalog_job, "hive_jdbc": hive_jdbc_job}


def main(names: list[str]) -> int:
    for name in names or list(JOBS):
        generate(name, JOBS[name])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
