"""A real PySpark program that sets the OpenLineage Spark listener's per-application keys.

Usage: python openlineage_conf.py OUT_DIR

The session sets `spark.openlineage.namespace`, `spark.openlineage.appName`,
`spark.openlineage.job.tags`, `spark.openlineage.run.tags` and the `parent*` keys, as a
scheduler launching a job for the listener would, then writes one parquet file. Its
uncompressed single-file log lands in `OUT_DIR/events/`; `OUT_DIR/app_id` names it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

CONF = {
    "spark.openlineage.namespace": "team-payments",
    "spark.openlineage.appName": "nightly_ledger",
    "spark.openlineage.job.tags": "spark;team:payments;tier:gold:OWNER;escaped\\:key:a\\;b",
    "spark.openlineage.run.tags": "run;attempt:first",
    "spark.openlineage.parentJobNamespace": "airflow",
    "spark.openlineage.parentJobName": "ledger_dag.spark_task",
    "spark.openlineage.parentRunId": "019a5f3e-0000-7000-8000-00000000000a",
}


def main() -> None:
    root = Path(sys.argv[1]).resolve()
    events = root / "events"
    events.mkdir(parents=True, exist_ok=True)
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("Ledger Job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", events.as_uri())
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")
    )
    for key, value in CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        (root / "app_id").write_text(spark.sparkContext.applicationId)
        frame = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
        frame.write.mode("overwrite").parquet(str(root / "out" / "ledger"))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
