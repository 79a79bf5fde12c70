"""Write real Spark event logs: one application per layout x codec, in one JVM.

Usage: python generate_logs.py OUT_DIR

For every variant `<layout>-<codec>` (layout `rolling` or `single`, codec `none`, `zstd`,
`lz4`, `snappy`, `lzf`) the event log of one small application lands in
`OUT_DIR/<variant>/`, alone in that directory. `rolling-multi` is a zstd rolling log big
enough (padding in a job property) to roll over into several `events_N` files.
`OUT_DIR/manifest.json` maps each variant to its application id and says how long
generation took. SparkSessions are created and stopped in turn, so the JVM starts once.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_session, sql_settings

CODECS = ("none", "zstd", "lz4", "snappy", "lzf")
# Spark refuses a smaller rolling size; the writer counts bytes before compression.
MULTI_MAX_FILE_SIZE = "10m"
MULTI_PADDING = 3 * 1024 * 1024  # per job property; JobStart and StageSubmitted both carry it
MULTI_JOBS = 4


def session(name: str, event_dir: Path, work: Path, conf: dict[str, str]) -> SparkSession:
    settings = sql_settings("2", str(work / "warehouse"))
    return local_session("local[2]", name, settings, event_log(event_dir.as_uri()), conf)


def codec_conf(layout: str, codec: str) -> dict[str, str]:
    conf = {"spark.eventLog.rolling.enabled": str(layout == "rolling").lower()}
    if codec == "none":
        conf["spark.eventLog.compress"] = "false"
    else:
        conf["spark.eventLog.compress"] = "true"
        conf["spark.eventLog.compression.codec"] = codec
    return conf


def workload(spark: SparkSession, data: Path) -> None:
    """Parquet write, read back, aggregate, JSON write: the same jobs in every variant."""
    numbers = spark.range(0, 1000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
    numbers.write.parquet(str(data / "numbers"))
    counts = spark.read.parquet(str(data / "numbers")).groupBy("k").count()
    counts.write.json(str(data / "counts"))


def padded_jobs(spark: SparkSession) -> None:
    """Jobs whose events carry a large property, so the rolling writer rolls over."""
    context = spark.sparkContext
    padding = "x" * MULTI_PADDING
    for job in range(MULTI_JOBS):
        context.setLocalProperty("lineage.test.padding", f"{job}:{padding}")
        context.parallelize(range(4), 2).count()


def main(out: Path) -> None:
    started = time.monotonic()
    apps: dict[str, dict[str, str]] = {}
    for layout in ("rolling", "single"):
        for codec in CODECS:
            name = f"{layout}-{codec}"
            event_dir = out / name
            event_dir.mkdir(parents=True)
            conf = codec_conf(layout, codec)
            spark = session(f"eventlogs {name}", event_dir, out / "work" / name, conf)
            apps[name] = {"app_id": spark.sparkContext.applicationId}
            workload(spark, out / "data" / name)
            spark.stop()

    event_dir = out / "rolling-multi"
    event_dir.mkdir(parents=True)
    conf = codec_conf("rolling", "zstd") | {
        "spark.eventLog.rolling.maxFileSize": MULTI_MAX_FILE_SIZE
    }
    spark = session("eventlogs rolling-multi", event_dir, out / "work" / "multi", conf)
    apps["rolling-multi"] = {"app_id": spark.sparkContext.applicationId}
    padded_jobs(spark)
    spark.stop()

    manifest = {"variants": apps, "seconds": round(time.monotonic() - started, 2)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
