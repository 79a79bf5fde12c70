"""A real PySpark program whose event logs show which executions are the user's steps.

Usage: python user_steps.py OUT_DIR

The same program (`program`) runs twice, as two applications in one JVM (a session is
stopped and a new one started), so its job names can be compared run against run. Each
run's uncompressed single-file log lands in `OUT_DIR/events/`; `OUT_DIR/manifest.json`
lists the application ids in run order and the data directory.

What it does, in order (tests/test_steps.py asserts on it):
* reads CSV with `header` + `inferSchema`, with `header` only, with neither, with
  `inferSchema` only; JSON with
  inferred and with a given schema; parquet with `mergeSchema` (Spark-internal executions
  and jobs, no step of the program);
* writes each of them to parquet (one step each);
* read-only actions: `count`, `collect`, `show`, `take` on one parquet output;
* `spark.sql` CTAS, then two INSERTs into that table from two different sources (two
  steps whose plain name is the same), then the first INSERT again (the same step).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session, sql_settings


def write_inputs(data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    (data / "people.csv").write_text("id,name,age\n1,ann,31\n2,bob,45\n3,cid,27\n")
    (data / "plain.csv").write_text("1,ann\n2,bob\n")
    (data / "events.json").write_text(
        '{"id": 1, "kind": "click"}\n{"id": 2, "kind": "view"}\n{"id": 3, "kind": "click"}\n'
    )


def program(spark: SparkSession, data: Path, out: Path, warehouse: Path) -> None:
    """The program's steps (module docstring); paths are the same on every run."""
    people = (
        spark.read.option("header", True).option("inferSchema", True).csv(str(data / "people.csv"))
    )
    headed = spark.read.option("header", True).csv(str(data / "people.csv"))
    plain = spark.read.csv(str(data / "plain.csv"))
    plain_inferred = spark.read.option("inferSchema", True).csv(str(data / "plain.csv"))
    inferred = spark.read.json(str(data / "events.json"))
    typed = spark.read.schema("id long, kind string").json(str(data / "events.json"))
    people.write.mode("overwrite").parquet(str(out / "people_inferred"))
    headed.write.mode("overwrite").parquet(str(out / "people_headed"))
    plain.write.mode("overwrite").parquet(str(out / "plain"))
    plain_inferred.write.mode("overwrite").parquet(str(out / "plain_inferred"))
    inferred.write.mode("overwrite").parquet(str(out / "events_inferred"))
    typed.write.mode("overwrite").parquet(str(out / "events_typed"))
    merged = spark.read.option("mergeSchema", True).parquet(str(out / "people_inferred"))
    merged.write.mode("overwrite").parquet(str(out / "people_merged"))

    events = spark.read.parquet(str(out / "events_typed"))
    events.count()
    events.collect()
    events.show()
    events.take(1)

    spark.sql("DROP TABLE IF EXISTS people_table")
    # the catalog lives as long as the session: the table's files outlive it
    shutil.rmtree(warehouse / "people_table", ignore_errors=True)
    inferred_path, headed_path = out / "people_inferred", out / "people_headed"
    spark.sql(
        f"CREATE TABLE people_table USING parquet AS SELECT id, name FROM parquet.`{inferred_path}`"
    )
    from_headed = f"SELECT CAST(id AS INT), name FROM parquet.`{headed_path}`"
    spark.sql(f"INSERT INTO people_table {from_headed}")
    spark.sql(f"INSERT INTO people_table SELECT id, name FROM parquet.`{out / 'people_merged'}`")
    spark.sql(f"INSERT INTO people_table {from_headed}")

    # an RDD save's path never reaches the log: the program names it in a job property
    sc = spark.sparkContext
    shutil.rmtree(out / "rdd_lines", ignore_errors=True)
    sc.setLocalProperty("spark.lineageAgent.output", str(out / "rdd_lines"))
    sc.parallelize(["a", "b"], 1).saveAsTextFile(str(out / "rdd_lines"))
    sc.parallelize([1, 2], 1).count()  # the property is still set, but a count saves nothing
    sc.setLocalProperty("spark.lineageAgent.output", None)  # type: ignore[arg-type]  # unsets
    shutil.rmtree(out / "rdd_unnamed", ignore_errors=True)
    sc.parallelize(["c"], 1).saveAsTextFile(str(out / "rdd_unnamed"))  # no property: no run


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    events = root / "events"
    events.mkdir(parents=True, exist_ok=True)
    data, out = root / "data", root / "out"
    write_inputs(data)
    settings = sql_settings("1", (root / "warehouse").as_uri())
    log = event_log(events.as_uri(), compress=False, rolling=False)
    extra = {
        "spark.executor.memory": "512m",
        "spark.test.password": "hunter2-secret",  # never in a facet
    }
    app_ids = []
    for _ in range(2):
        spark = local_session("local[1]", "User Steps", settings, log, extra)
        app_ids.append(spark.sparkContext.applicationId)
        try:
            program(spark, data, out, root / "warehouse")
        finally:
            spark.stop()
    (root / "manifest.json").write_text(json.dumps({"app_ids": app_ids, "data": str(data)}))


if __name__ == "__main__":
    main()
