"""Regenerate the sample Spark event logs in `eventlogs/` (real PySpark 4.3, Java 17).

    .venv/bin/python tests/data/make_sample_logs.py [NAME ...]

Each sample is one application in its own driver process (its own JVM), so that it can be
signalled or killed like a real driver:

- `success`: a parquet write; a parquet read, group-by and JSON write (adaptive); an RDD
  job; spark.stop.
- `sql_failure`: an ANSI division by zero; a Python UDF raising in a write; a write to a path
  that exists; an unresolved column (an empty plan); an RDD job raising.
- `cancelled`: every way to cancel: job group, job group with a reason, session tag (from
  another thread, which does not reach the query: it finishes), interruptAll, SparkContext
  tag, web UI job kill, web UI stage kill, cancelAllJobs, cancelJob with a reason; then
  spark.stop while a SQL job runs.
- `sigterm`, `sigterm_python_parent`, `sigterm_spark_submit`: a quick write, then SIGTERM
  during a long write, to the driver JVM, to the Python driver, or to spark-submit (the driver
  then runs under spark-submit).
- `sigkill`: the same with SIGKILL to the driver JVM: no ApplicationEnd, the log stays in
  progress.

Every driver runs `local[2]` with a single-file, uncompressed event log; only the `cancelled`
one has its web UI on (bound to 127.0.0.1, for the UI kills). The log is then made
machine-independent: paths under the run's temporary directory become `/data/spark-exp/...`,
this script's directory `/data/spark-exp/scripts`, the virtual environment `/opt/venv`, and the
environment event keeps only a few Spark properties. The result is zstd-compressed to
`eventlogs/<name>.jsonl.zst`. With `--run NAME DIR` the script is the driver of one sample.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.data.logscrub import trimmed

HERE = Path(__file__).resolve().parent
OUT = HERE / "eventlogs"
PLACEHOLDER = "/data/spark-exp"
#: The driver's application name and the stem of its output directories, by sample.
APPS = {
    "success": ("exp-success", "success"),
    "sql_failure": ("exp-sql_failure", "fail"),
    "cancelled": ("exp-cancelled", "cancelled"),
    "sigterm": ("exp-sigterm", "sigterm"),
    "sigterm_python_parent": ("exp-sigterm_py", "sigterm_py"),
    "sigterm_spark_submit": ("exp-sigterm_submit", "sigterm_submit"),
    "sigkill": ("exp-sigkill", "sigkill"),
}
NAMES = tuple(APPS)
KEPT_PROPERTIES = {
    "spark.app.name",
    "spark.app.id",
    "spark.master",
    "spark.submit.deployMode",
    "spark.eventLog.dir",
    "spark.sql.shuffle.partitions",
}
TIMEOUT = 120.0  # seconds any wait may take; a blocked task gives up after this too
SQL_TAG = "sql-tag"
SQL_END = "SparkListenerSQLExecutionEnd"


# -- the parent: run a driver, signal it, keep its log ------------------------------------


def wait_for(path: Path, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path.name} within {timeout} s")
        time.sleep(0.05)


def driver_command(name: str, root: Path) -> list[str]:
    me = [str(Path(__file__).resolve()), "--run", name, str(root)]
    if name == "sigterm_spark_submit":
        import pyspark

        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        return [str(submit), "--master", "local[2]", *me]
    return [sys.executable, *me]


def run_driver(name: str, root: Path) -> None:
    """Start the driver of one sample, deliver its signal once its long task runs, reap it."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    control = root / "control"
    with open(root / "driver.log", "wb") as output:
        driver = subprocess.Popen(
            driver_command(name, root), env=env, stdout=output, stderr=subprocess.STDOUT
        )
        try:
            if name in ("sigterm", "sigterm_python_parent", "sigterm_spark_submit", "sigkill"):
                wait_for(control / "running-long")
                time.sleep(1.0)  # the task is well under way
                jvm = int((control / "jvm").read_text())
                target, sig = {
                    "sigterm": (jvm, signal.SIGTERM),
                    "sigterm_python_parent": (driver.pid, signal.SIGTERM),
                    "sigterm_spark_submit": (driver.pid, signal.SIGTERM),
                    "sigkill": (jvm, signal.SIGKILL),
                }[name]
                os.kill(target, sig)
                if name == "sigkill":
                    driver.kill()  # the Python side would wait for its gateway forever
            code = driver.wait(timeout=TIMEOUT)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
            if (control / "jvm").exists():  # never leave a JVM behind
                reap(int((control / "jvm").read_text()))
    print(f"{name}: driver exited {code}", file=sys.stderr)


