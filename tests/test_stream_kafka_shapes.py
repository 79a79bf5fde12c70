"""Kafka writes and Structured Streaming shapes the first translation missed, replayed from
the checked-in PySpark 4.1.1 logs `kafka_sink_columns`, `stream_kafka_window`,
`stream_join_delta` and `stream_fail_caught` (tests/data/make_lakehouse_logs.py; what each
log holds: tests/data/eventlogs/lakehouse/NOTES.md)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from agent.spark.plan.datasets import DatasetRef
from agent.spark.translate.datasets import streaming
from agent.spark.translate.facets.verdict import Verdict
from agent.spark.translate.listener import wanted
from agent.spark.translate.model import Run, StreamQuery
from agent.spark.translate.naming import Catalog
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.test_lakehouse_logs import text
from tests.test_streaming import (
    DATA,
    NO_TABLES,
    check_lifecycle,
    fields,
    names,
    of_type,
    replay,
)

Event = dict[str, Any]
EXEC_ID = "fedcba9876543210fedcba9876543210"
KAFKA_FIELDS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def lineage(dataset: Event) -> dict[str, list[tuple[str, str, str]]]:
    """Output column -> its input fields as (namespace, name, field)."""
    facet = dataset.get("facets", {}).get("columnLineage", {"fields": {}})
    return {
        column: [(i["namespace"], i["name"], i["field"]) for i in entry["inputFields"]]
        for column, entry in facet["fields"].items()
    }


def terminal(events: list[Event], job_type: str) -> list[Event]:
    return [e for e in of_type(events, job_type) if e["eventType"] != "START"]


def test_streaming_window_aggregation_from_kafka_has_column_lineage() -> None:
    """Kafka -> from_json -> watermark -> window sum into files: each grouped or summed
    column comes from the topic's `value`, typed from the JSON schema; `count(*)` reads no
    column; the watermark's filter and the grouping are dataset-level."""
    _, events = replay("stream_kafka_window")
    check_lifecycle(events)
    (end,) = terminal(events, "STREAMING_QUERY")
    assert names(end["inputs"]) == [("kafka://unknown", "meter-readings")]
    (sink,) = end["outputs"]
    assert names([sink]) == [("file", f"{DATA}/meter_windows")]
    assert fields(sink) == [
        ("window_start", "timestamp"),
        ("meter", "string"),
        ("total_kwh", "double"),
        ("readings", "long"),
    ]
    value = [("kafka://unknown", "meter-readings", "value")]
    assert lineage(sink) == {"window_start": value, "meter": value, "total_kwh": value}
    dataset = sink["facets"]["columnLineage"]["dataset"]
    assert {t["subtype"] for d in dataset for t in d["transformations"]} == {"FILTER", "GROUP_BY"}


def test_stream_static_join_names_directories_never_cut_file_lists() -> None:
    """A file stream (two long file names per micro-batch, printed `[…, ... 1 entries]`)
    joined with a parquet dimension into Delta, then the same stream alone: datasets and
    column lineage name the source directory and the dimension, never a cut list."""
    _, events = replay("stream_join_delta")
    check_lifecycle(events)
    joined, copied = terminal(events, "STREAMING_QUERY")
    assert "entries" not in json.dumps(events)
    assert sorted(names(joined["inputs"])) == [
        ("file", f"{DATA}/sales_in"),
        ("file", f"{DATA}/shops"),
    ]
    assert names(joined["outputs"]) == [("file", f"{DATA}/sales_by_shop")]
    sales, shops = ("file", f"{DATA}/sales_in"), ("file", f"{DATA}/shops")
    assert lineage(joined["outputs"][0]) == {
        "sale": [(*sales, "sale")],
        "shop": [(*shops, "shop")],
        "zone": [(*shops, "zone")],
        "cents": [(*sales, "euros")],
    }
    assert names(copied["inputs"]) == [sales]
    assert lineage(copied["outputs"][0]) == {
        "sale": [(*sales, "sale")],
        "euros": [(*sales, "euros")],
    }


def test_caught_streaming_failure_fails_the_query_not_the_application() -> None:
    """The program caught its query's failure and stopped cleanly (ApplicationEnd, nothing
    else failed): the query's run ends FAIL with the exception, the application COMPLETE."""
    _, events = replay("stream_fail_caught")
    check_lifecycle(events)
    (query,) = terminal(events, "STREAMING_QUERY")
    assert query["eventType"] == "FAIL"
    assert "FAILED_READ_FILE" in query["run"]["facets"]["errorMessage"]["message"]
    (app,) = terminal(events, "APPLICATION")
    assert (app["eventType"], "errorMessage" in app["run"]["facets"]) == ("COMPLETE", False)


def _with_exec(shape: str) -> list[bytes]:
    """The shape's log as `lineage-agent exec` would have started it."""
    out = []
    for line in text(shape).splitlines():
        if line and '"SparkListenerEnvironmentUpdate"' in line[:64]:
            event = json.loads(line)
            event["Spark Properties"]["spark.lineageAgent.exec"] = EXEC_ID
            line = json.dumps(event, separators=(",", ":"))
        if line:
            out.append(line.encode())
    return out


