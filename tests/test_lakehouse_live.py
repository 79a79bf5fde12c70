"""Delta Lake, Iceberg and Kafka statements run live by real PySpark 4.1.1, translated by
the agent, and the version it reports checked against the tables' own metadata on disk.

One application (`tests/sparkjobs/lakehouse_live.py`, one JVM, under a minute) in the
lakehouse environment of `scripts/pyenv.py` with the jars of `scripts/jars.py` (both cached
under `build/`), beside a real KRaft broker (`tests/kafka.py`); its event log is read through
`ApplicationLog` with the real `DiskTableMetadata`, as the daemon's source does, and
`spark.kafka_bootstrap` set to the broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.spark.eventlog.discovery import scan
from agent.spark.translate.options import TranslateOptions
from tests.applog import read_through
from tests.kafka import running_kafka
from tests.olschema import validate_run_event
from tests.spark_logs import spark_env

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "sparkjobs" / "lakehouse_live.py"
JOB_TIMEOUT = 480.0  # JVM start and ~25 statements on a shared two-core machine
SETUP_TIMEOUT = 1800.0  # the environment and jars, when not cached yet

pytestmark = pytest.mark.spark

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


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """Run the job once for the module; translate its log with the real version reader."""
    python = _output("pyenv.py", "lakehouse")
    jars = ",".join(
        _output("jars.py", "--classpath", bundle).replace(":", ",")
        for bundle in ("delta", "iceberg", "spark-kafka")
    )
    root = tmp_path_factory.mktemp("lakehouse-live")
    (root / "events").mkdir()
    (root / "data").mkdir()
    env = spark_env() | {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    with running_kafka(root) as kafka, (root / "job.log").open("wb") as out:
        bootstrap = kafka.bootstrap
        done = subprocess.run(
            [python, str(JOB), str(root), jars, bootstrap],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=JOB_TIMEOUT,
            check=False,
        )
    if done.returncode != 0:
        tail = (root / "job.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"lakehouse_live.py exited {done.returncode}:\n{tail}")
    (ref,) = scan(root / "events")
    options = TranslateOptions(namespace="live", kafka_bootstrap=bootstrap)
    # the real DiskTableMetadata: the tables are on disk
    events, warnings = read_through(ref, options)
    yield Live(root, bootstrap, events, warnings)


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


def test_events_are_valid_and_every_statement_completes(live: Live) -> None:
    """Every event validates; each run has START then COMPLETE; nothing was misunderstood."""
    by_run: dict[str, list[str]] = {}
    for event in live.events:
        validate_run_event(event)
        by_run.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert all(types == ["START", "COMPLETE"] for types in by_run.values()), by_run
    assert not [w for w in live.warnings if "unrecognized" in w], live.warnings
    names = [d["name"] for e in live.events for d in (*e["inputs"], *e["outputs"])]
    assert not [n for n in names if "_delta_log" in n or "/metadata/" in n]


def test_table_schemas_are_typed_from_their_metadata(live: Live) -> None:
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


def test_delta_path_versions_match_the_transaction_log(live: Live) -> None:
    """create / append / MERGE / UPDATE / DELETE: each run's version is the commit the
    table's `_delta_log` holds for that operation, each rewrite reads the one before; the
    MERGE's columns come from the table and from the parquet source its clauses assign."""
    table = live.root / "data" / "events"
    commits = delta_commits(table)
    assert commits == {0: "WRITE", 1: "WRITE", 2: "MERGE", 3: "UPDATE", 4: "DELETE"}
    saves = live.runs("execute_save_into_data_source_command.data_events")
    merge = live.run("execute_merge_into_command.data_events")
    update = live.run("execute_update_command.data_events")
    delete = live.run("execute_delete_command.data_events")
    assert [version(e) for e in (*saves, merge, update, delete)] == ["0", "1", "2", "3", "4"]
    assert [version(e, "inputs") for e in (merge, update, delete)] == ["1", "2", "3"]
    assert lifecycle(saves[0]) == "CREATE"
    updates = str(live.root / "data" / "updates")
    assert updates in {i["name"] for i in merge["inputs"]}
    fields = facets(merge)["columnLineage"]["fields"]
    assert {(i["name"], i["field"]) for i in fields["amount"]["inputFields"]} == {
        (str(table), "amount"),  # rows no clause changes, and `s.amount + t.amount`
        (updates, "amount"),
    }
    assert {(i["name"], i["field"]) for i in fields["id"]["inputFields"]} == {
        (str(table), "id"),
        (updates, "id"),  # WHEN NOT MATCHED THEN INSERT
    }
    assert {(o["namespace"], o["name"]) for e in (merge, update, delete) for o in e["outputs"]} == {
        ("file", str(table))
    }


def test_delta_maintenance_commands(live: Live) -> None:
    """OPTIMIZE, RESTORE (OVERWRITE, reading the version restored) and VACUUM write the
    table: each reports the commit its operation made."""
    table = live.root / "data" / "maintained"
    commits = delta_commits(table)
    assert list(commits.values()) == [
        "WRITE",
        "WRITE",
        "OPTIMIZE",
        "RESTORE",
        "VACUUM START",
        "VACUUM END",
    ]
    optimize = live.run("execute_optimize_table_command.data_maintained")
    restore = live.run("execute_restore_table_command.data_maintained")
    vacuum = live.run("execute_vacuum_table_command.data_maintained")
    assert [version(e) for e in (optimize, restore, vacuum)] == ["2", "3", "5"]
    assert [lifecycle(e) for e in (optimize, restore, vacuum)] == [None, "OVERWRITE", None]
    assert version(restore, "inputs") == "0"
    assert {e["outputs"][0]["name"] for e in (optimize, restore, vacuum)} == {str(table)}


