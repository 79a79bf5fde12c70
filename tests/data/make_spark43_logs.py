"""Regenerate the Spark 4.3 event log in `eventlogs/spark43/` beside this script.

    python3 tests/data/make_spark43_logs.py [SHAPE...] [--keep DIR]

Real PySpark 4.3.0 (Java 17, local[2], UI off, the Hive catalog on a Derby metastore in the
job's directory) in the environment `scripts/pyenv.py spark43` creates (this script
re-executes itself there). No connector is served for Spark 4.3, so no Delta, Iceberg or
Kafka shape: one application runs the statements of `tests/sparkjobs/fidelity_jobs.py` (a read
of 30 paths at the default and at a raised `spark.sql.maxMetadataStringLength`, a read of
two, every generator, INSERT OVERWRITE DIRECTORY in both forms), then SQL statements that
fail. The machinery of `make_lakehouse_logs.py` runs it and scrubs the log: paths under the
job's temporary directory become `/data/spark43/...`; see `eventlogs/spark43/NOTES.md`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.data import make_lakehouse_logs as lake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HERE = Path(__file__).resolve().parent
#: The Spark properties the log's environment event keeps: the machinery's and the catalog
#: implementation (the metastore's settings name the job's directory: they go).
KEPT = frozenset({*lake.KEPT_PROPERTIES, "spark.sql.catalogImplementation"})


def fidelity(spark: SparkSession, root: Path) -> None:
    """The steps of fidelity_jobs.py, each statement its job description, then failures: an
    INSERT whose tasks fail on an ANSI cast and a SELECT of a column that does not exist."""
    from tests.sparkjobs.columns_jobs import Jobs
    from tests.sparkjobs.fidelity_jobs import STEPS

    jobs = Jobs(spark, root / "data")
    for step in STEPS:
        step(jobs)
    lake.failing_sql(spark)


def conf(shape: str, root: Path) -> dict[str, str]:
    """The Hive catalog, whose metastore lives in the job's directory."""
    from tests.sparkjobs.fidelity_jobs import hive_conf

    return hive_conf(root)


SPARK43 = lake.LogSet(
    script=Path(__file__).resolve(),
    out=HERE / "eventlogs" / "spark43",
    placeholder="/data/spark43",
    env="spark43",
    bundles=(),
    kept=KEPT,
    shapes={"fidelity": (fidelity, False)},  # name -> (job, needs the Kafka broker)
    app_prefix="spark43",
    conf=conf,
)

if __name__ == "__main__":
    sys.exit(lake.main(sys.argv[1:], SPARK43))
