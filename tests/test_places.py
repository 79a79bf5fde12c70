"""DDL of session-catalog tables names the dataset the writes to the table name (`places`),
replayed from a real PySpark 4.3.0 log (tests/data/eventlogs/marquez/table_ddl.jsonl.zst)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.tables import TableIdent
from agent.spark.translate.datasets.places import TablePlaces
from agent.spark.translate.options import TranslateOptions
from tests.applog import read_through, staged, unpacked
from tests.olschema import validate_run_event

MARQUEZ = Path(__file__).resolve().parent / "data" / "eventlogs" / "marquez"
DATA = "/data/marquez/data"
WAREHOUSE = "/data/marquez/warehouse"
Event = dict[str, Any]


@pytest.fixture(scope="module")
def ddl(tmp_path_factory: pytest.TempPathFactory) -> list[Event]:
    """The COMPLETE events of the log's statements, in order."""
    ref = staged(tmp_path_factory.mktemp("ddl") / "logs", unpacked(MARQUEZ / "table_ddl.jsonl.zst"))
    events, _ = read_through(ref, TranslateOptions(namespace="ddl"))
    for event in events:
        validate_run_event(event)
    return [e for e in events if e["eventType"] == "COMPLETE" and e["outputs"]]


def statements(events: list[Event], table: str) -> list[tuple[str | None, str]]:
    """(lifecycle change, dataset) of each statement whose output is the table `table`."""
    found = []
    for event in events:
        for output in event["outputs"]:
            facets = output.get("facets", {})
            links = [i["name"] for i in facets.get("symlinks", {}).get("identifiers", [])]
            if table in links:
                change = facets.get("lifecycleStateChange", {}).get("lifecycleStateChange")
                found.append((change, output["name"]))
    return found


def test_ddl_of_an_external_table_names_its_location(ddl: list[Event]) -> None:
    """CREATE TABLE ext … LOCATION prints no location; the INSERT does, and the ALTER and
    DROP that follow name that dataset, not `<warehouse>/ext`."""
    assert statements(ddl, "default.ext") == [
        (None, f"{DATA}/ext"),  # the INSERT
        ("ALTER", f"{DATA}/ext"),
        ("DROP", f"{DATA}/ext"),
    ]


def test_ddl_of_a_managed_table_names_its_default_place(ddl: list[Event]) -> None:
    """A managed table in database `db`: INSERT, TRUNCATE, ALTER and DROP name
    `<warehouse>/db.db/m`."""
    place = f"{WAREHOUSE}/db.db/m"
    changes = [(None, place), ("TRUNCATE", place), ("ALTER", place), ("DROP", place)]
    assert statements(ddl, "db.m") == changes


def test_an_external_ctas_keeps_its_location_through_rename_and_drop(ddl: list[Event]) -> None:
    """CTAS … LOCATION names its table only, its insert the path: the RENAME keeps that
    dataset (an external table's files stay), with the same previous identifier, and the
    DROP of the new name names it too."""
    assert statements(ddl, "default.ext2") == [("CREATE", f"{DATA}/ext2")]
    assert statements(ddl, "default.ext2b") == [
        ("RENAME", f"{DATA}/ext2"),
        ("DROP", f"{DATA}/ext2"),
    ]
    (rename,) = [e for e in ddl if e["job"]["name"].endswith("rename_command.default_ext2b")]
    change = rename["outputs"][0]["facets"]["lifecycleStateChange"]
    assert change["previousIdentifier"] == {"namespace": "file", "name": f"{DATA}/ext2"}


def test_a_managed_rename_moves_to_the_new_default_place(ddl: list[Event]) -> None:
    """Spark moves a managed table's directory on RENAME: the new name is at its own
    default place, the previous identifier at the old one."""
    assert statements(ddl, "default.m3") == [
        ("RENAME", f"{WAREHOUSE}/m3"),
        (None, f"{WAREHOUSE}/m3"),
        ("DROP", f"{WAREHOUSE}/m3"),
    ]
    (rename,) = [e for e in ddl if e["job"]["name"].endswith("rename_command.default_m3")]
    change = rename["outputs"][0]["facets"]["lifecycleStateChange"]
    assert change["previousIdentifier"] == {"namespace": "file", "name": f"{WAREHOUSE}/m2"}


def test_save_as_table_with_a_path_names_the_path(ddl: list[Event]) -> None:
    """`saveAsTable` with a `path` option is a CTAS at that path: ALTER and DROP name it."""
    assert statements(ddl, "default.ext3") == [
        ("CREATE", f"{DATA}/ext3"),
        ("ALTER", f"{DATA}/ext3"),
        ("DROP", f"{DATA}/ext3"),
    ]


def test_a_table_never_shown_is_named_at_its_default_place(ddl: list[Event]) -> None:
    """CREATE TABLE unseen … LOCATION, then DROP: no statement printed where the table is,
    so the DROP names its default place (what the log cannot tell; right for a managed
    table, another dataset for this external one)."""
    assert statements(ddl, "default.unseen") == [("DROP", f"{WAREHOUSE}/unseen")]


def drop(table: TableIdent) -> DatasetRef:
    return DatasetRef("output", "DropTable", table=table, lifecycle="DROP", ddl=True)


def test_a_create_without_location_forgets_the_old_place() -> None:
    """A table dropped and created again without LOCATION is managed: its DDL no longer
    takes the place the old table had."""
    places = TablePlaces({"spark.sql.warehouse.dir": "file:/wh"})
    t = TableIdent("t", "default", "spark_catalog")
    places.place(DatasetRef("output", "InsertIntoHadoopFsRelationCommand", "/ext/t", t))
    assert places.place(drop(TableIdent("T", "DEFAULT"))).location == "/ext/t"
    places.place(DatasetRef("output", "CreateTable", table=t, lifecycle="CREATE", ddl=True))
    assert places.place(drop(t)).location is None


def test_tables_of_other_catalogs_are_left_alone() -> None:
    """An Iceberg table is placed by its catalog, never by what session tables showed."""
    places = TablePlaces({})
    iceberg = TableIdent("t", "db", "lake")
    places.place(DatasetRef("output", "AppendData", "/somewhere", iceberg, format="iceberg"))
    assert len(places) == 0
    assert places.place(drop(iceberg)).location is None


def test_places_are_bounded() -> None:
    """Past the bound the least recently shown table is forgotten."""
    places = TablePlaces({}, limit=2)
    for name in ("a", "b", "c"):
        places.place(DatasetRef("input", "Scan parquet", f"/ext/{name}", TableIdent(name)))
    assert len(places) == 2
    assert places.place(drop(TableIdent("a"))).location is None
    assert places.place(drop(TableIdent("c"))).location == "/ext/c"