def test_delta_catalog_table_and_ddl(live: Live) -> None:
    """CREATE / INSERT / ALTER of a managed table: its warehouse location, symlink and the
    commits' versions; CTAS, RENAME (with the previous name) and DROP of another."""
    accounts = live.root / "warehouse" / "accounts"
    assert delta_commits(accounts) == {0: "CREATE TABLE", 1: "WRITE", 2: "ADD COLUMNS"}
    create = live.run("create_table.default_accounts")
    insert = live.run("append_data_exec_v1.default_accounts")
    alter = live.run("alter_table.default_accounts")
    assert [version(e) for e in (create, insert, alter)] == ["0", "1", "2"]
    assert [lifecycle(e) for e in (create, insert, alter)] == ["CREATE", None, "ALTER"]
    assert facets(create)["symlinks"]["identifiers"] == [
        {
            "namespace": f"file:{live.root / 'warehouse'}",
            "name": "default.accounts",
            "type": "TABLE",
        }
    ]
    assert create["outputs"][0]["name"] == str(accounts)
    ctas = live.run("atomic_create_table_as_select.default_owners")
    assert (lifecycle(ctas), ctas["inputs"][0]["name"]) == ("CREATE", str(accounts))
    rename = live.run("rename_table.default_owners_v2")
    assert rename["outputs"][0]["name"] == str(live.root / "warehouse" / "owners_v2")
    assert facets(rename)["lifecycleStateChange"] == {
        **facets(rename)["lifecycleStateChange"],
        "lifecycleStateChange": "RENAME",
        "previousIdentifier": {
            "namespace": "file",
            "name": str(live.root / "warehouse" / "owners"),
        },
    }
    drop = live.run("drop_table.default_owners_v2")
    assert (lifecycle(drop), drop["outputs"][0]["name"]) == (
        "DROP",
        str(live.root / "warehouse" / "owners_v2"),
    )


def test_iceberg_snapshots_match_the_table_metadata(live: Live) -> None:
    """INSERT / MERGE / DELETE / ALTER of a hadoop-catalog table: each write's version is
    the snapshot its metadata records, each rewrite reads the one before; DDL lifecycles; a
    CREATE target where the table's metadata is, a dropped CTAS target unknown."""
    table = live.root / "iceberg" / "db" / "orders"
    snapshots = iceberg_snapshots(table)
    assert [op for _, op in snapshots] == ["append", "overwrite", "overwrite"]  # copy-on-write
    ids = [s for s, _ in snapshots]
    insert = live.run("append_data.db_orders")
    merge = live.run("merge_into_table.db_orders")  # both planned as ReplaceData
    delete = live.run("delete_from_table.db_orders")
    writes = [insert, merge, delete]
    assert [version(e) for e in writes] == ids
    assert [version(e, "inputs") for e in (merge, delete)] == ids[:2]
    assert {e["outputs"][0]["name"] for e in writes} == {str(table)}
    create = live.run("create_table.db_orders")
    alter = live.run("alter_table.db_orders")
    assert (lifecycle(create), lifecycle(alter)) == ("CREATE", "ALTER")
    paid = str(live.root / "iceberg" / "db" / "paid")
    ctas = live.run("atomic_create_table_as_select.db_paid")
    assert [(o["namespace"], o["name"]) for o in (*create["outputs"], *ctas["outputs"])] == [
        ("file", str(table)),  # two Iceberg catalogs: placed by the metadata on disk
        ("unknown", "db.paid"),  # the job dropped it: no warehouse holds it any more
    ]
    link = create["outputs"][0]["facets"]["symlinks"]["identifiers"][0]["namespace"]
    assert link == f"file:{live.root / 'iceberg'}"
    truncate = live.run("truncate_table.db_paid")
    drop = live.run("drop_table.db_paid")  # printed without its catalog, and gone from disk
    assert [(lifecycle(e), e["outputs"][0]["name"]) for e in (truncate, drop)] == [
        ("TRUNCATE", paid),
        ("DROP", "db.paid"),
    ]


def test_kafka_batch_write_and_reads(live: Live) -> None:
    """A write names the topic on its own servers; reads, whose servers the log never shows,
    on `spark.kafka_bootstrap`; a pattern is named as written."""
    namespace = f"kafka://{live.bootstrap}"
    write = live.run("execute_save_into_data_source_command.clicks")
    assert [(o["namespace"], o["name"]) for o in write["outputs"]] == [(namespace, "clicks")]
    subscribe = live.run("data_from_subscribe")
    pattern = live.run("data_from_subscribePattern")
    assert [(i["namespace"], i["name"]) for i in subscribe["inputs"]] == [(namespace, "clicks")]
    assert [(i["namespace"], i["name"]) for i in pattern["inputs"]] == [(namespace, "cli.*")]


def test_iceberg_merge_on_read_writes_name_their_table(live: Live) -> None:
    """A merge-on-read MERGE (`WriteDelta`, whose write prints no table) names the table
    whose rows' positions it reads; a DELETE of whole files (`DeleteFromTable`) its table;
    both with the snapshots its metadata records."""
    table = live.root / "iceberg" / "db" / "visits"
    ids = [s for s, _ in iceberg_snapshots(table)]
    merge = live.run("merge_into_table.db_visits")
    delete = live.run("delete_from_table.db_visits")
    assert [(e["outputs"][0]["name"], version(e)) for e in (merge, delete)] == [
        (str(table), ids[1]),
        (str(table), ids[2]),
    ]
    assert version(merge, "inputs") == ids[0]
