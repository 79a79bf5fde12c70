"""A long-lived PySpark driver for the benchmarks: one JVM runs many applications in turn.

Usage: python spark_driver.py CONTROL_DIR

Starting a JVM costs tens of seconds on a busy machine, so the benchmarks start this process
once and hand it one command after another; every command runs a fresh SparkSession (a new
application with its own event log) and stops it. Event logs keep Spark 4's defaults (rolling
layout, zstd), as a cluster writes them.

Protocol (files in CONTROL_DIR, each written to a temporary name and renamed into place):
    ready           written once this process runs; holds its pid
    cmd-<n>.json    {"action": ACTION, "params": {...}} from the benchmark, n = 1, 2, ...
    done-<n>.json   {"ok": true, "result": {...}} or {"ok": false, "error": "traceback"}
Actions: "eventlog", "writes", "job", "wide" (see their functions) and "quit". "job" and
"wide" take an optional `conf` (extra Spark properties of that application, such as a
listener) and report the driver JVM's peak heap and the bytes it allocated. The process gives up
after IDLE_TIMEOUT seconds without a command, or as soon as its parent process is gone, so it
never outlives a benchmark.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session, sql_settings

IDLE_TIMEOUT = 900.0
POLL = 0.02


def session(
    name: str,
    event_dir: str,
    work: str,
    shuffle_partitions: int,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    settings = sql_settings(str(shuffle_partitions), str(Path(work) / "warehouse"))
    log = event_log(Path(event_dir).as_uri())
    return local_session("local[2]", name, settings, log, conf or {})


def wide_frame(spark: SparkSession, rows: int, partitions: int, columns: int) -> Any:
    """A frame with `columns` computed columns: wide plans make the SQL events large, as
    they are in real pipelines."""
    base = spark.range(0, rows, 1, partitions)
    exprs = [f"id % {i + 2} AS c{i}" for i in range(columns)]
    return base.selectExpr("id", "id % 97 AS k", *exprs)


def eventlog(params: dict[str, Any]) -> dict[str, Any]:
    """A large event log: queries of many stages and tasks until the log holds `min_bytes`
    (decoded) or `max_queries` ran. Most queries run a chain of `filters` filters over
    `partitions` partitions in one stage: task events dominate real logs, and every filter
    adds its metric to each task's accumulables, so a task line is as large as in a real
    pipeline of that many operators. Every fifth query joins two aggregations (several
    shuffle stages) and every `write_every` queries a parquet write is read back, so the log
    also holds shuffles and SQL executions with datasets."""
    work = Path(params["work"])
    spark = session(params["app_name"], params["event_dir"], str(work), params["shuffle"])
    app_id = spark.sparkContext.applicationId
    meter = DecodedSize(Path(params["event_dir"]))
    started = time.monotonic()
    queries = 0
    while queries < params["max_queries"] and meter.measure() < params["min_bytes"]:
        frame = wide_frame(spark, params["rows"], params["partitions"], params["columns"])
        if queries % params["write_every"] == 0:
            path = str(work / "tables" / f"t{queries}")
            frame.coalesce(4).write.mode("overwrite").parquet(path)
            spark.read.parquet(path).groupBy("k").agg(F.sum("c0")).collect()
        elif queries % 5 == 1:
            left = frame.groupBy("k").agg(F.sum("c0").alias("a"))
            right = frame.groupBy((F.col("k") % 13).alias("k")).agg(F.max("c1").alias("b"))
            left.join(right, "k").orderBy("k").collect()
        else:
            chain = spark.range(0, params["rows"], 1, params["partitions"])
            for i in range(params["filters"]):
                # A nondeterministic bound keeps the optimizer from merging the filters.
                chain = chain.withColumn(f"x{i}", F.col("id") + i)
                chain = chain.where(F.col(f"x{i}") > -1 - F.rand(i))
            chain.write.format("noop").mode("overwrite").save()
        queries += 1
    spark.stop()
    return {
        "app_id": app_id,
        "seconds": time.monotonic() - started,
        "queries": queries,
        "decoded_bytes": meter.measure(),
    }


class DecodedSize:
    """Decoded bytes written so far under an event-log directory (zstd event files), read
    incrementally: the loop above stops once the log is large enough."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.total = 0
        self._files: dict[Path, tuple[int, Any]] = {}

    def measure(self) -> int:
        import zstandard

        for path in sorted(self.directory.glob("eventlog_v2_*/events_*")):
            offset, decoder = self._files.get(path, (0, None))
            if decoder is None:
                decoder = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
            with path.open("rb") as file:
                file.seek(offset)
                data = file.read()
            self.total += len(decoder.decompress(data))
            self._files[path] = (offset + len(data), decoder)
        return self.total


def writes(params: dict[str, Any]) -> dict[str, Any]:
    """`executions` small parquet writes, `pause` seconds apart: one SQL execution with an
    output dataset each, for end-to-end latency."""
    work = Path(params["work"])
    spark = session(params["app_name"], params["event_dir"], str(work), 2)
    app_id = spark.sparkContext.applicationId
    started = time.monotonic()
    for index in range(params["executions"]):
        frame = spark.range(0, params["rows"], 1, 2).selectExpr("id", "id % 7 AS k")
        frame.write.mode("overwrite").parquet(str(work / "out" / f"w{index}"))
        time.sleep(params["pause"])
    spark.stop()
    return {"app_id": app_id, "seconds": time.monotonic() - started}


