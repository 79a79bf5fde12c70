"""A Spark application with a SQL write in flight until told otherwise, for `job stop` tests:
python long_sql.py EVENT_DIR WORK_DIR

Writes WORK_DIR/started (with the application id) once the write's tasks are running; the
tasks wait for WORK_DIR/release (they never get it in a stop test). Gives up after TIMEOUT.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

TIMEOUT = 180.0


def main(event_dir: Path, work: Path) -> None:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("long sql job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", event_dir.as_uri())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    release = str(work / "release")
    started = str(work / "started")
    app_id = spark.sparkContext.applicationId

    @udf("long")
    def held(value: int) -> int:
        with open(started + ".tmp", "w") as f:
            f.write(app_id)
        os.replace(started + ".tmp", started)
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    spark.range(0, 4, 1, 2).select(held("id").alias("id")).write.parquet(str(work / "out"))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
