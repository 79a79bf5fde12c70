"""Structured Streaming from the checked-in PySpark 4.1.1 logs: one run per query start.

The logs are `tests/data/eventlogs/lakehouse/stream_*.jsonl.zst` (see NOTES.md there): a file
source into a parquet sink (`availableNow`), Kafka into a Delta table through `foreachBatch`,
an endless rate query whose driver got SIGTERM, and a query whose second micro-batch fails;
and PySpark 4.3.0's micro-batches reading several files (`eventlogs/marquez/stream_files`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema.exceptions import ValidationError

from agent.config.loader import parse_config
from agent.config.model import SparkConfig
from agent.errors import ConfigError
from agent.facets import FACET_URLS
from agent.spark.follow.application import translate_options
from agent.spark.plan.datasets import DatasetRef
from agent.spark.translate.datasets import streaming
from agent.spark.translate.datasets.descriptions import Tables
from agent.spark.translate.listener import wanted
from agent.spark.translate.model import Run, StreamQuery
from agent.spark.translate.naming import Catalog
from agent.spark.translate.options import TranslateOptions, catalog_of
from agent.spark.translate.runs.queries import APP_ENDED
from agent.spark.translate.translator import ApplicationTranslator
from tests.applog import unpacked
from tests.olschema import AGENT_SCHEMAS, schema_validator, validate_run_event
from tests.test_lakehouse_logs import QUERY_PROGRESS, QUERY_STARTED, QUERY_TERMINATED, text

Event = dict[str, Any]
TERMINAL = ("COMPLETE", "FAIL", "ABORT")
DATA = "/data/lakehouse/data"
MARQUEZ = Path(__file__).resolve().parent / "data" / "eventlogs" / "marquez"
MARQUEZ_DATA = "/data/marquez/data"
STREAM_SCHEMA = AGENT_SCHEMAS / "lineageAgent_stream.json"
NO_TABLES = Tables(Catalog())
SHAPES = (
    "stream_file_parquet",
    "stream_kafka_delta",
    "stream_sigterm",
    "stream_failure",
    "stream_iceberg",
)


def feed(
    translator: ApplicationTranslator, lines: Iterable[bytes | Mapping[str, Any]]
) -> list[Event]:
    """Feed raw lines through the pre-filter (as the pipeline does) or parsed events."""
    events: list[Event] = []
    for line in lines:
        if isinstance(line, bytes):
            if wanted(line):
                events += translator.feed(orjson.loads(line))
        else:
            events += translator.feed(line)
    return events


def lines(shape: str) -> list[bytes]:
    return [line.encode() for line in text(shape).splitlines() if line]


def replay(shape: str, **options: Any) -> tuple[ApplicationTranslator, list[Event]]:
    translator = ApplicationTranslator(TranslateOptions(namespace="spark", **options))
    return translator, feed(translator, lines(shape))


def of_type(events: list[Event], job_type: str) -> list[Event]:
    return [e for e in events if e["job"]["facets"]["jobType"]["jobType"] == job_type]


def names(datasets: list[Event]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def fields(dataset: Event) -> list[tuple[str, str]]:
    return [(f["name"], f.get("type", "")) for f in dataset["facets"]["schema"]["fields"]]


def check_lifecycle(events: list[Event]) -> None:
    """One START first and one terminal event last per run; every event schema-valid."""
    started: set[str] = set()
    ended: set[str] = set()
    for event in events:
        run = event["run"]["runId"]
        assert run not in ended
        if event["eventType"] == "START":
            assert run not in started
            started.add(run)
        else:
            assert run in started
        if event["eventType"] in TERMINAL:
            ended.add(run)
        validate_run_event(event)
    assert started == ended


@pytest.mark.parametrize("shape", SHAPES)
def test_every_streaming_log_gives_one_run_per_query_and_valid_events(shape: str) -> None:
    """Each log: the application and one STREAMING_QUERY run per query, no run per
    micro-batch (the only SQL runs are the programs' CREATE TABLE statements), every event
    valid against the official schemas and ours."""
    translator, events = replay(shape)
    check_lifecycle(events)
    kinds = {e["job"]["facets"]["jobType"]["jobType"] for e in events}
    assert kinds - {"SQL_JOB"} == {"APPLICATION", "STREAMING_QUERY"}
    statements = {e["job"]["name"].split(".")[1] for e in of_type(events, "SQL_JOB")}
    assert statements <= {"create_table"}
    query = of_type(events, "STREAMING_QUERY")
    started = [e for e in query if e["eventType"] == "START"]
    assert (
        len({e["run"]["runId"] for e in query})
        == len(started)
        == (2 if shape == "stream_iceberg" else 1)
    )
    assert len({e["job"]["name"] for e in started}) == len(started)
    for event in query:
        assert event["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
        assert event["run"]["facets"]["parent"]["job"]["name"] == f"lakehouse_{shape}"
    assert not [w for w in translator.warnings if "streaming" in w]


def test_file_source_to_parquet_names_the_directories_and_counts_the_batches() -> None:
    """availableNow file -> parquet: START at QueryStarted with the query's ids, COMPLETE at
    QueryTerminated; input = the source directory (never its files) with the scanned schema,
    output = the sink directory with the schema and column lineage of the rows the batches
    returned; counters from the progress events and the batches' tasks."""
    _, events = replay("stream_file_parquet")
    start, complete = of_type(events, "STREAMING_QUERY")
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["job"]["name"] == "lakehouse_stream_file_parquet.streaming_query.file_to_parquet"
    assert start["eventTime"] == "2026-11-24T04:47:53.925Z"  # QueryStarted's own timestamp
    facet = start["run"]["facets"]["lineageAgent_stream"]
    assert {k: facet[k] for k in ("queryId", "queryRunId", "name", "batches", "inputRows")} == {
        "queryId": "6d2864d8-95fd-4ca5-a49f-dd4b8c183df4",
        "queryRunId": "1ffa548f-f524-4580-9c17-075f22a48009",
        "name": "file_to_parquet",
        "batches": 0,
        "inputRows": 0,
    }
    assert (start["inputs"], start["outputs"]) == ([], [])  # QueryStarted names no dataset
    assert names(complete["inputs"]) == [("file", f"{DATA}/incoming")]
    assert fields(complete["inputs"][0]) == [("id", "long"), ("kind", "string")]
    statistics = complete["inputs"][0]["inputFacets"]["inputStatistics"]
    assert statistics["rowCount"] == 4  # numInputRows, summed over the progress events
    assert "outputFacets" not in complete["outputs"][0]  # a file sink counts no rows
    assert names(complete["outputs"]) == [("file", f"{DATA}/clicks_parquet")]
    assert fields(complete["outputs"][0]) == [("id", "long"), ("kind", "string")]
    lineage = complete["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert {
        (column, i["namespace"], i["name"], i["field"])
        for column, found in lineage.items()
        for i in found["inputFields"]
    } == {("id", "file", f"{DATA}/incoming", "id"), ("kind", "file", f"{DATA}/incoming", "kind")}
    facet = complete["run"]["facets"]["lineageAgent_stream"]
    assert (facet["batchId"], facet["batches"], facet["inputRows"]) == (1, 2, 4)
    assert facet["sink"] == f"FileSink[file:{DATA}/clicks_parquet]"
    assert facet["sources"] == [
        {
            "description": f"FileStreamSource[file:{DATA}/incoming]",
            "startOffset": '{"logOffset":0}',
            "endOffset": '{"logOffset":1}',
            "numInputRows": 2,
        }
    ]
    assert facet["processedRowsPerSecond"] == pytest.approx(1.5835312747426762)
    run = complete["run"]["facets"]["lineageAgent_run"]
    assert (run["recordsIn"], run["recordsOut"], run["failedTasks"]) == (4, 4, 0)


@pytest.mark.parametrize(
    ("query", "read"),
    [
        ("out", [MARQUEZ_DATA + "/in"]),
        ("joined", [MARQUEZ_DATA + "/in2", MARQUEZ_DATA + "/static"]),
    ],
)
def test_a_micro_batch_of_several_files_is_its_source_directory(
    query: str, read: list[str]
) -> None:
    """A micro-batch reading three (two) files prints `[file:<f0>, ... 2 entries]`: the
    query reads, and its column lineage names, the source directory (and the static dataset
    it is joined with), never the mark of the files Spark left out."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    raw = unpacked(MARQUEZ / "stream_files.jsonl.zst")
    events = feed(translator, [line for line in raw.splitlines() if line])
    (done,) = [
        e
        for e in of_type(events, "STREAMING_QUERY")
        if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith(f".{query}")
    ]
    assert names(done["inputs"]) == [("file", name) for name in read]
    lineage = done["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert {i["name"] for found in lineage.values() for i in found["inputFields"]} == set(read)


def test_kafka_to_delta_through_foreach_batch() -> None:
    """Kafka -> foreachBatch MERGE into Delta: the topic on the servers the option names, the
    Delta table the batch function touches (nested executions), never Delta's own log."""
    _, events = replay("stream_kafka_delta", kafka_bootstrap="127.0.0.1:9092,other:9092")
    start, complete = of_type(events, "STREAMING_QUERY")
    assert complete["eventType"] == "COMPLETE"
    assert start["job"]["name"] == "lakehouse_stream_kafka_delta.streaming_query.orders_to_delta"
    datasets = names(complete["inputs"]) + names(complete["outputs"])
    assert ("kafka://127.0.0.1:9092", "orders") in names(complete["inputs"])
    (topic,) = [d for d in complete["inputs"] if d["name"] == "orders"]
    assert topic["inputFacets"]["inputStatistics"]["rowCount"] == 7
    assert ("file", f"{DATA}/orders_delta") in datasets
    assert not [n for _, n in datasets if "_delta_log" in n or n.strip(" .") == ""]
    facet = complete["run"]["facets"]["lineageAgent_stream"]
    assert (facet["batchId"], facet["batches"], facet["inputRows"]) == (2, 3, 7)
    assert facet["sink"] == "ForeachBatchSink"
    assert facet["sources"][0]["endOffset"] == '{"orders":{"0":0,"1":7}}'
    assert complete["run"]["facets"]["lineageAgent_run"]["recordsOut"] > 0


def test_iceberg_sink_and_source_are_the_table_by_its_location() -> None:
    """An Iceberg table of a Hadoop catalog as sink (`toTable`) and as source: its location
    under the catalog's warehouse, the catalog name in symlinks, the sink's schema and the
    rows it counted; the source known from the micro-batch scan."""
    translator, events = replay("stream_iceberg")
    table = ("file", "/data/lakehouse/iceberg_hadoop/db/clicks")
    link = [
        {"namespace": "file:/data/lakehouse/iceberg_hadoop", "name": "db.clicks", "type": "TABLE"}
    ]
    write = next(e for e in of_type(events, "STREAMING_QUERY") if e["eventType"] == "COMPLETE")
    assert write["job"]["name"].endswith(".streaming_query.file_to_iceberg")
    assert names(write["inputs"]) == [("file", f"{DATA}/incoming")]
    assert names(write["outputs"]) == [table]
    assert write["outputs"][0]["facets"]["symlinks"]["identifiers"] == link
    assert fields(write["outputs"][0]) == [("id", "long"), ("kind", "string")]
    assert write["run"]["facets"]["lineageAgent_stream"]["outputRows"] == 2
    assert write["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    read = of_type(events, "STREAMING_QUERY")[-1]
    assert read["job"]["name"].endswith(".streaming_query.iceberg_to_parquet")
    assert names(read["inputs"]) == [table]
    assert read["inputs"][0]["facets"]["symlinks"]["identifiers"] == link
    assert names(read["outputs"]) == [("file", f"{DATA}/clicks_from_iceberg")]
    assert not [w for w in translator.warnings if w.startswith("streaming query")]


def test_tables_of_other_catalogs() -> None:
    """Streaming locates a table as batch plans do: a JDBC catalog's under its warehouse; a
    catalog that keeps locations in its own store (Hive, REST) names its table in `unknown`
    with the reason; a name of no configured catalog is no table."""
    catalogs = {
        "spark.sql.catalog.jcat": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.jcat.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "spark.sql.catalog.jcat.warehouse": "/wh/jdbc",
        "spark.sql.catalog.hcat": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.hcat.type": "hive",
        "spark.sql.catalog.hcat.warehouse": "/wh/hive",
    }
    tables = Tables(catalog_of(catalogs))
    jdbc = tables.table("output", "jcat.db.t")
    assert jdbc is not None
    assert jdbc.ref.location == "/wh/jdbc/db/t"
    assert (jdbc.symlink_namespace, jdbc.symlink_name) == ("file:/wh/jdbc", "db.t")
    found = tables.table("output", "hcat.db.t")
    assert found is not None
    assert found.ref.location is None
    assert found.ref.unknown_reason == (
        "the location of a table of catalog 'hcat' is not in the event log"
    )
    assert (found.symlink_namespace, found.symlink_name) == ("hcat", "db.t")
    assert tables.table("output", "other.db.t") is None
    assert tables.table("output", "db.t") is None
    query = StreamQuery("q", "r", "n")
    progress = {"batchId": 0, "sources": [], "sink": {"description": "hcat.db.t"}}
    assert streaming.add_progress(query, progress, None, tables) == [
        "sink 'hcat.db.t': the location of a table of catalog 'hcat' is not in the event log"
    ]
    run = Run("stream", "00000000-0000-7000-8000-000000000000", "STREAMING_QUERY", 0, stream=query)
    outputs = list(streaming.stream_datasets(run, Catalog()).outputs.values())
    assert names(outputs) == [("unknown", "hcat.db.t")]
    assert outputs[0]["facets"]["symlinks"]["identifiers"][0]["name"] == "db.t"


def test_tables_of_a_non_iceberg_catalog() -> None:
    """A V2 catalog of another kind is named, its location not: the log does not show it."""
    tables = Tables(catalog_of({"spark.sql.catalog.other": "com.example.Catalog"}))
    found = tables.table("input", "other.db.t")
    assert found is not None
    assert (found.ref.location, found.symlink_namespace) == (None, "other")
    assert Tables(catalog_of({})).table("input", "spark_catalog.db.t") is None


def test_kafka_servers_unknown_without_the_option() -> None:
    """The log never shows a read's bootstrap servers: without the option the topic is in
    `kafka://unknown`."""
    _, events = replay("stream_kafka_delta")
    complete = of_type(events, "STREAMING_QUERY")[-1]
    assert ("kafka://unknown", "orders") in names(complete["inputs"])


def test_sigterm_leaves_the_query_open_and_it_ends_abort() -> None:
    """SIGTERM to the driver: no QueryTerminatedEvent, and the running batch's job ends
    after ApplicationEnd with a message that reads like a failure: the query ends ABORT."""
    _, events = replay("stream_sigterm")
    start, end = of_type(events, "STREAMING_QUERY")
    assert end["eventType"] == "ABORT"
    assert end["run"]["facets"]["errorMessage"]["message"] == APP_ENDED
    assert (start["inputs"], names(end["inputs"])) == ([], [])  # a rate source: no dataset
    assert names(end["outputs"]) == [("file", f"{DATA}/ticks")]
    # the rate source's scan prints no types: only `value#1L` says it is a long
    assert fields(end["outputs"][0]) == [("timestamp", ""), ("value", "long")]
    facet = end["run"]["facets"]["lineageAgent_stream"]
    assert (facet["batchId"], facet["batches"], facet["inputRows"]) == (2, 3, 55)
    assert [e["eventType"] for e in of_type(events, "APPLICATION")] == ["START", "ABORT"]
    assert events[-1]["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"


def test_failed_query_ends_fail_with_the_exception_and_its_error_class() -> None:
    """A failing micro-batch: QueryTerminatedEvent's exception in errorMessage (message and
    the JVM stack), its error class in lineageAgent_stream."""
    _, events = replay("stream_failure")
    end = of_type(events, "STREAMING_QUERY")[-1]
    assert end["eventType"] == "FAIL"
    error = end["run"]["facets"]["errorMessage"]
    assert error["message"].startswith(
        "org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT] The value 'three'"
    )
    assert "\tat " not in error["message"]
    assert error["stackTrace"].startswith(error["message"])
    assert "\n\tat org.apache.spark" in error["stackTrace"]
    assert error["programmingLanguage"] == "JAVA"
    assert end["run"]["facets"]["lineageAgent_stream"]["errorClass"] == "CAST_INVALID_INPUT"
    assert names(end["inputs"]) == [("file", f"{DATA}/incoming")]
    assert names(end["outputs"]) == [("file", f"{DATA}/quantities")]
    assert fields(end["outputs"][0]) == [("id", "long"), ("qty", "integer")]  # the cast's type


def test_a_failed_micro_batch_is_the_query_s_even_when_its_execution_ends_first() -> None:
    """Spark may log the failed batch's SQLExecutionEnd before its JobEnd (seen in a real
    run): the failure still ends the query FAIL and the application COMPLETE."""
    logged = lines("stream_failure")
    job_end = next(
        i
        for i, line in enumerate(logged)
        if b'"SparkListenerJobEnd"' in line and b"JobFailed" in line
    )
    assert b"SparkListenerSQLExecutionEnd" in logged[job_end + 1]
    logged[job_end], logged[job_end + 1] = logged[job_end + 1], logged[job_end]
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    events = feed(translator, logged)
    assert of_type(events, "STREAMING_QUERY")[-1]["eventType"] == "FAIL"
    assert of_type(events, "APPLICATION")[-1]["eventType"] == "COMPLETE"


def test_statistics_only_on_terminal_events_and_only_for_one_dataset_per_description() -> None:
    """Row statistics from the progress events appear on the terminal event only, and not
    for a source whose description names several datasets (two topics counted together)."""
    events = [orjson.loads(line) for line in lines("stream_kafka_delta")]
    for event in events:
        if event["Event"] == QUERY_PROGRESS:
            event["progress"]["sources"][0]["description"] = "KafkaV2[Subscribe[orders, more]]"
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    query = of_type(feed(translator, events), "STREAMING_QUERY")
    assert "inputStatistics" not in json.dumps(query[:-1])
    topics = [d for d in query[-1]["inputs"] if d["namespace"] == "kafka://unknown"]
    assert [(d["name"], "inputFacets" in d) for d in topics] == [("orders", False), ("more", False)]


def test_running_events_come_from_progress_events_at_the_interval() -> None:
    """With a running interval, each progress event (the interval passed) gives one RUNNING
    of the query run with the batch it reports; between progress events none."""
    _, events = replay("stream_sigterm", running_interval_ms=1)
    check_lifecycle(events)
    query = of_type(events, "STREAMING_QUERY")
    running = [e for e in query if e["eventType"] == "RUNNING"]
    facets = [e["run"]["facets"]["lineageAgent_stream"] for e in running]
    assert [(f["batchId"], f["inputRows"]) for f in facets] == [(0, 0), (1, 45), (2, 55)]
    assert names(running[-1]["outputs"]) == [("file", f"{DATA}/ticks")]
    assert "inputStatistics" not in json.dumps(running)


def idle_event(run_id: str, timestamp: str) -> Event:
    """A QueryIdleEvent as PySpark 4.1.1 writes it (measured; no checked-in log has one: a
    query posts it after `noDataProgressEventInterval`, 10 s, without new data)."""
    return {
        "Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent",
        "id": "c14c9efa-940d-4548-a3aa-80e84e0bf7d2",
        "runId": run_id,
        "timestamp": timestamp,
    }


def test_an_idle_query_still_gets_running_events() -> None:
    """A QueryIdleEvent (no progress while no data comes) gives RUNNING at the interval too,
    with the counters of the last progress; passing the raw-line pre-filter."""
    body = lines("stream_sigterm")
    at = next(i for i, line in enumerate(body) if b"SparkListenerApplicationEnd" in line)
    idle = idle_event("0ad548c4-43fe-45cb-9aa9-d07088a60f88", "2026-11-24T04:55:00.000Z")
    raw = json.dumps(idle, separators=(",", ":")).encode()
    assert wanted(raw)
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", running_interval_ms=60_000)
    )
    out = feed(translator, [*body[:at], raw, *body[at:]])
    check_lifecycle(out)
    query = of_type(out, "STREAMING_QUERY")
    assert [e["eventType"] for e in query] == ["START", "RUNNING", "ABORT"]
    assert query[1]["eventTime"] == "2026-11-24T04:55:00Z"
    assert query[1]["run"]["facets"]["lineageAgent_stream"]["batchId"] == 2
    other = idle_event("00000000-43fe-45cb-9aa9-d07088a60f88", "2026-11-24T04:56:00.000Z")
    assert translator.feed(other) == []  # a run it does not follow: nothing


def test_job_stop_ends_the_open_query_abort_with_the_reason() -> None:
    """After `job stop` the query still open when the application ends is ABORT with the
    stop's reason."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    translator.request_stop(reason="maintenance", requested_by="uid 0 (root)")
    end = of_type(feed(translator, lines("stream_sigterm")), "STREAMING_QUERY")[-1]
    assert end["eventType"] == "ABORT"
    assert end["run"]["facets"]["errorMessage"]["message"] == "stopped by uid 0 (root): maintenance"


def test_lost_driver_ends_the_open_query_fail() -> None:
    """A driver gone without ApplicationEnd: the open query ends FAIL with the given reason."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    body = lines("stream_sigterm")
    cut = next(i for i, line in enumerate(body) if b"SparkListenerApplicationEnd" in line)
    feed(translator, body[:cut])
    out = translator.close(cause="driver_lost", time_ms=0, message="driver gone")
    query = of_type(out, "STREAMING_QUERY")
    assert [(e["eventType"], e["run"]["facets"]["errorMessage"]["message"]) for e in query] == [
        ("FAIL", "driver gone")
    ]


def test_restart_is_a_new_run_of_the_same_job() -> None:
    """The same query started again (same id, new runId) is a second run of the same job."""
    events = [orjson.loads(line) for line in lines("stream_file_parquet")]
    query_events = [
        e for e in events if e["Event"] in (QUERY_STARTED, QUERY_PROGRESS, QUERY_TERMINATED)
    ]
    again = []
    for event in copy.deepcopy(query_events):
        holder = event.get("progress", event)
        holder["runId"] = "2ffa548f-f524-4580-9c17-075f22a48009"
        again.append(event)
    at = next(i for i, e in enumerate(events) if e["Event"] == "SparkListenerApplicationEnd")
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    out = feed(translator, [*events[:at], *again, *events[at:]])
    check_lifecycle(out)
    query = of_type(out, "STREAMING_QUERY")
    assert len({e["run"]["runId"] for e in query}) == 2
    assert {e["job"]["name"] for e in query} == {
        "lakehouse_stream_file_parquet.streaming_query.file_to_parquet"
    }
    assert [e["eventType"] for e in query] == ["START", "COMPLETE", "START", "COMPLETE"]


def test_a_query_without_a_name_is_named_by_its_id() -> None:
    """No queryName: the job is named after the query id, stable across restarts."""
    events = [orjson.loads(line) for line in lines("stream_file_parquet")]
    for event in events:
        if event["Event"] == QUERY_STARTED:
            event["name"] = None
        if event["Event"] == QUERY_PROGRESS:
            event["progress"]["name"] = None
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    query = of_type(feed(translator, events), "STREAMING_QUERY")
    assert {e["job"]["name"] for e in query} == {
        "lakehouse_stream_file_parquet.streaming_query.6d2864d8-95fd-4ca5-a49f-dd4b8c183df4"
    }
    assert "name" not in query[-1]["run"]["facets"]["lineageAgent_stream"]


def test_micro_batch_known_by_its_job_group_when_its_description_is_not_spark_s() -> None:
    """A micro-batch whose description is not Spark's (one the user set) is still known by
    its job group, the query's runId: no run of its own."""
    events = [orjson.loads(line) for line in lines("stream_file_parquet")]
    for event in events:
        if event["Event"].endswith("SparkListenerSQLExecutionStart"):
            event["description"] = "nightly clicks"
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    out = feed(translator, events)
    assert {e["job"]["facets"]["jobType"]["jobType"] for e in out} == {
        "APPLICATION",
        "STREAMING_QUERY",
    }
    assert names(of_type(out, "STREAMING_QUERY")[-1]["inputs"]) == [("file", f"{DATA}/incoming")]


def test_unrecognized_source_and_sink_stay_valid_and_are_named_in_warnings() -> None:
    """Descriptions the agent does not know give no dataset named after them (the run's
    `lineageAgent_unnamedDatasets` facet names them), valid events and one warning each
    naming what was not understood."""
    events = [orjson.loads(line) for line in lines("stream_file_parquet")]
    for event in events:
        if event["Event"] == QUERY_PROGRESS:
            event["progress"]["sources"][0]["description"] = "MysterySource[abc]"
            event["progress"]["sink"]["description"] = "org.example.WeirdSink@1f2e"
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    out = feed(translator, events)
    check_lifecycle(out)
    end = of_type(out, "STREAMING_QUERY")[-1]
    assert "MysterySource[abc]" not in [name for _, name in names(end["inputs"])]
    assert end["outputs"] == []
    reasons = [
        d["reason"] for d in end["run"]["facets"]["lineageAgent_unnamedDatasets"]["datasets"]
    ]
    assert any("MysterySource[abc]" in r for r in reasons), reasons
    assert any("org.example.WeirdSink@1f2e" in r for r in reasons), reasons
    assert translator.warnings == [
        "streaming query file_to_parquet: source 'MysterySource[abc]' not understood",
        "streaming query file_to_parquet: sink 'org.example.WeirdSink@1f2e' not understood",
    ]


def test_micro_batches_as_child_runs_of_the_query_run() -> None:
    """streaming_batch_runs: each micro-batch is a run of job `<query job>.micro_batch`, a
    child of the query run, ending as its execution did; the query run is unchanged."""
    _, plain = replay("stream_failure")
    _, events = replay("stream_failure", streaming_batch_runs=True)
    check_lifecycle(events)
    query = of_type(events, "STREAMING_QUERY")
    batches = [e for e in of_type(events, "SQL_JOB") if e["eventType"] != "START"]
    job = "lakehouse_stream_failure.streaming_query.bad_cast"
    assert [(e["job"]["name"], e["eventType"]) for e in batches] == [
        (f"{job}.micro_batch", "COMPLETE"),
        (f"{job}.micro_batch", "FAIL"),
    ]
    for event in batches:
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == query[0]["run"]["runId"]
        assert parent["job"]["name"] == job
        assert parent["root"]["job"]["name"] == "lakehouse_stream_failure"
        assert event["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert [e["run"]["facets"]["lineageAgent_stream"] for e in query] == [
        e["run"]["facets"]["lineageAgent_stream"] for e in of_type(plain, "STREAMING_QUERY")
    ]


def test_stream_facet_schema_accepts_what_is_emitted_and_refuses_a_broken_one() -> None:
    """Every lineageAgent_stream facet of the four logs validates against its JSON schema
    file; one without its query id does not."""
    url = FACET_URLS["lineageAgent_stream"]
    assert url.split("#")[0] == json.loads(STREAM_SCHEMA.read_text())["$id"]
    validator = schema_validator(url)
    seen = 0
    for shape in SHAPES:
        for event in of_type(replay(shape, running_interval_ms=1)[1], "STREAMING_QUERY"):
            validator.validate(event["run"]["facets"]["lineageAgent_stream"])
            seen += 1
    assert seen >= 10
    broken = dict(event["run"]["facets"]["lineageAgent_stream"])
    del broken["queryId"]
    with pytest.raises(ValidationError):
        validator.validate(broken)


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("KafkaV2[Subscribe[orders]]", [("kafka://h:1", "orders")]),
        ("KafkaV2[Subscribe[a, b]]", [("kafka://h:1", "a"), ("kafka://h:1", "b")]),
        ("KafkaV2[SubscribePattern[events-.*]]", [("kafka://h:1", "events-.*")]),
        (
            "KafkaV2[Assign[clicks-0, clicks-1, x-y-2]]",
            [("kafka://h:1", "clicks"), ("kafka://h:1", "x-y")],
        ),
        ("FileStreamSource[file:/in]", [("file", "/in")]),
        ("DeltaSource[s3a://bucket/t]", [("s3://bucket", "t")]),
        ("RateStreamV2[rowsPerSecond=5, rampUpTimeSeconds=0, numPartitions=default", []),
    ],
)
def test_source_descriptions(description: str, expected: list[tuple[str, str]]) -> None:
    """Source descriptions Spark and the connectors write, and the datasets they name."""
    query = StreamQuery("q", "r", "n")
    progress = {"batchId": 0, "sources": [{"description": description}], "sink": {}}
    assert streaming.add_progress(query, progress, "h:1", NO_TABLES) == []
    run = Run("stream", "00000000-0000-7000-8000-000000000000", "STREAMING_QUERY", 0, stream=query)
    assert names(list(streaming.stream_datasets(run, Catalog()).inputs.values())) == expected