class Heap:
    """The driver JVM's heap during one application: the peak use of its heap pools and
    the bytes its threads allocated (threads alive at the end; 0 before the JVM exists:
    the first application of the process starts it)."""

    def __init__(self) -> None:
        self._allocated: dict[int, int] = {}

    def _jvm(self) -> Any:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        return None if gateway is None else gateway.jvm

    def _threads(self) -> dict[int, int]:
        jvm = self._jvm()
        if jvm is None:
            return {}
        threads = jvm.java.lang.management.ManagementFactory.getThreadMXBean()
        ids = threads.getAllThreadIds()
        counts = threads.getThreadAllocatedBytes(ids)
        return {int(i): int(n) for i, n in zip(ids, counts, strict=True) if int(n) >= 0}

    def reset(self) -> None:
        jvm = self._jvm()
        if jvm is not None:
            for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
                if pool.getType().toString() == "Heap memory":
                    pool.resetPeakUsage()
        self._allocated = self._threads()

    def allocated(self) -> int:
        """Bytes allocated since `reset` by the threads alive now; call before spark.stop()."""
        before = self._allocated
        return sum(n - before.get(i, 0) for i, n in self._threads().items())

    def peak(self) -> int:
        jvm = self._jvm()
        if jvm is None:
            return 0
        pools = jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        return sum(
            int(p.getPeakUsage().getUsed())
            for p in pools
            if p.getType().toString() == "Heap memory"
        )


def job(params: dict[str, Any]) -> dict[str, Any]:
    """The application whose wall time is compared with and without the agent, timed whole
    (session start to stop: the event log is closed by then) and by phase."""
    work = Path(params["work"])
    heap = Heap()
    heap.reset()
    started = time.monotonic()
    conf = params.get("conf")
    spark = session(params["app_name"], params["event_dir"], str(work), 4, conf)
    app_id = spark.sparkContext.applicationId
    working = time.monotonic()
    for query in range(params["queries"]):
        frame = wide_frame(spark, params["rows"], params["partitions"], 8)
        path = str(work / "tables" / f"q{query}")
        frame.write.mode("overwrite").parquet(path)
        spark.read.parquet(path).groupBy("k").agg(F.sum("c1"), F.max("c2")).collect()
    stopping = time.monotonic()
    allocated = heap.allocated()
    spark.stop()
    ended = time.monotonic()
    return {
        "app_id": app_id,
        "seconds": ended - started,
        "start_seconds": working - started,
        "work_seconds": stopping - working,
        "stop_seconds": ended - stopping,
        "heap_peak_bytes": heap.peak(),
        "heap_allocated_bytes": allocated,
    }


def wide(params: dict[str, Any]) -> dict[str, Any]:
    """A table of `columns` columns written, copied column for column, and hashed row by
    row: plans (and lineage) as wide as the table. Timed whole, like `job`."""
    work = Path(params["work"])
    heap = Heap()
    heap.reset()
    started = time.monotonic()
    spark = session(params["app_name"], params["event_dir"], str(work), 2, params.get("conf"))
    app_id = spark.sparkContext.applicationId
    columns = [f"(id + {i}) AS c{i}" for i in range(params["columns"])]
    spark.range(params["rows"]).selectExpr(*columns).write.parquet(str(work / "wide_source"))
    source = spark.read.parquet(str(work / "wide_source"))
    source.write.parquet(str(work / "wide_copy"))
    row_hash = F.sha2(F.concat_ws(",", *[F.col(c) for c in source.columns]), 256)
    source.select("c0", row_hash.alias("row_hash")).write.parquet(str(work / "wide_hash"))
    allocated = heap.allocated()
    spark.stop()
    return {
        "app_id": app_id,
        "seconds": time.monotonic() - started,
        "heap_peak_bytes": heap.peak(),
        "heap_allocated_bytes": allocated,
    }


ACTIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "eventlog": eventlog,
    "writes": writes,
    "job": job,
    "wide": wide,
}


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def serve(control: Path) -> None:
    parent = os.getppid()
    write_atomically(control / "ready", str(os.getpid()))
    number = 1
    idle_since = time.monotonic()
    while True:
        command_file = control / f"cmd-{number}.json"
        if not command_file.exists():
            if os.getppid() != parent:
                return  # the benchmark is gone
            if time.monotonic() - idle_since > IDLE_TIMEOUT:
                return
            time.sleep(POLL)
            continue
        command = json.loads(command_file.read_text())
        if command["action"] == "quit":
            write_atomically(control / f"done-{number}.json", json.dumps({"ok": True}))
            return
        try:
            result = ACTIONS[command["action"]](command["params"])
            answer = {"ok": True, "result": result}
        except Exception:
            answer = {"ok": False, "error": traceback.format_exc()}
        write_atomically(control / f"done-{number}.json", json.dumps(answer))
        number += 1
        idle_since = time.monotonic()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
