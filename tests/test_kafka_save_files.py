"""Kafka saves from files, and the sinks of streaming queries failing in their first
micro-batch, replayed from the checked-in PySpark 4.1.1 logs `kafka_save_files` and
`stream_fail_iceberg` (tests/data/make_lakehouse_logs.py; what they hold:
tests/data/eventlogs/lakehouse/NOTES.md).
The plan-level tests change one thing of a real plan of that log (or of `stream_iceberg`)
and say what."""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.tables import TableIdent
from agent.spark.plan.touched.read import file_reads, micro_batch_sink, read_plan
from agent.spark.plan.touched.scans import UNLOCATED_RELATION
from agent.spark.translate.datasets.relations import ADJACENT, FileRelations
from agent.spark.translate.runs import steps
from tests.test_lakehouse_logs import events as log_events
from tests.test_stream_kafka_shapes import lineage, terminal, unnamed
from tests.test_streaming import DATA, check_lifecycle, fields, names, replay

Event = dict[str, Any]
SENSORS = ("file", f"{DATA}/sensors.csv")
LANDING = ("file", f"{DATA}/landing")
KAFKA = "kafka://127.0.0.1:9092"


@functools.cache
def _replayed() -> tuple[tuple[str, ...], tuple[Event, ...]]:
    translator, events = replay("kafka_save_files")
    check_lifecycle(events)
    return tuple(translator.warnings), tuple(events)


def _saves() -> dict[str, Event]:
    """The terminal event of each SQL run, by the job description of its statement."""
    starts = [e for e in log_events("kafka_save_files") if e["Event"].endswith("ExecutionStart")]
    roots = [e for e in starts if e["executionId"] == e["rootExecutionId"]]
    described = [e["description"] for e in roots if not steps.internal(e)]  # Spark's own
    runs = terminal(list(_replayed()[1]), "SQL_JOB")
    saves = [d for d in described if d.startswith("kafka save files: ")]
    assert len(runs) == len(saves)
    return {d.removeprefix("kafka save files: "): run for d, run in zip(saves, runs, strict=True)}


def _queries() -> dict[str, Event]:
    runs = terminal(list(_replayed()[1]), "STREAMING_QUERY")
    return {e["job"]["name"].rsplit(".", 1)[1]: e for e in runs}


def test_csv_saved_to_a_topic_reads_the_file_its_reader_inferred() -> None:
    """`spark.read.csv(header, inferSchema)` saved to a topic: no plan scans the relation
    before, but the reader's schema inference scanned `sensors.csv` right before Spark made
    its columns: the input is that file, and the topic's columns come from its columns."""
    save = _saves()["csv to a topic"]
    assert names(save["inputs"]) == [SENSORS]
    assert "lineageAgent_unnamedDatasets" not in save["run"]["facets"]
    (topic,) = save["outputs"]
    assert names([topic]) == [(KAFKA, "c3-readings")]
    assert lineage(topic) == {
        "key": [(*SENSORS, "sensor_id")],
        "value": [(*SENSORS, "site"), (*SENSORS, "reading"), (*SENSORS, "ts")],
    }


def test_relation_a_plan_scanned_before_is_located_and_typed_by_that_scan() -> None:
    """Once the frame was written to parquet (a plan that scans it, by the same column
    ids), a later save of it names the CSV with its inferred types; its per-row topic
    (`concat('c3_site_', site)`) names no output, and the run's facet says so."""
    save = _saves()["topic per row"]
    assert names(save["inputs"]) == [SENSORS]
    assert fields(save["inputs"][0]) == [
        ("sensor_id", "string"),
        ("site", "string"),
        ("reading", "double"),
        ("ts", "timestamp"),
    ]
    assert save["outputs"] == []
    assert unnamed(save) == [("output", "Kafka topic chosen per row, by the pattern 'c3_site_.*'")]


def test_grouped_save_has_lineage_through_the_logical_aggregate() -> None:
    """`groupBy(site).agg(sum(reading))` saved to a topic: the logical `Aggregate` of the
    save's query carries the lineage (key from site, value from reading) and groups by
    site."""
    (topic,) = _saves()["grouped"]["outputs"]
    assert lineage(topic) == {"key": [(*SENSORS, "site")], "value": [(*SENSORS, "reading")]}
    dataset = topic["facets"]["columnLineage"]["dataset"]
    assert [(d["field"], [t["subtype"] for t in d["transformations"]]) for d in dataset] == [
        ("site", ["GROUP_BY"])
    ]


def test_parquet_read_once_names_no_input() -> None:
    """A parquet read saved to a topic: its schema came from the footers in a job without a
    SQL execution and no plan scans the relation, so the log has no path: no input, and
    the run's facet says so (no name made up from the `LogicalRelation`)."""
    save = _saves()["parquet to a topic"]
    assert save["inputs"] == []
    assert names(save["outputs"]) == [(KAFKA, "c3-parquet")]
    assert unnamed(save) == [("input", UNLOCATED_RELATION)]