def reap(pid: int) -> None:
    """Give a JVM whose Python driver is gone the time to shut down (it notices the closed
    gateway and runs Spark's shutdown hook), then kill it."""
    deadline = time.monotonic() + TIMEOUT
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def scrub(raw: str, prefixes: list[tuple[str, str]]) -> str:
    """Make one log line machine-independent: placeholder paths, trimmed environment."""
    text = trimmed(raw, KEPT_PROPERTIES)
    for prefix, replacement in prefixes:
        text = text.replace(prefix, replacement)
    return text


def shape_problem(name: str, lines: list[str]) -> str | None:
    """What keeps a log from showing its scenario; None if it does. Where the shutdown
    races with the last events (which of them still reach the log), the sample keeps the
    documented outcome: after SIGTERM to the JVM or to spark-submit the running write's
    SQLExecutionEnd is written, after SIGTERM to the Python driver it is missing; the
    applications that stop cleanly log the end of every task."""
    events = [json.loads(line) for line in lines]
    kinds = [e["Event"].rsplit(".", 1)[-1] for e in events]
    sql_ends = {e.get("executionId") for e, k in zip(events, kinds, strict=True) if k == SQL_END}
    ended = "SparkListenerApplicationEnd" in kinds
    if ended == (name == "sigkill"):
        return "ApplicationEnd missing" if not ended else "ApplicationEnd written"
    if name in ("sigterm", "sigterm_spark_submit") and 1 not in sql_ends:
        return "no SQLExecutionEnd for the interrupted write"
    if name == "sigterm_python_parent" and 1 in sql_ends:
        return "a SQLExecutionEnd for the interrupted write"
    unended = kinds.count("SparkListenerTaskStart") - kinds.count("SparkListenerTaskEnd")
    if name in ("success", "sql_failure") and unended:
        return f"{unended} task(s) without TaskEnd"
    return None


def generate(name: str, attempts: int = 8) -> None:
    started = time.monotonic()
    for attempt in range(1, attempts + 1):
        lines = run_once(name)
        problem = shape_problem(name, lines)
        if problem is None:
            break
        print(f"{name}: attempt {attempt}: {problem}", file=sys.stderr)
    else:
        raise RuntimeError(f"{name}: no log of the scenario in {attempts} attempts")
    body = ("\n".join(lines) + "\n").encode()
    OUT.mkdir(exist_ok=True)
    out = OUT / f"{name}.jsonl.zst"
    out.write_bytes(zstandard.ZstdCompressor(level=19).compress(body))
    print(
        f"{out.name}: {len(lines)} events, {len(body)} bytes, {out.stat().st_size} compressed, "
        f"{time.monotonic() - started:.1f} s"
    )


