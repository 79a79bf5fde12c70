"""Small PySpark applications run one after another in one JVM, each when the test says so:

    python sparkjob.py WORK NAME=EVENT_DIR [NAME=EVENT_DIR ...]

For every NAME in order: wait for the file WORK/go-NAME, run one application (parquet write,
read back, aggregate, JSON write) with its event log in EVENT_DIR, stop it, and write
WORK/done-NAME holding {"app_id": ..., "seconds": ...} (session start to stop). The test
changes the collector's behaviour between applications. The script gives up after TIMEOUT
seconds without a signal, so it never outlives a test.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session, sql_settings, wait_for

TIMEOUT = 600.0


def application(name: str, event_dir: Path, work: Path) -> str:
    settings = sql_settings("2", str(work / "warehouse"))
    log = event_log(event_dir.as_uri())
    spark = local_session("local[2]", f"reliability {name}", settings, log)
    app_id = spark.sparkContext.applicationId
    data = work / "data" / name
    numbers = spark.range(0, 2000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
    numbers.write.parquet(str(data / "numbers"))
    counts = spark.read.parquet(str(data / "numbers")).groupBy("k").count()
    counts.write.json(str(data / "counts"))
    spark.stop()
    return str(app_id)


def main(work: Path, apps: list[str]) -> None:
    for spec in apps:
        name, _, event_dir = spec.partition("=")
        wait_for(work / f"go-{name}", TIMEOUT)
        began = time.monotonic()
        app_id = application(name, Path(event_dir), work)
        seconds = round(time.monotonic() - began, 3)
        done = work / f"done-{name}"
        done.with_suffix(".tmp").write_text(json.dumps({"app_id": app_id, "seconds": seconds}))
        done.with_suffix(".tmp").rename(done)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
