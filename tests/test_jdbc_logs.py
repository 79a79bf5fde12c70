"""JDBC datasets named from what an application's log shows, replayed from the checked-in
real logs (tests/data/eventlogs/jdbc, see its NOTES.md): a read takes the url of the same
application's earlier write of the table, a V2 JDBC catalog write its catalog's url, and a
url the log never shows stays `unknown`.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.applog import read_through, staged, unpacked
from tests.olschema import validate_run_event

LOGS = Path(__file__).resolve().parent / "data" / "eventlogs" / "jdbc"
SHAPES = ("jdbc_postgres", "jdbc_redacted", "jdbc_derby", "jdbc_v2_catalog")
POSTGRES = "postgres://127.0.0.1:57147"
DERBY = "derby:memory:peer"
Event = dict[str, Any]


def spark_events(shape: str) -> list[Event]:
    """The SparkListener events of one checked-in log, in log order."""
    raw = (LOGS / f"{shape}.jsonl.zst").read_bytes()
    text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@functools.cache
def replayed(shape: str, work: Path) -> tuple[list[Event], list[str]]:
    """The RunEvents and warnings of one checked-in log, replayed through `ApplicationLog`."""
    ref = staged(work / shape, unpacked(LOGS / f"{shape}.jsonl.zst"))
    return read_through(ref, TranslateOptions(namespace="jdbc"))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("jdbc")
    replayed.cache_clear()


def translated(events: list[Event]) -> tuple[list[Event], list[str]]:
    """RunEvents and warnings of SparkListener events fed to a translator in order."""
    translator = ApplicationTranslator(TranslateOptions(namespace="jdbc"))
    out = [run_event for event in events for run_event in translator.feed(event)]
    return out, translator.warnings


def names(datasets: list[Event]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def of_job(events: list[Event], part: str) -> list[Event]:
    """The START and terminal events of the run whose job name contains `part`."""
    return [e for e in events if part in e["job"]["name"] and e["eventType"] != "RUNNING"]


def column_sources(event: Event) -> dict[str, set[tuple[str, str, str, str]]]:
    """Output field -> {(namespace, name, field, subtype)}; `*` holds the dataset level."""
    facet = event["outputs"][0]["facets"]["columnLineage"]
    found = {
        field: {
            (i["namespace"], i["name"], i["field"], i["transformations"][0]["subtype"])
            for i in entry["inputFields"]
        }
        for field, entry in facet["fields"].items()
    }
    found["*"] = {
        (i["namespace"], i["name"], i["field"], i["transformations"][0]["subtype"])
        for i in facet.get("dataset", [])
    }
    return found


@pytest.mark.parametrize("shape", SHAPES)
def test_every_event_is_schema_valid(shape: str, work: Path) -> None:
    """Every event of the JDBC logs validates against the official schemas."""
    events, _ = replayed(shape, work)
    assert events
    for event in events:
        validate_run_event(event)


def test_read_takes_the_url_of_the_earlier_write(work: Path) -> None:
    """The PostgreSQL read is named by the url its application's write of the table showed,
    on START and COMPLETE, with its column lineage, and without a warning."""
    events, warnings = replayed("jdbc_postgres", work)
    (_, write_end) = of_job(events, "save_into_data_source_command")
    assert names(write_end["outputs"]) == [(POSTGRES, "lineage.public.orders")]
    read = of_job(events, "jdbc_postgres_jdbc_out")
    assert [e["eventType"] for e in read] == ["START", "COMPLETE"]
    for event in read:
        assert names(event["inputs"]) == [(POSTGRES, "lineage.public.orders")]
        assert event["inputs"][0]["facets"]["dataSource"]["uri"] == POSTGRES
    source = (POSTGRES, "lineage.public.orders")
    assert column_sources(read[1]) == {
        "order_id": {(*source, "order_id", "IDENTITY")},
        "amount": {(*source, "amount", "IDENTITY")},
        "*": {(*source, "amount", "FILTER")},  # the filter pushed into the scan
    }
    assert not [w for w in warnings if "public.orders" in w]


def test_derby_read_and_v2_catalog_write_are_named_like_the_v1_write(work: Path) -> None:
    """In-memory Derby: the read after the V1 write and the INSERT through the V2 JDBC
    catalog (`spark.sql.catalog.derby.url`) are `derby:memory:peer`, as the write is."""
    events, warnings = replayed("jdbc_derby", work)
    table = (DERBY, "APP.PEOPLE")
    (_, write) = of_job(events, "save_into_data_source_command")
    assert names(write["outputs"]) == [table]
    (_, read) = of_job(events, "jdbc_derby_jdbc_read")
    assert names(read["inputs"]) == [table]
    assert column_sources(read)["name"] == {(*table, "name", "TRANSFORMATION")}  # lower(NAME)
    (_, append) = of_job(events, "append_data_exec_v1")
    assert names(append["outputs"]) == [table]
    assert not [w for w in warnings if "APP.PEOPLE" in w]


def test_a_v2_catalog_read_is_named_by_its_catalog(work: Path) -> None:
    """A read of a V2 JDBC catalog's table names its catalog: it takes that catalog's url,
    as its INSERT does, and the filter pushed into the database is an INDIRECT FILTER."""
    events, warnings = replayed("jdbc_v2_catalog", work)
    table = ("derby:memory:v2", "APP.T")
    (_, append) = of_job(events, "append_data_exec_v1")
    assert names(append["outputs"]) == [table]
    (_, read) = of_job(events, "jdbcv2_out")
    assert names(read["inputs"]) == [table]
    assert column_sources(read) == {
        "id": {(*table, "id", "IDENTITY")},
        "name": {(*table, "name", "IDENTITY")},
        "*": {(*table, "id", "FILTER")},
    }
    assert warnings == []


def test_a_url_the_log_never_shows_stays_unknown(work: Path) -> None:
    """Under Spark's default redaction no event names the url: the write is
    `unknown:public.hidden`, and the warning says why without the url."""
    events, warnings = replayed("jdbc_redacted", work)
    (_, write) = of_job(events, "save_into_data_source_command")
    assert names(write["outputs"]) == [("unknown", "public.hidden")]
    assert warnings == [
        "JDBC table public.hidden is written, but its url is redacted in the event log "
        "(spark.sql.redaction.options.regex) in execution 60"
    ]


def test_a_read_before_any_url_stays_unknown() -> None:
    """A read logged before the write that shows the url keeps `unknown` on both its
    events: names never change within a run, and a later write teaches only later reads."""
    events = spark_events("jdbc_postgres")
    starts = [e for e in events if e["Event"].endswith("SQLExecutionStart")]
    write, read = starts[0], starts[2]
    assert "SaveIntoDataSourceCommand" in write["physicalPlanDescription"]
    assert "Scan JDBCRelation(public.orders)" in read["physicalPlanDescription"]
    # the read's executions (its start, metrics, end) moved before the write's
    moved = [e for e in events if e.get("executionId") == read["executionId"]]
    rest = [e for e in events if e.get("executionId") != read["executionId"]]
    at = rest.index(write)
    out, warnings = translated([*rest[:at], *moved, *rest[at:]])
    read_run = of_job(out, "jdbc_postgres_jdbc_out")
    assert [names(e["inputs"]) for e in read_run] == [[("unknown", "public.orders")]] * 2
    assert (
        "JDBC table public.orders is read, but its url is not in the event log in execution 59"
        in warnings
    )


def test_credentials_in_the_url_reach_no_name_event_or_warning() -> None:
    """A url with a user, a password and parameters names the read by host and database
    only; neither they nor the url reach an event or a warning."""
    events = copy.deepcopy(spark_events("jdbc_postgres"))
    secret = "jdbc:postgresql://spark:hunter2@127.0.0.1:57147/lineage?password=hunter2&ssl=true"
    for event in events:
        if event["Event"].endswith("SQLExecutionStart"):
            plan = event["physicalPlanDescription"]
            plan = plan.replace("url=jdbc:postgresql://127.0.0.1:57147/lineage", f"url={secret}")
            event["physicalPlanDescription"] = plan
    out, warnings = translated(events)
    (_, read) = of_job(out, "jdbc_postgres_jdbc_out")
    assert names(read["inputs"]) == [(POSTGRES, "lineage.public.orders")]
    text = json.dumps(out) + "\n".join(warnings)
    assert "hunter2" not in text and "spark:" not in text and "ssl" not in text


def test_a_catalog_configured_at_run_time_names_its_v2_writes() -> None:
    """A V2 JDBC catalog configured in the session (`modifiedConfigs`) names its writes;
    with two, the one whose url an earlier write of the table showed, else none."""
    events = copy.deepcopy(spark_events("jdbc_derby"))
    for event in events:
        if event["Event"] == "SparkListenerEnvironmentUpdate":
            props = event["Spark Properties"]
            catalog = props.pop("spark.sql.catalog.derby")
            url = props.pop("spark.sql.catalog.derby.url")
    appended = next(
        e
        for e in events
        if e["Event"].endswith("SQLExecutionStart")
        and "AppendDataExecV1" in e["sparkPlanInfo"]["nodeName"]
    )
    appended["modifiedConfigs"] = {"spark.sql.catalog.rt": catalog, "spark.sql.catalog.rt.url": url}
    out, _ = translated(events)
    (_, append) = of_job(out, "append_data_exec_v1")
    assert names(append["outputs"]) == [(DERBY, "APP.PEOPLE")]
    appended["modifiedConfigs"] |= {
        "spark.sql.catalog.other": catalog,
        "spark.sql.catalog.other.url": "jdbc:derby:memory:other",
    }
    out, _ = translated(events)  # the catalog whose url the V1 write of the table showed
    (_, append) = of_job(out, "append_data_exec_v1")
    assert names(append["outputs"]) == [(DERBY, "APP.PEOPLE")]
    appended["modifiedConfigs"]["spark.sql.catalog.rt.url"] = "jdbc:derby:memory:third"
    out, warnings = translated(events)
    (_, append) = of_job(out, "append_data_exec_v1")
    assert names(append["outputs"]) == [("unknown", "APP.PEOPLE")]
    assert (
        "JDBC table APP.PEOPLE is written, but its url is not in the event log in execution 65"
        in warnings
    )
