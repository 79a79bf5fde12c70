"""Structured Streaming queries for the live tests, run under the lakehouse environment.

    python streaming_live.py finite EVENTS_DIR WORK JARS KAFKA_BOOTSTRAP
    python streaming_live.py endless EVENTS_DIR WORK JARS

`finite`: one application (one JVM) running queries one after the other, each with trigger
availableNow: JSON files -> parquet (`file_to_parquet`, one file per micro-batch), the same
files -> a Delta path table (`to_delta`), that table -> parquet (`from_delta`), the same
files -> Kafka topic `stream-live-clicks` (`to_kafka`), Kafka topic `stream-live-orders` ->
`foreachBatch` into a Delta path table (`orders_to_delta`: the first batch appends, the next
ones MERGE), and a file -> parquet query whose second micro-batch fails on an ANSI cast
(`bad_cast`). The topics have names of their own: the test session's broker is shared.
`endless`: a rate -> parquet query every second (`ticks_forever`) that runs until the driver
is stopped from outside; `WORK/started` holds the application id once the query has started.
Event logs: one uncompressed file each.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.data.make_lakehouse_logs import (
    DELTA,
    bad_cast,
    orders_to_delta,
    session,
    ticks_forever,
    until_caught_up,
)


def files(directory: Path, bodies: list[str]) -> None:
    directory.mkdir(parents=True)
    for n, body in enumerate(bodies):  # the file source takes the oldest first
        (directory / f"part-{n}.json").write_text(body)
        os.utime(directory / f"part-{n}.json", (1_700_000_000 + n, 1_700_000_000 + n))


def finite(spark: SparkSession, work: Path, servers: str) -> None:
    data = work / "data"
    files(
        data / "incoming",
        [f'{{"id": {n}, "kind": "click"}}\n{{"id": {n + 10}, "kind": "view"}}\n' for n in range(2)],
    )

    def clicks() -> DataFrame:
        return (
            spark.readStream.schema("id LONG, kind STRING")
            .option("maxFilesPerTrigger", 1)
            .json(str(data / "incoming"))
            .where("kind = 'click'")
        )

    def run(writer: DataStreamWriter, name: str) -> None:
        until_caught_up(writer, work, name)

    run(
        clicks().writeStream.format("parquet").option("path", str(data / "clicks_parquet")),
        "file_to_parquet",
    )
    run(clicks().writeStream.format("delta").option("path", str(data / "clicks_delta")), "to_delta")
    from_delta = spark.readStream.format("delta").load(str(data / "clicks_delta"))
    run(
        from_delta.writeStream.format("parquet").option("path", str(data / "from_delta")),
        "from_delta",
    )
    to_kafka = clicks().selectExpr("CAST(id AS STRING) AS key", "kind AS value").writeStream
    run(
        to_kafka.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("topic", "stream-live-clicks"),
        "to_kafka",
    )

    delta_table: Any = importlib.import_module("delta.tables").DeltaTable  # lakehouse only
    target = str(data / "orders_delta")

    def upsert(batch: DataFrame, batch_id: int) -> None:
        if batch_id == 0:
            batch.write.format("delta").mode("append").save(target)
            return
        table = delta_table.forPath(batch.sparkSession, target)
        table.alias("t").merge(
            batch.alias("s"), "t.id = s.id"
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    orders_to_delta(spark, servers, "stream-live-orders", upsert, work)

    files(data / "quantities_in", ['{"id": 1, "qty": "3"}\n', '{"id": 2, "qty": "three"}\n'])
    bad_cast(spark, data / "quantities_in", data / "quantities", work / "checkpoints" / "bad_cast")


def endless(spark: SparkSession, work: Path) -> None:
    query = ticks_forever(spark, work)
    (work / "started.tmp").write_text(spark.sparkContext.applicationId)
    (work / "started.tmp").rename(work / "started")
    query.awaitTermination(600)


def main(argv: list[str]) -> None:
    mode, events, work, jars = argv[0], Path(argv[1]), Path(argv[2]), argv[3]
    spark = session(work, f"streaming_live_{mode}", jars, DELTA, events)
    if mode == "finite":
        finite(spark, work, argv[4])
    else:
        endless(spark, work)
    spark.stop()
    print(json.dumps({"done": mode}))


if __name__ == "__main__":
    main(sys.argv[1:])
