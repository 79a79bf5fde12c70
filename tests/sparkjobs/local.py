"""What the suite's PySpark programs share: a local session on loopback, event log settings,
waiting for a control file and writing a file atomically.

The programs run as scripts (`python X.py`, `spark-submit X.py`, possibly under another
PySpark environment); each puts the repository first on `sys.path` before importing this
module. It imports only PySpark.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

QUIET_LOOPBACK = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def local_builder(master: str, name: str, *confs: Mapping[str, str]) -> SparkSession.Builder:
    """A builder for `master` named `name`: no UI, no progress bar, the driver on loopback,
    then every key of `confs` in order (a later mapping overrides an earlier one)."""
    builder = SparkSession.builder.master(master).appName(name)
    merged: dict[str, str] = dict(QUIET_LOOPBACK)
    for conf in confs:
        merged.update(conf)
    for key, value in merged.items():
        builder = builder.config(key, value)
    return builder


def started(builder: SparkSession.Builder, log_level: str = "ERROR") -> SparkSession:
    """The builder's session, Spark's own logging set to `log_level`."""
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def local_session(master: str, name: str, *confs: Mapping[str, str]) -> SparkSession:
    """`started(local_builder(master, name, *confs))`."""
    return started(local_builder(master, name, *confs))


def event_log(
    directory: str, *, compress: bool | None = None, rolling: bool | None = None
) -> dict[str, str]:
    """Event logging on into `directory` (a URI or a path); `compress` and `rolling` set when
    given, Spark's defaults otherwise."""
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory}
    if compress is not None:
        conf["spark.eventLog.compress"] = str(compress).lower()
    if rolling is not None:
        conf["spark.eventLog.rolling.enabled"] = str(rolling).lower()
    return conf


def sql_settings(partitions: str, warehouse: str | None = None) -> dict[str, str]:
    """`partitions` shuffle partitions; catalog tables under `warehouse` when given."""
    conf = {"spark.sql.shuffle.partitions": partitions}
    if warehouse is not None:
        conf["spark.sql.warehouse.dir"] = warehouse
    return conf


def wait_for(path: Path | str, timeout: float) -> None:
    """Returns once `path` exists; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path} within {timeout} s")
        time.sleep(0.05)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