def run_once(name: str) -> list[str]:
    """One run of the sample's driver: its log, scrubbed, as lines."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for sub in ("events", "data", "control"):
            (root / sub).mkdir()
        run_driver(name, root)
        (log,) = (root / "events").iterdir()
        if (name == "sigkill") != log.name.endswith(".inprogress"):
            raise RuntimeError(f"{name}: unexpected log {log.name}")
        prefixes = [
            (str(root.resolve()), PLACEHOLDER),
            (str(root), PLACEHOLDER),
            (str(HERE), PLACEHOLDER + "/scripts"),
            (sys.prefix, "/opt/venv"),
            (str(HERE.parents[1]), PLACEHOLDER),
            (str(Path.home()), PLACEHOLDER),
        ]
        return [scrub(line, prefixes) for line in log.read_text().splitlines() if line]


def main(names: list[str]) -> int:
    unknown = set(names) - set(NAMES)
    if unknown:
        sys.exit(f"unknown sample(s) {sorted(unknown)}; choose from {', '.join(NAMES)}")
    started = time.monotonic()
    for name in names or NAMES:
        generate(name)
    print(f"all done in {time.monotonic() - started:.1f} s")
    return 0


# -- the drivers ----------------------------------------------------------------------------


def blocker(marker: Path, seconds: float = TIMEOUT) -> Callable[[Any], Any]:
    """A task function that says it runs (touches `marker`) and then takes `seconds`,
    unless Spark kills it first."""

    def block(value: Any) -> Any:
        marker.touch()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    return block


def driver(name: str, root: Path) -> None:
    from pyspark.sql import SparkSession

    app, _ = APPS[name]
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", str(name == "cancelled").lower())
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", (root / "events").as_uri())
        .config("spark.eventLog.rolling.enabled", "false")
        .config("spark.eventLog.compress", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    (root / "control" / "jvm").write_text(str(jvm.java.lang.ProcessHandle.current().pid()))
    DRIVERS[name](spark, root, name)


def success(spark: Any, root: Path, name: str) -> None:
    sc, data = spark.sparkContext, root / "data"
    spark.addTag("lineage-tag-1")
    sc.setJobGroup("grp-success", "the success sample")
    sc.setJobDescription("write parquet step")
    rows = spark.range(0, 20000).selectExpr("id", "id % 10 AS k", "CAST(id AS STRING) AS s")
    rows.write.mode("overwrite").parquet(str(data / "success_parquet"))
    sc.setJobDescription("aggregate and write json")
    spark.read.parquet(str(data / "success_parquet")).createOrReplaceTempView("t")
    agg = spark.sql("SELECT k, count(*) AS c, sum(id) AS total FROM t GROUP BY k")
    agg.write.mode("overwrite").json(str(data / "success_agg_json"))
    spark.removeTag("lineage-tag-1")
    sc.setJobGroup("grp-rdd", "a plain RDD job")
    sc.setJobDescription("plain rdd job")
    sc.parallelize(range(100), 2).map(lambda x: x * 2).sum()
    spark.stop()


def sql_failure(spark: Any, root: Path, name: str) -> None:
    from pyspark.sql.functions import udf

    sc, data = spark.sparkContext, root / "data"

    def expect_failure(action: Callable[[], Any]) -> None:
        try:
            action()
        except Exception as error:  # the sample is about these
            print("expected:", type(error).__name__, str(error)[:200], file=sys.stderr)
        else:
            raise AssertionError("the action was meant to fail")

    sc.setJobGroup("grp-fail-1", "division by zero")
    sc.setJobDescription("ansi divide by zero")
    boom = spark.range(0, 10).selectExpr("id", "10.0 / CAST(id - id AS DOUBLE) AS boom")
    expect_failure(boom.collect)

    @udf("long")
    def bad(x: int) -> int:
        if x == 2:
            raise ValueError(f"boom from udf {x}")
        return x

    sc.setJobGroup("grp-fail-2", "a Python UDF raises")
    sc.setJobDescription("python udf raises")
    frame = spark.range(0, 4).select(bad("id"))
    expect_failure(lambda: frame.write.mode("overwrite").parquet(str(data / "fail_out")))
    spark.range(0, 3).write.mode("overwrite").parquet(str(data / "exists"))
    sc.setJobGroup("grp-fail-3", "write to a path that exists")
    sc.setJobDescription("write to existing path")
    expect_failure(lambda: spark.range(0, 3).write.parquet(str(data / "exists")))
    sc.setJobGroup("grp-fail-4", "an unresolved column")
    expect_failure(lambda: spark.sql("SELECT no_such_col FROM range(3)").collect())
    sc.setJobGroup("grp-fail-5", "an RDD job raises")
    sc.setJobDescription("rdd job raising")
    expect_failure(sc.parallelize(range(4), 2).map(lambda x: 1 // (x - x)).collect)
    time.sleep(2.0)  # the end of the task killed with that job reaches the log before stop
    spark.stop()


def cancelled(spark: Any, root: Path, name: str) -> None:
    from pyspark import InheritableThread
    from pyspark.sql.functions import udf

    sc, control = spark.sparkContext, root / "control"
    jsc = sc._jsc.sc()
    step = 0

    def victim(description: str, work: str, cancel: Callable[[], Any], **how: Any) -> None:
        """Run one job (`rdd` or `sql`) in a thread and cancel it with `cancel` once its
        tasks run; `how` sets the thread's job group, session tag or SparkContext tag."""
        nonlocal step
        step += 1
        marker = control / f"running-{step}"
        block = blocker(marker, how.pop("seconds", TIMEOUT))

        def target() -> None:
            if "group" in how:
                sc.setJobGroup(how["group"], description, True)
            if "tag" in how:
                spark.addTag(how["tag"])
            if "sc_tag" in how:
                sc.addJobTag(how["sc_tag"])
            sc.setJobDescription(description)
            try:
                if work == "rdd":
                    sc.parallelize(range(2), 2).map(block).count()
                else:
                    spark.range(0, 2, 1, 2).select(udf(block, "long")("id")).collect()
            except Exception as error:  # the cancellation
                print("expected:", type(error).__name__, str(error)[:200], file=sys.stderr)

        thread = InheritableThread(target=target)
        thread.start()
        wait_for(marker)
        time.sleep(0.5)
        cancel()
        thread.join(timeout=TIMEOUT)
        if thread.is_alive():
            raise TimeoutError(f"{description}: still running")

    def active_job() -> int:
        (job,) = sc.statusTracker().getActiveJobsIds()
        return int(job)

    def active_stage() -> int:
        (stage,) = sc.statusTracker().getActiveStageIds()
        return int(stage)

    def ui_kill(what: str, ident: int) -> None:
        """What the kill links of the web UI do: POST with the page's CSRF token."""
        base = (sc.uiWebUrl or "").rstrip("/")
        page = urllib.request.urlopen(f"{base}/{what.split('/')[0]}/", timeout=10).read()
        found = re.search(rb'name="csrfToken" value="([^"]*)"', page) or re.search(
            rb'csrfToken["\']?\s*[:=]\s*["\']([^"\']+)', page
        )
        form = {"id": str(ident), "terminate": "true"}
        if found:
            form["csrfToken"] = found.group(1).decode()
        body = urllib.parse.urlencode(form).encode()
        url = f"{base}/{what}/kill/?id={ident}"
        urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=10).read()

    victim(
        "rdd job cancelled by group", "rdd", lambda: sc.cancelJobGroup("grp-cancel"),
        group="grp-cancel",
    )  # fmt: skip
    victim(
        "sql query cancelled by group", "sql",
        lambda: jsc.cancelJobGroup("grp-sql-cancel", "custom reason from operator"),
        group="grp-sql-cancel",
    )  # fmt: skip
    # A session tag belongs to the thread that added it: interruptTag from another thread
    # does not reach the query, which then finishes on its own.
    victim(
        "sql query interrupted by tag", "sql", lambda: spark.interruptTag(SQL_TAG),
        tag=SQL_TAG, seconds=3.0,
    )  # fmt: skip
    victim("sql query interrupted by interruptAll", "sql", spark.interruptAll)
    victim(
        "rdd job cancelled by sc tag", "rdd", lambda: sc.cancelJobsWithTag("sc-tag"),
        sc_tag="sc-tag",
    )  # fmt: skip
    victim("job killed via UI", "rdd", lambda: ui_kill("jobs/job", active_job()))
    victim("stage killed via UI", "rdd", lambda: ui_kill("stages/stage", active_stage()))
    victim("cancelAllJobs victim", "rdd", sc.cancelAllJobs)
    victim("cancelJob victim", "rdd", lambda: jsc.cancelJob(active_job(), "operator asked"))
    victim("running while spark.stop()", "sql", spark.stop)


def killed(spark: Any, root: Path, name: str) -> None:
    """A quick write, then a long one; the parent signals the driver during the second."""
    from pyspark.sql.functions import udf

    sc, data = spark.sparkContext, root / "data"
    _, stem = APPS[name]
    sc.setJobGroup("grp-long", "a quick write, then a long one")
    sc.setJobDescription("quick write before long job")
    spark.range(0, 1000).write.mode("overwrite").parquet(str(data / f"{stem}_out"))
    sc.setJobDescription("long running sql query")
    block = udf(blocker(root / "control" / "running-long"), "long")
    spark.range(0, 2).select(block("id")).write.mode("overwrite").parquet(
        str(data / f"{stem}_long")
    )
    raise AssertionError("the long write was meant to be interrupted")


DRIVERS: dict[str, Callable[[Any, Path, str], None]] = {
    "success": success,
    "sql_failure": sql_failure,
    "cancelled": cancelled,
    "sigterm": killed,
    "sigterm_python_parent": killed,
    "sigterm_spark_submit": killed,
    "sigkill": killed,
}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        driver(sys.argv[2], Path(sys.argv[3]))
    else:
        sys.exit(main(sys.argv[1:]))
