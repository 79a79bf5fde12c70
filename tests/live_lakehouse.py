"""Delta Lake, Iceberg and Kafka statements run live by real PySpark 4.1.1 for
tests/test_lakehouse_live.py (Delta path tables) and tests/test_lakehouse_live_catalogs.py
(catalog tables, Delta and Iceberg, and Kafka): the part's application, its log
translated, and the tests of every part (`EveryPart`).

One application per part (`tests/sparkjobs/lakehouse_live.py`, one JVM) in the lakehouse
environment of `scripts/pyenv.py` with the jars of `scripts/jars.py` (both cached under
`build/`, made under a lock: the two files start on two workers at once); its event log is
read through `ApplicationLog` with the real `DiskTableMetadata`, as the daemon's source does,
and `spark.kafka_bootstrap` set to the session's broker when the part uses Kafka.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.spark.eventlog.discovery import scan
from agent.spark.translate.options import TranslateOptions
from tests.applog import read_through
from tests.olschema import validate_run_event
from tests.spark_logs import spark_env

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "sparkjobs" / "lakehouse_live.py"
JOB_TIMEOUT = 900.0  # JVM start and a dozen statements on a loaded two-core machine
SETUP_TIMEOUT = 1800.0  # the environment and jars, when not cached yet
#: pytest-timeout's limit for these tests: the first one's setup runs the job (the suite's
#: 600 s would end a job that a busy machine slows past it).
TEST_TIMEOUT = 1200

Event = dict[str, Any]


@dataclass(frozen=True)
class Live:
    root: Path
    bootstrap: str
    events: list[Event]
    warnings: list[str]

    def run(self, job_suffix: str) -> Event:
        """The COMPLETE event of the one run whose job name ends with `job_suffix`."""
        found = self.runs(job_suffix)
        jobs = [e["job"]["name"] for e in self.events if e["eventType"] == "COMPLETE"]
        assert len(found) == 1, f"{len(found)} runs end with {job_suffix!r}: {jobs}"
        return found[0]

    def runs(self, job_suffix: str) -> list[Event]:
        return [
            e
            for e in self.events
            if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(job_suffix)
        ]


def _output(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args],
        capture_output=True,
        text=True,
        timeout=SETUP_TIMEOUT,
        check=True,
    )
    return done.stdout.strip()


def run_live(root: Path, part: Literal["paths", "catalogs"], bootstrap: str | None) -> Live:
    """Run the part's application in `root`; translate its log with the real version reader."""
    python = _output("pyenv.py", "lakehouse")
    jars = ",".join(
        _output("jars.py", "--classpath", bundle).replace(":", ",")
        for bundle in ("delta", "iceberg", "spark-kafka")
    )
    (root / "events").mkdir()
    (root / "data").mkdir()
    env = spark_env() | {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    with (root / "job.log").open("wb") as out:
        done = subprocess.run(
            [python, str(JOB), str(root), jars, part, *([bootstrap] if bootstrap else [])],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=JOB_TIMEOUT,
            check=False,
        )
    if done.returncode != 0:
        tail = (root / "job.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"lakehouse_live.py {part} exited {done.returncode}:\n{tail}")
    (ref,) = scan(root / "events")
    options = TranslateOptions(namespace="live", kafka_bootstrap=bootstrap)
    # the real DiskTableMetadata: the tables are on disk
    events, warnings = read_through(ref, options)
    return Live(root, bootstrap or "", events, warnings)


def facets(event: Event, role: str = "outputs", index: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = event[role][index].get("facets", {})
    return found


def version(event: Event, role: str = "outputs") -> str | None:
    found = facets(event, role).get("version")
    return None if found is None else found["datasetVersion"]


def lifecycle(event: Event) -> str | None:
    found = facets(event).get("lifecycleStateChange")
    return None if found is None else found["lifecycleStateChange"]


def delta_commits(table: Path) -> dict[int, str]:
    """Version -> commitInfo.operation, from the table's `_delta_log` (read here directly)."""
    commits = {}
    for path in sorted((table / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                commits[int(path.stem)] = action["commitInfo"]["operation"]
    return commits


def iceberg_snapshots(table: Path) -> list[tuple[str, str]]:
    """(snapshot id, operation) in commit order, from the newest metadata file."""
    newest = max(
        (table / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0])
    )
    document = json.loads(newest.read_text())
    return [(str(s["snapshot-id"]), s["summary"]["operation"]) for s in document["snapshots"]]


class EveryPart:
    """The checks of every part: each test file subclasses it as `TestEveryPart`, whose tests
    take that file's `live`."""

    def test_events_are_valid_and_every_statement_completes(self, live: Live) -> None:
        """Every event validates; each run has START then COMPLETE; nothing was misunderstood."""
        by_run: dict[str, list[str]] = {}
        for event in live.events:
            validate_run_event(event)
            by_run.setdefault(event["run"]["runId"], []).append(event["eventType"])
        assert by_run
        assert all(types == ["START", "COMPLETE"] for types in by_run.values()), by_run
        assert not [w for w in live.warnings if "unrecognized" in w], live.warnings
        names = [d["name"] for e in live.events for d in (*e["inputs"], *e["outputs"])]
        assert not [n for n in names if "_delta_log" in n or "/metadata/" in n]

    def test_table_schemas_are_typed_from_their_metadata(self, live: Live) -> None:
        """Every column of a Delta or Iceberg table on disk, read or written, has a type: the
        plan leaves many out, the table's own metadata (read by the real DiskTableMetadata)
        states them all."""
        untyped = set()
        tables = 0
        for event in live.events:
            for dataset in (*event["inputs"], *event["outputs"]):
                path = Path(dataset["name"])
                if dataset["namespace"] != "file" or not (
                    (path / "_delta_log").is_dir() or (path / "metadata").is_dir()
                ):
                    continue
                tables += 1
                fields = dataset.get("facets", {}).get("schema", {}).get("fields", [])
                untyped |= {(dataset["name"], f["name"]) for f in fields if "type" not in f}
        assert tables > 0
        assert not untyped
