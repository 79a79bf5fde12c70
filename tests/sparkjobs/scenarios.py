"""Real PySpark pipelines for the end-to-end tests, many small applications in one JVM.

    python scenarios.py batch OUT_DIR [POSTGRES_JSON]
    python scenarios.py live EVENT_DIR CONTROL_DIR APP_NAME [APP_NAME ...]

`batch`: every application of `batch_main` in turn, each its own SparkSession with its own
app name (and confs), logging into `OUT_DIR/events` under Spark 4's defaults (rolling layout,
zstd) unless the scenario says otherwise. Data lands in `OUT_DIR/data`, catalog tables in
`OUT_DIR/warehouse`. `OUT_DIR/manifest.json` is rewritten after every application: app ids
by scenario, what each one raised, how long it all took. POSTGRES_JSON (`{"url", "user",
"password", "jar"}`, the jar being the JDBC driver) enables the JDBC scenarios; without it
they are listed as skipped. The last scenario does its work and then leaves with
`sys.exit(3)` without stopping Spark, so this process exits 3 by design.

`live`: applications that advance one command at a time, for tests that watch them run (and
kill them). For each APP_NAME in turn the session starts and `CONTROL_DIR/started-<i>` gets
`{"app_id", "jvm_pid"}`; then command files `CONTROL_DIR/cmd-<n>` (n = 1, 2, ... over the
whole run) are executed in order, each acknowledged with `CONTROL_DIR/done-<n>`:
    write NAME   a parquet write of a few rows to CONTROL_DIR/data/NAME
    hold NAME    a parquet write whose tasks write `holding-NAME` once running, then wait
                 for `release-NAME` (or are killed with the driver)
    stop         spark.stop(); the next APP_NAME starts, or the script ends
The script gives up after TIMEOUT seconds without a command, so it never outlives a test.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import udf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs import local
from tests.sparkjobs.local import (
    cancelled_write,
    event_log,
    local_session,
    sql_settings,
    write_atomic,
    write_inputs,
)

TIMEOUT = 180.0
EXIT_CODE = 3  # what the last batch scenario exits with


def session(name: str, event_dir: Path, warehouse: Path, conf: dict[str, str]) -> SparkSession:
    settings = sql_settings("2", str(warehouse))
    return local_session("local[2]", name, settings, event_log(event_dir.as_uri()), conf)


def wait_for(path: Path, timeout: float = TIMEOUT) -> None:
    local.wait_for(path, timeout)


# -- batch scenarios ----------------------------------------------------------------------


@dataclass
class Batch:
    out: Path
    postgres: dict[str, str] | None
    started: float = field(default_factory=time.monotonic)
    apps: dict[str, dict[str, Any]] = field(default_factory=dict)
    common: dict[str, str] = field(default_factory=dict)  # conf of every application

    @property
    def data(self) -> Path:
        return self.out / "data"

    def save(self) -> None:
        manifest = {
            "apps": self.apps,
            "data": str(self.data),
            "warehouse": str(self.out / "warehouse"),
            "seconds": round(time.monotonic() - self.started, 2),
        }
        write_atomic(self.out / "manifest.json", json.dumps(manifest, indent=2) + "\n")

    def run(
        self,
        key: str,
        name: str,
        job: Callable[[SparkSession, Batch], None],
        conf: dict[str, str] | None = None,
        *,
        stop: bool = True,
    ) -> None:
        """One application: a session, the job, what it raised, stop (unless told not to)."""
        conf = {**self.common, **(conf or {})}
        spark = session(name, self.out / "events", self.out / "warehouse", conf)
        record: dict[str, Any] = {"app_id": spark.sparkContext.applicationId, "name": name}
        self.apps[key] = record
        self.save()
        try:
            job(spark, self)
        except Exception as error:  # the failure scenarios expect theirs; recorded for tests
            record["error"] = f"{type(error).__name__}: {str(error)[:2000]}"
        self.save()
        if stop:
            spark.stop()


def parquet_job(spark: SparkSession, batch: Batch) -> None:
    rows = spark.range(0, 100).selectExpr("id", "id % 5 AS bucket", "CAST(id AS STRING) AS label")
    rows.write.parquet(str(batch.data / "parquet_in"))
    source = spark.read.parquet(str(batch.data / "parquet_in"))
    source.where("bucket = 1").write.mode("overwrite").parquet(str(batch.data / "parquet_out"))


def csv_job(spark: SparkSession, batch: Batch) -> None:
    people = spark.read.option("header", "true").option("inferSchema", "true")
    frame = people.csv(str(batch.data / "people.csv")).select("name", "age")
    frame.write.option("header", "true").csv(str(batch.data / "csv_out"))


def json_job(spark: SparkSession, batch: Batch) -> None:
    events = spark.read.json(str(batch.data / "events.json"))
    events.where("score > 1").select("id", "kind").write.json(str(batch.data / "json_out"))


def join_job(spark: SparkSession, batch: Batch) -> None:
    customers = spark.read.option("header", "true").csv(str(batch.data / "customers.csv"))
    orders = spark.read.json(str(batch.data / "orders.json"))
    joined = orders.join(customers, "customer_id").select("order_id", "name", "amount")
    joined.write.parquet(str(batch.data / "join_out"))


def union_job(spark: SparkSession, batch: Batch) -> None:
    older = spark.read.option("header", "true").csv(str(batch.data / "people.csv"))
    newer = spark.read.json(str(batch.data / "people_new.json"))
    both = older.select("name", "city").unionByName(newer.select("name", "city"))
    both.write.json(str(batch.data / "union_out"))


def tables_job(spark: SparkSession, batch: Batch) -> None:
    spark.sql("CREATE TABLE sales USING parquet AS SELECT id, id * 10 AS amount FROM range(5)")
    spark.sql("INSERT INTO sales SELECT id + 100, id FROM range(3)")
    spark.table("sales").where("amount > 10").write.saveAsTable("big_sales")


def jdbc_job(spark: SparkSession, batch: Batch) -> None:
    assert batch.postgres is not None
    url, props = batch.postgres["url"], jdbc_properties(batch.postgres)
    orders = spark.range(0, 20).selectExpr("id AS order_id", "id * 3 AS amount")
    orders.write.jdbc(url, "public.orders", mode="overwrite", properties=props)
    back = spark.read.jdbc(url, "public.orders", properties=props)
    back.where("amount > 30").write.parquet(str(batch.data / "jdbc_out"))


def jdbc_redacted_job(spark: SparkSession, batch: Batch) -> None:
    assert batch.postgres is not None
    url, props = batch.postgres["url"], jdbc_properties(batch.postgres)
    spark.range(0, 3).write.jdbc(url, "public.hidden", mode="overwrite", properties=props)


def jdbc_properties(postgres: dict[str, str]) -> dict[str, str]:
    return {
        "user": postgres["user"],
        "password": postgres["password"],
        "driver": "org.postgresql.Driver",
    }


def divide_by_zero_job(spark: SparkSession, batch: Batch) -> None:
    # ANSI mode (Spark 4's default) turns a division by zero into a runtime error
    ratios = spark.read.parquet(str(batch.data / "parquet_in")).selectExpr(
        "id", "10 / (bucket - bucket) AS ratio"
    )
    ratios.write.parquet(str(batch.data / "ratios"))


def cancel_job(spark: SparkSession, batch: Batch) -> None:
    """A write in a job group, cancelled by the driver once its tasks run."""
    control = batch.out / "cancel"
    control.mkdir()
    target = str(batch.data / "cancelled_out")
    cancelled_write(spark, control, "scenario-group", target, TIMEOUT, 120, must_run=True)


#: A literal with a newline: Spark prints it raw into the plan description, so the line after
#: the newline is the rest of the literal, here shaped like a detail line without its colon
#: (a capital, 3,000 spaces), the shape on which a backtracking parser took half a minute.
SPACES_LITERAL = "\nA" + " " * 3000 + "x"


def spaces_literal_job(spark: SparkSession, batch: Batch) -> None:
    rows = spark.read.parquet(str(batch.data / "parquet_in"))
    rows.where(rows.label != SPACES_LITERAL).write.parquet(str(batch.data / "spaces_out"))


def single_file_job(spark: SparkSession, batch: Batch) -> None:
    spark.range(0, 10).selectExpr("id", "id * id AS square").write.json(
        str(batch.data / "single_out")
    )


def exit_job(spark: SparkSession, batch: Batch) -> None:
    spark.range(0, 10).write.parquet(str(batch.data / "exit_out"))


def inputs(data: Path) -> None:
    """The input files the scenarios read, written by hand."""
    data.mkdir(parents=True)
    write_inputs(data)


def batch_main(out: Path, postgres: dict[str, str] | None) -> None:
    inputs(out / "data")
    (out / "events").mkdir(parents=True)
    batch = Batch(out, postgres)
    if postgres is not None:
        # The JVM starts with the first session: only its conf puts the driver on the
        # driver's class path, which JDBC needs on the driver side.
        batch.common["spark.jars"] = postgres["jar"]
    batch.run("parquet", "scenario parquet", parquet_job)
    batch.run("csv", "scenario csv", csv_job)
    batch.run("json", "scenario json", json_job)
    batch.run("join", "scenario join", join_job)
    batch.run("union", "scenario union", union_job)
    batch.run("tables", "scenario tables", tables_job)
    if postgres is not None:
        # The operator's choice: redact only password-like options, so urls stay in plans.
        shown = {"spark.sql.redaction.options.regex": "(?i)secret|password"}
        batch.run("jdbc", "scenario jdbc", jdbc_job, shown)
        batch.run("jdbc_redacted", "scenario jdbc redacted", jdbc_redacted_job)
    else:
        batch.apps["jdbc"] = batch.apps["jdbc_redacted"] = {"skipped": "no PostgreSQL server"}
    batch.run("divide_by_zero", "scenario divide by zero", divide_by_zero_job)
    batch.run("cancelled", "scenario cancelled", cancel_job)
    batch.run("spaces_literal", "scenario spaces literal", spaces_literal_job)
    batch.run(
        "single_file",
        "scenario single file",
        single_file_job,
        {"spark.eventLog.rolling.enabled": "false"},
    )
    batch.run("exit_code", "scenario exit code", exit_job, stop=False)
    batch.save()
    sys.exit(EXIT_CODE)  # without spark.stop(): the JVM's shutdown hook ends the application


# -- live applications -------------------------------------------------------------------


def live_main(event_dir: Path, control: Path, names: list[str]) -> None:
    data = control / "data"
    seq = 0
    for index, name in enumerate(names, start=1):
        spark = session(name, event_dir, control / "warehouse", {})
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        pid = int(jvm.java.lang.ProcessHandle.current().pid())
        started = {"app_id": spark.sparkContext.applicationId, "jvm_pid": pid}
        write_atomic(control / f"started-{index}", json.dumps(started))
        while True:
            seq += 1
            command_file = control / f"cmd-{seq}"
            wait_for(command_file)
            command, _, arg = command_file.read_text().strip().partition(" ")
            if command == "stop":
                spark.stop()
                (control / f"done-{seq}").touch()
                break
            if command == "write":
                few(spark).write.parquet(str(data / arg))
            elif command == "hold":
                held(spark, control, arg).write.parquet(str(data / arg))
            else:
                raise ValueError(f"unknown command {command!r}")
            (control / f"done-{seq}").touch()


def few(spark: SparkSession) -> DataFrame:
    return spark.range(0, 4, 1, 2).selectExpr("id", "id * 2 AS doubled")


def held(spark: SparkSession, control: Path, name: str) -> DataFrame:
    holding, release = control / f"holding-{name}", control / f"release-{name}"

    @udf("long")
    def hold(value: int) -> int:
        holding.touch()
        deadline = time.monotonic() + TIMEOUT
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    return few(spark).select(hold("id").alias("id"), "doubled")


def main(argv: list[str]) -> None:
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "batch" and len(argv) in (3, 4):
        postgres = json.loads(argv[3]) if len(argv) == 4 else None
        batch_main(Path(argv[2]), postgres)
    elif mode == "live" and len(argv) >= 5:
        live_main(Path(argv[2]), Path(argv[3]), argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
