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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session, sql_settings

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
    log = event_log(events.as_uri(), compress=False, rolling=False)
    spark = local_session("local[1]", "Ledger Job", sql_settings("1"), log, CONF)
    try:
        (root / "app_id").write_text(spark.sparkContext.applicationId)
        frame = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
        frame.write.mode("overwrite").parquet(str(root / "out" / "ledger"))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