def test_pattern_source_is_marked_a_pattern() -> None:
    """`KafkaV2[SubscribePattern[p]]` is named by its pattern with a schema-valid
    `lineageAgent_topicPattern` facet; `Subscribe[t]` names a topic without one."""
    query = StreamQuery("q", "r", "n")
    sources = [
        {"description": "KafkaV2[SubscribePattern[events-.*]]"},
        {"description": "KafkaV2[Subscribe[orders]]"},
    ]
    progress = {"batchId": 0, "sources": sources, "sink": {}}
    assert streaming.add_progress(query, progress, "h:1", NO_TABLES) == []
    run = Run("stream", "00000000-0000-7000-8000-000000000000", "STREAMING_QUERY", 0, stream=query)
    inputs = list(streaming.stream_datasets(run, Catalog()).inputs.values())
    marked = {d["name"]: d.get("facets", {}).get("lineageAgent_topicPattern") for d in inputs}
    assert marked["orders"] is None
    assert marked["events-.*"] is not None and marked["events-.*"]["pattern"] == "events-.*"
    url = marked["events-.*"]["_schemaURL"]
    schema_validator(url).validate(marked["events-.*"])


@pytest.mark.parametrize(
    ("description", "expected", "notes"),
    [
        ("FileSink[file:/out]", [("file", "/out")], []),
        ("DeltaSink[/tables/clicks]", [("file", "/tables/clicks")], []),  # a path sink
        ("DeltaSink[file:/wh/tbl_out]", [("file", "/wh/tbl_out")], []),  # toTable
        ("ForeachBatchSink", [], []),
        ("org.apache.spark.sql.execution.streaming.ConsoleTable$@7d1f2b", [], []),
        (
            "org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@2926db66",
            [],
            [
                "sink 'org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable@2926db66': "
                "the event log does not show a Kafka sink's topic"
            ],
        ),
    ],
)
def test_sink_descriptions(
    description: str, expected: list[tuple[str, str]], notes: list[str]
) -> None:
    """Sink descriptions as Spark 4.1.1, Delta 4.3.1 and the Kafka connector write them
    (measured), the datasets they name and what the warnings say; the rows a Kafka sink
    counts are summed, a file sink's -1 is left out."""
    query = StreamQuery("q", "r", "n")
    for rows in (2, 3):
        written = rows if "Kafka" in description else -1
        sink = {"description": description, "numOutputRows": written}
        progress = {"batchId": 0, "sources": [], "sink": sink}
        assert streaming.add_progress(query, progress, None, NO_TABLES) == (
            notes if rows == 2 else []
        )
    run = Run("stream", "00000000-0000-7000-8000-000000000000", "STREAMING_QUERY", 0, stream=query)
    assert names(list(streaming.stream_datasets(run, Catalog()).outputs.values())) == expected
    facet = streaming.stream_facet(query)
    assert facet.get("outputRows") == (5 if "Kafka" in description else None)