def test_exec_verdict_decides_the_end_of_an_application_whose_query_failed() -> None:
    """With `lineage-agent exec`, the program's exit status decides: 1 (the failure was not
    caught) fails the application, 0 completes it; the query's run is FAIL either way."""
    for status, state in ((1, "FAIL"), (0, "COMPLETE")):
        translator = ApplicationTranslator(TranslateOptions(namespace="spark", await_verdict=True))
        events = [e for line in _with_exec("stream_fail_caught") if wanted(line)
                  for e in translator.feed(orjson.loads(line))]  # fmt: skip
        assert [e["eventType"] for e in terminal(events, "STREAMING_QUERY")] == ["FAIL"]
        (app,) = translator.settle(Verdict(status, None, "", "uid 0 (root)"))
        assert app["eventType"] == state


def test_query_failing_in_its_first_batch_names_its_source_directory() -> None:
    """The first micro-batch fails, so no progress event describes the source or the sink:
    the input is the directory of the file the batch read (typed as it read it), no sink is
    invented, and the run's facet and a warning say what the log lacks."""
    translator, events = replay("stream_fail_caught")
    (query,) = terminal(events, "STREAMING_QUERY")
    assert names(query["inputs"]) == [("file", f"{DATA}/landing")]
    assert fields(query["inputs"][0]) == [("id", "integer"), ("litres", "double")]
    assert query["outputs"] == []
    assert unnamed(query) == [("output", streaming.SINK_UNSEEN)]
    run_id = query["run"]["runId"]
    (start,) = [e for e in events if e["run"]["runId"] == run_id and e["eventType"] == "START"]
    assert unnamed(start) == []  # not before it ended: a first progress may still name it
    assert translator.warnings == [
        "streaming query volumes: ended before its first progress event: its sink is not in "
        "the event log, and a file source is named by the directory of the files its "
        "micro-batch read"
    ]


def _saves() -> list[Event]:
    _, events = replay("kafka_sink_columns")
    check_lifecycle(events)
    return [e for e in terminal(events, "SQL_JOB") if "save_into" in e["job"]["name"]]


def unnamed(event: Event) -> list[tuple[str, str]]:
    """What the run touched that names no dataset: (role, why)."""
    found = event["run"]["facets"].get("lineageAgent_unnamedDatasets", {"datasets": []})
    return [(d["role"], d["reason"]) for d in found["datasets"]]


def test_kafka_save_from_files_names_no_input_the_log_does_not_name() -> None:
    """`select(meter AS key, to_json(struct(site, round(kwh * 1000))) AS value)` saved to a
    topic: the JSON files the save's logical plan reads are nowhere in the log, so no input
    dataset stands for them (none named after the `LogicalRelation`) and the run's
    `lineageAgent_unnamedDatasets` facet says so; the topic is the output, typed as the
    topic stores its columns, without column lineage (its input has no name)."""
    save = _saves()[0]
    assert save["inputs"] == []
    assert unnamed(save) == [
        ("input", "the event log does not name the files of a save's relation")
    ]
    assert names(save["outputs"]) == [("kafka://127.0.0.1:9092", "meter-json")]
    assert fields(save["outputs"][0]) == [("key", "binary"), ("value", "binary")]  # as stored
    assert "columnLineage" not in save["outputs"][0]["facets"]


def test_kafka_save_with_topic_from_a_column_names_no_made_up_topic() -> None:
    """`concat('alarms-', level) AS topic`: the topics are data, so no output dataset is
    made up for them (once `alarms-.*`); the run's facet says what was written and why it
    has no name. The CSV it read is the file its reader's schema inference scanned."""
    save = _saves()[1]
    assert names(save["inputs"]) == [("file", f"{DATA}/alarms.csv")]
    assert save["outputs"] == []
    assert unnamed(save) == [("output", "Kafka topic chosen per row, by the pattern 'alarms-.*'")]


def test_a_file_read_in_a_batch_is_its_directory_only_before_any_progress() -> None:
    """A file a micro-batch scans (`/lake/in/part-0.json`) stands for its directory only
    while no progress event has described the query's sources; once one has (a Kafka
    source here), a static file read in each batch keeps its own name."""
    dimension = DatasetRef("input", "Scan json", location="file:/lake/dim/shops.json")
    query = StreamQuery("q", "r", "n")
    streaming.absorb(query, [dimension])
    run = Run("stream", "00000000-0000-7000-8000-000000000000", "STREAMING_QUERY", 0, stream=query)
    assert names(list(streaming.stream_datasets(run, Catalog()).inputs.values())) == [
        ("file", "/lake/dim")
    ]
    progress = {"batchId": 0, "sources": [{"description": "KafkaV2[Subscribe[t]]"}], "sink": {}}
    streaming.add_progress(query, progress, "h:1", NO_TABLES)
    assert sorted(names(list(streaming.stream_datasets(run, Catalog()).inputs.values()))) == [
        ("file", "/lake/dim/shops.json"),
        ("kafka://h:1", "t"),
    ]
