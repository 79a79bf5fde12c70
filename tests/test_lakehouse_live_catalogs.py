"""Catalog tables run live by real PySpark 4.1.1, translated by the agent, and the version
it reports checked against the tables' own metadata on disk: a Delta managed table's DDL,
Iceberg hadoop-catalog tables copy-on-write and merge-on-read; and a batch write to and
reads from the session's Kafka broker (tests/live_lakehouse.py; Delta path tables in
tests/test_lakehouse_live.py, on the other worker).
"""

from __future__ import annotations

import pytest

from tests.kafka import Kafka
from tests.live_lakehouse import (
    TEST_TIMEOUT,
    EveryPart,
    Live,
    delta_commits,
    facets,
    iceberg_snapshots,
    lifecycle,
    run_live,
    version,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(TEST_TIMEOUT)]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, kafka_broker: Kafka) -> Live:
    """The catalogs' part, run once for the module beside the session's broker."""
    root = tmp_path_factory.mktemp("lakehouse-live-catalogs")
    return run_live(root, "catalogs", kafka_broker.bootstrap)


class TestEveryPart(EveryPart):
    """What every part checks, on this file's application."""


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