def test_micro_batch_descriptions() -> None:
    """A micro-batch execution is known by its description, Delta's prefixes and suffixes
    around it included."""
    text_ = (
        "q\nid = 6D2864D8-95fd-4ca5-a49f-dd4b8c183df4\n"
        "runId = 1ffa548f-f524-4580-9c17-075f22a48009\nbatch = 12"
    )
    expected = ("6d2864d8-95fd-4ca5-a49f-dd4b8c183df4", "1ffa548f-f524-4580-9c17-075f22a48009", 12)
    assert streaming.micro_batch_of(text_) == expected
    assert streaming.micro_batch_of(f"Delta: {text_} - MERGE operation - x") == expected
    assert streaming.micro_batch_of("create the delta target") is None
    assert streaming.micro_batch_of(None) is None


def test_streaming_batch_runs_is_a_spark_config_key() -> None:
    """`spark.streaming_batch_runs` (default off) reaches the translator's options."""
    assert SparkConfig().streaming_batch_runs is False
    config = parse_config("lineage:\nspark:\n  streaming_batch_runs: true\n", "config.yaml")
    assert config.spark.streaming_batch_runs is True
    assert translate_options(config.spark, "spark").streaming_batch_runs is True
    with pytest.raises(ConfigError) as caught:
        parse_config("lineage:\nspark:\n  streaming_batch_runs: 3\n", "config.yaml")
    assert str(caught.value) == (
        "config.yaml:3: spark.streaming_batch_runs: expected true or false, got 3"
    )


