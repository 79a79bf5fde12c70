"""A Spark application that advances one step per signal file, so tests can watch its event
log grow: python running_app.py EVENT_DIR CONTROL_DIR LAYOUT CODEC [KEY=VALUE...]

EVENT_DIR is a local directory or a URL Spark writes to (s3a://...); each KEY=VALUE after the
codec is one more Spark property (the object-store tests pass spark.jars and fs.s3a settings).

Protocol (files in CONTROL_DIR; the test creates `go-*` and `release`, this script the rest):
    started      written once the session runs; holds the application id
    go-job       start a job whose tasks wait for `release` (its JobStart is flushed at once)
    job-done     written when that job has finished
    go-stop      stop the session (ApplicationEnd, then the completion rename)
    stopped      written after spark.stop() returned
The script gives up after TIMEOUT seconds without a signal, so it never outlives a test.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session

TIMEOUT = 180.0


def wait_for(path: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path} within {TIMEOUT} s")
        time.sleep(0.05)


def main(event_dir: str, control: Path, layout: str, codec: str, extra: dict[str, str]) -> None:
    warehouse = {"spark.sql.warehouse.dir": str(control / "warehouse")}
    uri = event_dir if "://" in event_dir else Path(event_dir).as_uri()
    log = event_log(uri, rolling=layout == "rolling", compress=codec != "none")
    if codec != "none":
        log["spark.eventLog.compression.codec"] = codec
    spark = local_session("local[2]", f"running {layout}-{codec}", warehouse, log, extra)
    (control / "started").write_text(spark.sparkContext.applicationId)

    wait_for(str(control / "go-job"))
    release = str(control / "release")

    def hold(value: int) -> int:
        wait_for(release)
        return value

    spark.sparkContext.parallelize(range(2), 2).map(hold).count()
    (control / "job-done").touch()

    wait_for(str(control / "go-stop"))
    spark.stop()
    (control / "stopped").touch()


if __name__ == "__main__":
    confs = dict(arg.split("=", 1) for arg in sys.argv[5:])
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], confs)
