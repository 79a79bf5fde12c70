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

from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session

TIMEOUT = 180.0


def main(event_dir: Path, work: Path) -> None:
    spark = local_session("local[2]", "long sql job", event_log(event_dir.as_uri()))
    release = str(work / "release")
    started = str(work / "started")
    app_id = spark.sparkContext.applicationId

    @udf("long")
    def held(value: int) -> int:
        # Both tasks start at once, each in its own Python worker: a temporary name shared by
        # them let one worker's rename take the other's file, whose rename then failed the
        # task, the job, and the application before the test could stop it.
        tmp = f"{started}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(app_id)
        os.replace(tmp, started)
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    spark.range(0, 4, 1, 2).select(held("id").alias("id")).write.parquet(str(work / "out"))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
