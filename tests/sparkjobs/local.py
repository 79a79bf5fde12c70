"""What the suite's PySpark programs share: a local session on loopback, event log settings,
waiting for a control file, writing a file atomically, the inputs they read and a write the
driver cancels.

The programs run as scripts (`python X.py`, `spark-submit X.py`, possibly under another
PySpark environment); each puts the repository first on `sys.path` before importing this
module. It imports only PySpark.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import udf

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


#: Hand-written input files, by name: what the scenarios and the side-by-side shapes read.
INPUT_FILES = {
    "people.csv": "name,age,city\nada,36,london\nalan,41,wilmslow\n",
    "people_new.json": (
        '{"name": "grace", "city": "arlington"}\n{"name": "edsger", "city": "austin"}\n'
    ),
    "events.json": (
        '{"id": 1, "kind": "click", "score": 1.5}\n{"id": 2, "kind": "view", "score": 0.5}\n'
    ),
    "customers.csv": "customer_id,name\n1,ada\n2,alan\n",
    "orders.json": (
        '{"order_id": 10, "customer_id": "1", "amount": 5.0}\n'
        '{"order_id": 11, "customer_id": "2", "amount": 7.5}\n'
    ),
}


def write_inputs(folder: Path) -> None:
    """The files of INPUT_FILES into `folder`, which exists."""
    for name, text in INPUT_FILES.items():
        (folder / name).write_text(text)


def people_frame(spark: SparkSession) -> DataFrame:
    """Four people: id, name, age, city, salary (one null) and tags (one empty)."""
    return spark.createDataFrame(
        [
            (1, "ada", 36, "london", 120.0, ["math", "code"]),
            (2, "alan", 41, "wilmslow", 100.0, ["code"]),
            (3, "grace", 17, "new york", 90.0, []),
            (4, "edsger", 72, "rotterdam", None, ["proofs", "code", "go"]),
        ],
        "id long, name string, age int, city string, salary double, tags array<string>",
    )


def orders_frame(spark: SparkSession) -> DataFrame:
    """Four orders of people_frame's people (none of grace's)."""
    return spark.createDataFrame(
        [(10, 1, 12.5), (11, 1, 3.0), (12, 2, 7.25), (13, 4, 1.0)],
        "order_id long, customer_id long, amount double",
    )


def adults_projected(people: DataFrame) -> DataFrame:
    """people_frame's adults: a column kept, renamed, computed, hashed, chosen by a condition
    and a literal."""
    return people.where("age > 18").select(
        "id",
        F.col("name").alias("full_name"),
        F.upper("name").alias("name_upper"),
        (F.col("age") + 1).alias("age_next"),
        F.sha2("name", 256).alias("name_hash"),
        F.when(F.col("age") > 65, "senior").otherwise(F.col("city")).alias("segment"),
        F.lit(1).alias("one"),
    )


def city_totals(people: DataFrame) -> DataFrame:
    """people_frame grouped by city: a count, a sum, a mean, a max, a list, a distinct count."""
    return people.groupBy("city").agg(
        F.count("*").alias("people"),
        F.sum("salary").alias("payroll"),
        F.avg("age").alias("mean_age"),
        F.max("name").alias("last_name"),
        F.collect_list("name").alias("names"),
        F.countDistinct("age").alias("ages"),
    )


def cancelled_write(
    spark: SparkSession,
    control: Path,
    group: str,
    target: str,
    task_timeout: float,
    wait_timeout: float,
    *,
    must_run: bool,
) -> None:
    """A parquet write to `target` in the job group `group`, which the driver cancels once its
    tasks run: they mark `control/running`, then wait until killed (`task_timeout` s at most).
    The driver waits `wait_timeout` s for the mark (TimeoutError if `must_run`, else it
    cancels anyway) and as long for the write to end. Raises what the write raised."""
    running, context = control / "running", spark.sparkContext
    errors: list[BaseException] = []

    @udf("long")  # nested, so that PySpark ships it by value: workers never import this module
    def slow(value: int) -> int:
        running.touch()
        deadline = time.monotonic() + task_timeout
        while time.monotonic() < deadline:  # ends when the task is killed
            time.sleep(0.05)
        return value

    def write() -> None:
        context.setJobGroup(group, "cancelled by the driver", True)
        try:
            frame = spark.range(0, 4, 1, 2).select(slow("id").alias("id"))
            frame.write.parquet(target)
        except Exception as error:
            errors.append(error)

    thread = InheritableThread(target=write)
    thread.start()
    if must_run:
        wait_for(running, wait_timeout)
    else:
        deadline = time.monotonic() + wait_timeout
        while not running.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    context.cancelJobGroup(group)
    thread.join(timeout=wait_timeout)
    if errors:
        raise errors[0]
