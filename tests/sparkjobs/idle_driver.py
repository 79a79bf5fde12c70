"""A Spark application that writes, idles until told, writes again and stops: the shape of a
notebook, a spark-shell or a Thrift server.
python idle_driver.py EVENT_DIR CONTROL_DIR UI [MASTER]

UI is `on` (the driver UI on loopback, on a port Spark picks from 4040) or `off`. MASTER is
`local[1]` by default; a standalone master's `spark://host:port` runs one small executor.
Protocol (files in CONTROL_DIR; the test creates `go-*`, this script the rest):
    started       the application id, once the session runs
    first-done    after the first write
    go-second     write again, then `second-done`
    go-stop       stop the session (ApplicationEnd), then `stopped`
The script gives up after TIMEOUT seconds without a signal, so it never outlives a test.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

TIMEOUT = 240.0


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path} within {TIMEOUT} s")
        time.sleep(0.05)


def main(event_dir: Path, control: Path, ui: str, master: str) -> None:
    spark = (
        SparkSession.builder.master(master)
        .appName(f"idle driver ui {ui}")
        .config("spark.ui.enabled", str(ui == "on").lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(control / "warehouse"))
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", event_dir.as_uri())
        .config("spark.cores.max", "1")  # one executor of one core on a standalone master
        .config("spark.executor.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    (control / "started").write_text(spark.sparkContext.applicationId)
    spark.range(5).write.parquet(str(control / "first"))
    (control / "first-done").touch()
    wait_for(control / "go-second")
    spark.range(7).write.parquet(str(control / "second"))
    (control / "second-done").touch()
    wait_for(control / "go-stop")
    spark.stop()
    (control / "stopped").touch()


if __name__ == "__main__":
    os.umask(0o027)
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], (sys.argv[4:] or ["local[1]"])[0])