def test_kafka_sink_failing_first_names_the_topic_of_its_rows() -> None:
    """A CSV stream into Kafka whose first micro-batch fails (no progress event): the
    topic its rows name (`'volumes' AS topic`) is the output, on the servers the batch saves
    showed, with the column lineage from the source directory."""
    query = _queries()["volumes_by_column"]
    assert query["eventType"] == "FAIL"
    assert names(query["inputs"]) == [LANDING]
    (sink,) = query["outputs"]
    assert names([sink]) == [(KAFKA, "volumes")]
    assert fields(sink) == [("key", "binary"), ("value", "binary"), ("topic", "string")]
    assert lineage(sink) == {"key": [(*LANDING, "id")], "value": [(*LANDING, "litres")]}


def test_kafka_sink_with_a_topic_option_says_it_is_unnamed() -> None:
    """The same query with a `topic` option: no plan prints it, so no output, and the
    run's facet says why; the warning says what the log lacked."""
    query = _queries()["volumes_by_option"]
    assert query["outputs"] == []
    assert unnamed(query) == [
        ("output", "the event log does not show the topic option of a Kafka sink")
    ]
    assert any(w.startswith("streaming query volumes_by_option: ") for w in _replayed()[0])


def _inference_and_save() -> tuple[FileRelations, DatasetRef]:
    """The relations learned from the real schema inference of `csv to a topic`, and the
    real save's unlocated relation."""
    relations = FileRelations()
    starts = [e for e in log_events("kafka_save_files") if e["Event"].endswith("ExecutionStart")]
    for event in starts:
        if event["description"] != "kafka save files: csv to a topic":
            continue
        if steps.internal(event):
            relations.learn(*file_reads(event["physicalPlanDescription"]), steps.reader(event))
            continue
        plan = read_plan(event["sparkPlanInfo"], event["physicalPlanDescription"])
        (relation,) = [r for r in plan.datasets if r.unknown_reason == UNLOCATED_RELATION]
        return relations, relation
    raise AssertionError("no save")


def test_relation_made_without_inference_after_an_inferred_one_stays_unlocated() -> None:
    """A relation whose columns start further after the inference than `ADJACENT` (a
    schema-given read made after an inferred one, whose columns came in between) is not
    taken for the inferred file; the real save's relation, 2 ids after, is."""
    relations, relation = _inference_and_save()
    assert [r.location for r in relations.locate([relation])] == [f"file:{DATA}/sensors.csv"]
    later = tuple(i + ADJACENT + 1 for i in relation.attribute_ids)
    moved = dataclasses.replace(relation, attribute_ids=later)
    assert relations.locate([moved]) == [moved]
    json_relation = dataclasses.replace(relation, format="json")  # another reader's relation
    assert relations.locate([json_relation]) == [json_relation]


def test_iceberg_sink_of_a_micro_batch_write_is_its_table() -> None:
    """The real micro-batch plan of `stream_iceberg`: `WriteToDataSourceV2` with
    `IcebergStreamingWrite(table=lake.db.clicks, format=PARQUET)` names the table."""
    plans = [
        e["physicalPlanDescription"]
        for e in log_events("stream_iceberg")
        if e["Event"].endswith("ExecutionStart") and "IcebergStreamingWrite" in json.dumps(e)
    ]
    assert plans
    for plan in plans:
        (sink,) = micro_batch_sink(plan)
        assert (sink.role, sink.table, sink.format) == (
            "output",
            TableIdent("clicks", "db", "lake"),
            "iceberg",
        )


def test_iceberg_sink_failing_first_names_its_table() -> None:
    """`toTable("lake.db.volumes")` (Hadoop catalog) whose first micro-batch fails: the
    table the batch's write names is the output, at its place under the catalog's warehouse
    with the symlink to the table, typed and with column lineage from the source directory."""
    _, events = replay("stream_fail_iceberg")
    check_lifecycle(events)
    (query,) = terminal(events, "STREAMING_QUERY")
    assert query["eventType"] == "FAIL"
    assert names(query["inputs"]) == [LANDING]
    (sink,) = query["outputs"]
    assert names([sink]) == [("file", "/data/lakehouse/iceberg_hadoop/db/volumes")]
    assert sink["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "file:/data/lakehouse/iceberg_hadoop", "name": "db.volumes", "type": "TABLE"}
    ]
    assert fields(sink) == [("id", "integer"), ("millilitres", "double")]
    assert lineage(sink) == {"id": [(*LANDING, "id")], "millilitres": [(*LANDING, "litres")]}
