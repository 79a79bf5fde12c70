"""Delta Lake path tables run live by real PySpark 4.1.1, translated by the agent, and the
version it reports checked against the tables' own transaction log on disk: writes and
rewrites, and maintenance (tests/live_lakehouse.py; catalog tables and Kafka in
tests/test_lakehouse_live_catalogs.py, on the other worker).
"""

from __future__ import annotations

import pytest

from tests.live_lakehouse import (
    TEST_TIMEOUT,
    EveryPart,
    Live,
    delta_commits,
    facets,
    lifecycle,
    run_live,
    version,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(TEST_TIMEOUT)]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    """The path tables' part, run once for the module."""
    return run_live(tmp_path_factory.mktemp("lakehouse-live-paths"), "paths", None)


class TestEveryPart(EveryPart):
    """What every part checks, on this file's application."""


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
