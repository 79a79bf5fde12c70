"""Shapes the translation once named wrong or not at all: one application, one write each.

Usage: python fidelity_jobs.py OUT_DIR

A read of many paths (Spark cuts the list it logs; then again with the whole list logged), a
read of two, every generator (`explode` of a `split`, `posexplode`,
`inline`, `stack`, a Python UDTF), `INSERT OVERWRITE DIRECTORY` in its data source and Hive
forms. The session runs with the Hive catalog (a Derby metastore under OUT_DIR), which the
Hive form needs. Writes the event log under `OUT_DIR/events/`, the data under
`OUT_DIR/data/` and `OUT_DIR/manifest.json` (application id, seconds, query -> location),
like columns_jobs.py, whose runner it shares.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import udtf
from pyspark.sql.udtf import UserDefinedTableFunction

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.columns_jobs import Jobs, run_steps
from tests.sparkjobs.local import event_log, local_session, people_frame, sql_settings

#: How many paths the long read names: more than Spark prints of a file index (10).
MANY = 30


def session(out: Path) -> SparkSession:
    events = out / "events"
    events.mkdir(parents=True)
    settings = sql_settings("2", str(out / "warehouse"))
    log = event_log(events.as_uri(), compress=False, rolling=False)
    return local_session("local[2]", "fidelity", settings, log, hive_conf(out))


def hive_conf(out: Path) -> dict[str, str]:
    """The Hive catalog, its Derby metastore under `out`."""
    metastore = f"jdbc:derby:;databaseName={out}/metastore;create=true"
    return {
        "spark.sql.catalogImplementation": "hive",
        "javax.jdo.option.ConnectionURL": metastore,
        "spark.hadoop.javax.jdo.option.ConnectionURL": metastore,
    }


class Words:
    """Each word of a line and its length (a Python UDTF)."""

    def eval(self, text: str):  # type: ignore[no-untyped-def]
        for word in text.split(" "):
            yield word, len(word)


def words_udtf() -> UserDefinedTableFunction:
    made = udtf(Words, returnType="word: string, size: int")
    assert isinstance(made, UserDefinedTableFunction)  # given a class, udtf wraps it
    return made


def many_paths(jobs: Jobs) -> None:
    """MANY parts of people, each its own parquet folder, read back in one call; then two."""
    spark = jobs.spark
    people = people_frame(spark).select("id", "name", "city")
    for part in range(MANY):
        jobs.write(f"part_{part:02d}", people.where(F.col("id") % MANY == part))
    paths = [jobs.path(f"part_{part:02d}") for part in range(MANY)]
    jobs.write("many_paths", spark.read.parquet(*paths).select("id", F.upper("name").alias("n")))
    # the same read where the log keeps the whole list (`sparkPlanInfo` metadata)
    jobs.write(
        "many_paths_listed",
        spark.read.parquet(*paths).select("id", F.upper("name").alias("n")),
        **{"spark.sql.maxMetadataStringLength": "100000"},
    )
    jobs.write("two_paths", spark.read.parquet(*paths[:2]).select("name", "city"))


def generators(jobs: Jobs) -> None:
    """Every generator over columns of a parquet input."""
    spark = jobs.spark
    lines = spark.createDataFrame(
        [(1, "to be or not", [("a", 1), ("b", 2)]), (2, "to be", [("c", 3)])],
        "id int, text string, pairs array<struct<k: string, v: int>>",
    )
    jobs.write("lines", lines)
    source = spark.read.parquet(jobs.path("lines"))
    jobs.write("words", source.select(F.explode(F.split("text", " ")).alias("word")))
    jobs.write(
        "positions", source.select("id", F.posexplode(F.split("text", " ")).alias("at", "word"))
    )
    jobs.write("inlined", source.select("id", F.inline("pairs")))
    jobs.write(
        "stacked",
        source.selectExpr("id", "stack(2, 'text', text, 'id', cast(id as string)) AS (k, v)"),
    )
    spark.udtf.register("words", words_udtf())
    source.createOrReplaceTempView("lines")
    jobs.write(
        "udtf_words",
        spark.sql("SELECT id, w.word, w.size FROM lines, LATERAL words(text) w"),
    )


def directories(jobs: Jobs) -> None:
    """INSERT OVERWRITE DIRECTORY, data source form and Hive form."""
    spark = jobs.spark
    lines = jobs.path("lines")
    statements = {
        "dir_datasource": (
            f"INSERT OVERWRITE DIRECTORY '{jobs.path('dir_datasource')}' USING parquet "
            f"SELECT id, upper(text) AS loud FROM parquet.`{lines}`"
        ),
        "dir_hive": (
            f"INSERT OVERWRITE LOCAL DIRECTORY '{jobs.path('dir_hive')}' "
            "ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' STORED AS TEXTFILE "
            f"SELECT id, text FROM parquet.`{lines}`"
        ),
    }
    for name, statement in statements.items():
        jobs.written[name] = jobs.path(name)
        jobs.run(name, functools.partial(spark.sql, statement))


#: The program's steps, in order (tests/data/make_spark43_logs.py runs them too).
STEPS = (many_paths, generators, directories)


def main(out: Path) -> None:
    started = time.monotonic()
    run_steps(out, session(out), STEPS, started)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