def test_a_repeated_query_start_is_ignored() -> None:
    """A QueryStartedEvent of a runId already seen (a line written twice) starts nothing."""
    events = [orjson.loads(line) for line in lines("stream_file_parquet")]
    started = next(e for e in events if e["Event"] == QUERY_STARTED)
    at = next(i for i, e in enumerate(events) if e["Event"] == "SparkListenerApplicationEnd")
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    out = feed(translator, [*events[:at], started, *events[at:]])
    check_lifecycle(out)
    assert len(of_type(out, "STREAMING_QUERY")) == 2
    assert translator.warnings == [
        "QueryStartedEvent ignored: run 1ffa548f-f524-4580-9c17-075f22a48009 seen"
    ]


def test_odd_values_never_make_an_invalid_event() -> None:
    """A QueryStartedEvent whose ids are no UUIDs is malformed (skipped, counted); negative
    batch ids and rates from a damaged progress event stay out of the facet."""
    events = [orjson.loads(line) for line in lines("stream_file_parquet")]
    started = next(e for e in events if e["Event"] == QUERY_STARTED)
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    assert translator.feed({**started, "runId": "not-a-uuid"}) == []
    assert translator.malformed == [("StreamingQueryListener$QueryStartedEvent", "runId")]
    for event in events:
        if event["Event"] == QUERY_PROGRESS:
            event["progress"]["batchId"] = -3
            event["progress"]["sources"][0]["processedRowsPerSecond"] = -1.5
    out = feed(ApplicationTranslator(TranslateOptions(namespace="spark")), events)
    check_lifecycle(out)
    facet = of_type(out, "STREAMING_QUERY")[-1]["run"]["facets"]["lineageAgent_stream"]
    assert "batchId" not in facet and "processedRowsPerSecond" not in facet


def test_micro_batch_datasets_are_bounded_and_the_overflow_said_once() -> None:
    """A query keeps at most MAX_REFS datasets from its micro-batches; the first one left
    out is reported, the next ones are not."""
    query = StreamQuery("q", "r", "n")
    refs = [DatasetRef("output", "W", location=f"/t/{n}") for n in range(streaming.MAX_REFS)]
    assert streaming.absorb(query, refs)
    assert not streaming.absorb(query, [DatasetRef("output", "W", location="/t/more")])
    assert streaming.absorb(query, [DatasetRef("output", "W", location="/t/again")])
    assert streaming.absorb(query, refs[:3])  # known ones are no overflow
    assert len(query.refs) == streaming.MAX_REFS
