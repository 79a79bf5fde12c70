"""A small PySpark program for `lineage-agent exec` tests: one write, then it ends as told.

Usage: python exec_job.py EVENTS_DIR OUT_DIR MODE

MODE: `ok` ends normally; `raise` raises after its Spark work (PySpark still logs ExitCode 0);
`hold` creates OUT_DIR/holding after its work and waits for OUT_DIR/go to appear, then
raises (a test restarts the agent meanwhile); `sleep` creates OUT_DIR/holding and sleeps (a
test signals it). The application is named `exec_<MODE>`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for `tests`
from tests.sparkjobs.local import event_log, local_builder, sql_settings


def main(events: str, out: str, mode: str) -> None:
    builder = local_builder("local[1]", f"exec {mode}", sql_settings("1"), event_log(events))
    spark = builder.getOrCreate()  # Spark's own log level left as it is
    spark.range(10).write.mode("overwrite").parquet(f"{out}/numbers")
    print(f"wrote {out}/numbers", flush=True)
    holding, go = Path(out, "holding"), Path(out, "go")
    if mode in ("hold", "sleep"):
        holding.touch()
    if mode == "sleep":
        time.sleep(600)
    while mode == "hold" and not go.exists():
        time.sleep(0.1)
    if mode in ("raise", "hold"):
        raise RuntimeError(f"{mode}: failed after the Spark work")


if __name__ == "__main__":
    main(*sys.argv[1:4])
