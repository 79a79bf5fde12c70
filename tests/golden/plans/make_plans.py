"""Regenerate the recorded plans beside this script from a real run of the column jobs.

    .venv/bin/python tests/golden/plans/make_plans.py [OUT_DIR]

Runs `tests/sparkjobs/columns_jobs.py` (PySpark 4.3, Java 17) into a temporary directory,
or reads the output of an earlier run from OUT_DIR, and writes one `<query>.json` per SQL
execution: the final plan of the execution (its last `SQLAdaptiveExecutionUpdate`, else its
`SQLExecutionStart`) as `sparkPlanInfo` and `physicalPlanDescription`. Executions nested
under another one (a CTAS and the insert it runs, a JDBC save and its query) are named
`<query>-nested-<n>.json`. Paths under the run's directory become `/data/columns`; of the
wide-table plans only `wide_hash` is kept (the Spark tests cover the others).

`jdbc_pushed_filter.json` is not made here: it is the filtered PostgreSQL read of the side by
side harness's `jdbc_postgres` shape (`./run peer`, tests/peer/jobs.py), in the same record
format, with the run's directory as `/data/peer`; so are `hive_dynamic_partition.json` and
`hive_pruned_to_no_file.json`, the two INSERTs of its `hive_dynamic_partition` shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JOBS = HERE.parents[1] / "sparkjobs" / "columns_jobs.py"
PLACEHOLDER = "/data/columns"
SQL = "org.apache.spark.sql.execution.ui.SparkListenerSQL"
SKIPPED = {"people", "orders", "people_b", "people table", "orders table", "cache fill"}
SKIPPED |= {"wide_source", "wide_copy", "wide_mix"}  # big; the Spark tests read them
#: The SQL metrics `plans.read_plan` reads; the others only make the files longer.
KEPT_METRICS = {
    "number of output rows",
    "size of files read",
    "number of files read",
    "written output",
    "number of written files",
}


def final_plans(log: Path) -> dict[int, dict[str, Any]]:
    """Execution id -> its start event, with the final plan of its last adaptive update."""
    plans: dict[int, dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event.get("Event", "")
        if kind == SQL + "ExecutionStart":
            plans[event["executionId"]] = dict(event)
        elif kind == SQL + "AdaptiveExecutionUpdate" and event["executionId"] in plans:
            start = plans[event["executionId"]]
            start["sparkPlanInfo"] = event["sparkPlanInfo"]
            start["physicalPlanDescription"] = event["physicalPlanDescription"]
            start["adaptive"] = True
    return plans


def pruned(node: dict[str, Any]) -> dict[str, Any]:
    """A sparkPlanInfo tree with only the metrics the agent reads."""
    return {
        **node,
        "metrics": [m for m in node.get("metrics", []) if m.get("name") in KEPT_METRICS],
        "children": [pruned(child) for child in node.get("children", [])],
    }


def write_plans(out: Path) -> list[str]:
    (log,) = (out / "events").iterdir()
    written: list[str] = []
    nested: dict[int, int] = {}
    for execution, start in sorted(final_plans(log).items()):
        label = start.get("description") or ""
        root = start.get("rootExecutionId", execution)
        if not label or label in SKIPPED:
            continue
        name = label.replace(" ", "_")
        if root != execution:
            nested[root] = nested.get(root, 0) + 1
            name = f"{name}-nested-{nested[root]}"
        record = {
            "description": label,
            "executionId": execution,
            "rootExecutionId": root,
            "adaptive": start.get("adaptive", False),
            "physicalPlanDescription": start["physicalPlanDescription"],
            "sparkPlanInfo": pruned(start["sparkPlanInfo"]),
        }
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        for prefix in (str(out.resolve()), str(out)):
            text = text.replace(prefix, PLACEHOLDER)
        (HERE / f"{name}.json").write_text(text)
        written.append(name)
    return written


def main(argv: list[str]) -> None:
    if argv:
        print("\n".join(write_plans(Path(argv[0]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
        subprocess.run([sys.executable, str(JOBS), str(out)], check=True, env=env)
        print("\n".join(write_plans(out)))


if __name__ == "__main__":
    main(sys.argv[1:])
