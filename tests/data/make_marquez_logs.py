"""Regenerate the event logs in `eventlogs/marquez/` beside this script: the shapes whose events
a real Marquez showed wrong (untyped columns, DDL naming another dataset than the writes, a
truncated file list named as a dataset).

    python3 tests/data/make_marquez_logs.py [SHAPE...]

Real PySpark 4.3.0 of the project's venv (`local[2]`, Java 17, UI off, in-memory catalog),
each shape one application in its own process and JVM, written uncompressed to one file,
then scrubbed and zstd-compressed to `<shape>.jsonl.zst`: every path under the job's
temporary directory becomes `/data/marquez/...`, the host `driver-host`, and the environment
event keeps only a few Spark properties. The first parquet file (by name) of each dataset in
`FOOTERS` is copied to `data/<its path>/`: the footer Spark wrote, which the tests read as
the agent reads a dataset on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.data import logscrub
from tests.data.logscrub import trimmed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HERE = Path(__file__).resolve().parent
OUT = HERE / "eventlogs" / "marquez"
PLACEHOLDER = "/data/marquez"
HOST_PLACEHOLDER = "driver-host"
KEPT_PROPERTIES = set(logscrub.KEPT_PROPERTIES)
CHILD_TIMEOUT = 420.0  # one application, JVM start included, on a shared two-core machine
#: Datasets (relative to the job's directory) whose first parquet file is kept, by shape.
FOOTERS: dict[str, tuple[str, ...]] = {
    "local_data": ("data/raw/customers", "data/values", "data/pivot", "warehouse/t"),
    "table_ddl": (),
    "stream_files": ("data/out", "data/joined", "data/each"),
}


def session(root: Path, name: str) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", (root / "events").as_uri())
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.eventLog.compress", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def customers(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [(1, "ann", "paris"), (2, "bob", "rome"), (3, "cy", "paris")],
        "id int, name string, city string",
    )


def local_data(spark: SparkSession, root: Path) -> None:
    """Outputs written from local data: `createDataFrame` (twice: a rerun of the same
    step), `VALUES`, a pivot; `CREATE TABLE t (k INT, v STRING)` and an INSERT VALUES."""
    from pyspark.sql import functions as F

    data = root / "data"
    raw = customers(spark)
    for _ in range(2):
        raw.write.mode("overwrite").parquet(str(data / "raw" / "customers"))
    values = spark.sql("SELECT * FROM VALUES (1, 'a', 2.5) AS v(k, v, w)")
    values.write.mode("overwrite").parquet(str(data / "values"))
    pivot = raw.groupBy("city").pivot("name", ["ann", "bob", "cy"]).agg(F.sum("id"))
    pivot.write.mode("overwrite").parquet(str(data / "pivot"))
    spark.sql("CREATE TABLE t (k INT, v STRING)")
    spark.sql("INSERT INTO t VALUES (1, 'a')")


def table_ddl(spark: SparkSession, root: Path) -> None:
    """DDL of external and managed session-catalog tables after and without writes to them."""
    data = root / "data"
    spark.sql(f"CREATE TABLE ext (k INT, v STRING) USING parquet LOCATION '{data / 'ext'}'")
    spark.sql("INSERT INTO ext VALUES (1, 'a')")
    spark.sql("ALTER TABLE ext ADD COLUMNS (w DOUBLE)")
    spark.table("ext").write.mode("overwrite").parquet(str(data / "ext_copy"))
    spark.sql("DROP TABLE ext")
    spark.sql("CREATE DATABASE db")
    spark.sql("CREATE TABLE db.m (k INT, v STRING) USING parquet")
    spark.sql("INSERT INTO db.m VALUES (1, 'a')")
    spark.sql("TRUNCATE TABLE db.m")
    spark.sql("ALTER TABLE db.m ADD COLUMNS (w DOUBLE)")
    spark.sql("DROP TABLE db.m")
    spark.sql(f"CREATE TABLE ext2 USING parquet LOCATION '{data / 'ext2'}' AS SELECT 1 AS k")
    spark.sql("ALTER TABLE ext2 RENAME TO ext2b")
    spark.sql("DROP TABLE ext2b")
    spark.sql("CREATE TABLE m2 USING parquet AS SELECT 1 AS k")
    spark.sql("ALTER TABLE m2 RENAME TO m3")
    spark.sql("INSERT INTO m3 VALUES (2)")
    spark.sql("DROP TABLE m3")
    customers(spark).write.option("path", str(data / "ext3")).saveAsTable("ext3")
    spark.sql("ALTER TABLE ext3 ADD COLUMNS (w DOUBLE)")
    spark.sql("DROP TABLE ext3")
    spark.sql(f"CREATE TABLE unseen (k INT) USING parquet LOCATION '{data / 'unseen'}'")
    spark.sql("DROP TABLE unseen")


def stream_files(spark: SparkSession, root: Path) -> None:
    """File sources that read several files in one micro-batch: to parquet, joined with a
    static parquet dataset, and into `foreachBatch` writing parquet."""
    from pyspark.sql import functions as F

    data = root / "data"
    for directory, count in (("in", 3), ("in2", 2)):
        (data / directory).mkdir(parents=True)
        for i in range(count):
            line = json.dumps({"id": i, "kind": f"k{i}"}) + "\n"
            (data / directory / f"f{i}.json").write_text(line)
    static = spark.createDataFrame([(0, "zero"), (1, "one")], "id long, label string")
    static.write.parquet(str(data / "static"))

    def source(directory: str) -> DataFrame:
        return spark.readStream.schema("id long, kind string").json(str(data / directory))

    def run(frame: DataFrame, name: str, sink: Callable[[DataFrame, int], None] | None) -> None:
        writer = frame.writeStream.queryName(name).trigger(availableNow=True)
        writer = writer.option("checkpointLocation", str(root / "checkpoints" / name))
        if sink is None:
            writer = writer.format("parquet").option("path", str(data / name))
        else:
            writer = writer.foreachBatch(sink)
        writer.start().awaitTermination()

    def each(batch: DataFrame, batch_id: int) -> None:
        batch.withColumn("batch", F.lit(batch_id)).write.mode("append").parquet(str(data / "each"))

    run(source("in"), "out", None)
    run(source("in2").join(spark.read.parquet(str(data / "static")), "id"), "joined", None)
    run(source("in"), "each", each)


SHAPES: dict[str, Callable[[SparkSession, Path], None]] = {
    "local_data": local_data,
    "table_ddl": table_ddl,
    "stream_files": stream_files,
}


def child(shape: str, root: Path) -> None:
    spark = session(root, f"marquez-{shape.replace('_', '-')}")
    try:
        SHAPES[shape](spark, root)
    finally:
        spark.stop()


def scrub(line: str, root: Path) -> str:
    """One log line without the machine: placeholder paths and host, a trimmed environment."""
    text = trimmed(line, KEPT_PROPERTIES)
    for prefix in (str(root.resolve()), str(root)):
        text = text.replace(prefix, PLACEHOLDER)
    return text.replace(socket.gethostname(), HOST_PLACEHOLDER)


def generate(shape: str) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "events").mkdir()
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        command = [sys.executable, str(Path(__file__).resolve()), "--run", shape, str(root)]
        subprocess.run(command, env=env, cwd=root, check=True, timeout=CHILD_TIMEOUT)
        (log,) = (root / "events").iterdir()
        lines = [scrub(line, root) for line in log.read_text().splitlines() if line.strip()]
        body = ("\n".join(lines) + "\n").encode()
        OUT.mkdir(parents=True, exist_ok=True)
        out = OUT / f"{shape}.jsonl.zst"
        out.write_bytes(zstandard.ZstdCompressor(level=19).compress(body))
        for dataset in FOOTERS[shape]:
            first = min((root / dataset).glob("part-*.parquet"))
            target = OUT / dataset / first.name
            shutil.rmtree(target.parent, ignore_errors=True)
            target.parent.mkdir(parents=True)
            shutil.copyfile(first, target)
    print(f"{out.name}: {len(lines)} events, {time.monotonic() - started:.1f} s")


def main(shapes: list[str]) -> int:
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        sys.exit(f"unknown shape(s) {sorted(unknown)}; choose from {', '.join(SHAPES)}")
    for shape in shapes or SHAPES:
        generate(shape)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        sys.exit(main(sys.argv[1:]))
