"""Kafka names the event log gives only indirectly: the topics of a save that takes them from a
`topic` column, and the servers of reads, learned from the rest of the application's log.

The plans are the real `explain formatted` text of the checked-in kafka_batch log
(tests/data/eventlogs/lakehouse); the variants change only the `topic` expression of its
Project, printed the way Spark prints an IF, a nested CASE or an attribute.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from agent.spark.plan.datasets import DatasetRef, PlanSummary
from agent.spark.plan.touched.read import read_plan
from agent.spark.translate.datasets.brokers import KafkaServers

LOG = Path(__file__).resolve().parent / "data" / "eventlogs" / "lakehouse" / "kafka_batch.jsonl.zst"
CASE = "CASE WHEN ((id#8L % cast(2 as bigint)) = cast(0 as bigint)) THEN events-a ELSE events-b END"


@functools.cache
def _starts() -> dict[str, dict[str, Any]]:
    raw = LOG.read_bytes()
    text = zstandard.ZstdDecompressor().decompressobj().decompress(raw).decode()
    events = [json.loads(line) for line in text.splitlines()]
    return {
        e["description"]: e
        for e in events
        if e["Event"].endswith("SQLExecutionStart") and e["executionId"] == e["rootExecutionId"]
    }


def _save(expression: str | None = None) -> tuple[list[tuple[str | None, str]], list[str]]:
    """The real topic-column save, its `topic` expression replaced when one is given: the
    Kafka datasets it writes and the plan's notes."""
    plan = _plan(expression)
    return [d.kafka for d in plan.datasets if d.kafka is not None], list(plan.notes)


def _plan(expression: str | None = None) -> PlanSummary:
    """The real topic-column save's plan, its `topic` expression replaced when one is given."""
    event = _starts()["kafka: write with topic column"]
    text = event["physicalPlanDescription"]
    if expression is not None:
        head, project = text.split("(4) Project\nArguments: [", 1)
        assert project.startswith("CASE WHEN")
        text = (
            f"{head}(4) Project\nArguments: [{expression}{project[project.index(' AS topic#') :]}"
        )
    return read_plan(event["sparkPlanInfo"], text)


def test_topic_column_of_a_case_of_literals_names_each_topic() -> None:
    """The real plan: `CASE WHEN … THEN events-a ELSE events-b END AS topic#N` under a save
    without a `topic` option names both topics on the option's servers, and no node."""
    assert _save() == ([("127.0.0.1:9092", "events-a"), ("127.0.0.1:9092", "events-b")], [])


@pytest.mark.parametrize(
    ("expression", "topics"),
    [
        ("orders", ["orders"]),  # lit("orders")
        ("if ((id#8L > 2)) big else small", ["big", "small"]),  # SQL if(c, 'big', 'small')
        (f"CASE WHEN (id#8L = 0) THEN {CASE} ELSE c END", ["events-a", "events-b", "c"]),
        ("CASE WHEN (id#8L = 0) THEN a WHEN (id#8L = 1) THEN b END", ["a", "b"]),  # else null
        ("if ((id#8L > 2)) if ((id#8L > 5)) x else y else z", ["x", "y", "z"]),
        ("CASE WHEN isnull(id#8L) THEN null ELSE t.v1 END", ["t.v1"]),
    ],
)
def test_topic_column_literal_shapes(expression: str, topics: list[str]) -> None:
    """A literal, an IF (`if (c) a else b`), CASE with and without ELSE, nested ones: every
    literal a row can take is a topic; a `null` branch (a row Kafka refuses) adds none."""
    found, notes = _save(expression)
    assert (found, notes) == ([("127.0.0.1:9092", t) for t in topics], [])


@pytest.mark.parametrize(
    ("expression", "pattern", "why"),
    [
        (
            "concat(events-, cast(id#8L as string))",
            "events-.*",
            "topic column 'concat(events-, cast(id#8L as string))' is no literal, CASE or IF "
            "of literals",
        ),
        (
            "CASE WHEN (id#8L = 0) THEN a ELSE lower(b#9) END",
            ".*",
            "topic column 'CASE WHEN (id#8L = 0) THEN a ELSE lower(b#9) END' is no literal, "
            "CASE or IF of literals",
        ),
        (
            "concat(CASE WHEN (id#8L = 0) THEN in.a ELSE b END, -, kind#9)",
            "(in\\.a|b)-.*",
            "topic column 'concat(CASE WHEN (id#8L = 0) THEN in.a ELSE b END, -, kind#9)' is no "
            "literal, CASE or IF of literals",
        ),
    ],
)
def test_topic_column_computed_names_a_pattern(expression: str, pattern: str, why: str) -> None:
    """A computed topic is described by a pattern of the topics it can take (literal parts
    kept, computed ones `.*`), marked a pattern, which the translation turns into no output
    and a facet; a note says so; never by the plan node."""
    plan = _plan(expression)
    assert [(d.kafka, d.pattern) for d in plan.datasets if d.role == "output"] == [
        (("127.0.0.1:9092", pattern), True)
    ]
    assert list(plan.notes) == [
        f"Kafka save without a topic option: {why}; its topics are chosen per row (the pattern "
        f"{pattern!r}), so it names no output dataset"
    ]


def test_topic_column_of_nulls_names_no_dataset() -> None:
    """A topic that is null on every row (Kafka refuses such rows) names no dataset."""
    assert _save("null") == (
        [],
        [
            "Kafka save without a topic option names no topic: topic column 'null' is no "
            "literal, CASE or IF of literals"
        ],
    )


def test_topic_column_defined_in_each_branch_of_a_union() -> None:
    """A union of frames that each set their own topic defines the column once per branch:
    every branch's topics are written."""
    event = _starts()["kafka: write with topic column"]
    branch = "(5) Project\nArguments: [clicks AS topic#90, cast(id#8L as string) AS value#91]\n"
    plan = read_plan(event["sparkPlanInfo"], event["physicalPlanDescription"] + "\n" + branch)
    assert [d.kafka for d in plan.datasets] == [
        ("127.0.0.1:9092", "events-a"),
        ("127.0.0.1:9092", "events-b"),
        ("127.0.0.1:9092", "clicks"),
    ]


def test_topic_column_not_computed_in_the_plan() -> None:
    """A `topic` column passed through from a scan (a copy of a Kafka read) is not
    defined by the plan: no dataset, and the note says so."""
    event = _starts()["kafka: write with topic column"]
    text = event["physicalPlanDescription"].replace(" AS topic#", " AS other#")
    plan = read_plan(event["sparkPlanInfo"], text)
    assert [d for d in plan.datasets if d.role == "output"] == []
    assert list(plan.notes) == [
        "Kafka save without a topic option names no topic: "
        "the rows' topic column is not computed in the plan"
    ]


def _write(servers: str) -> DatasetRef:
    return DatasetRef("output", "SaveIntoDataSourceCommand", kafka=(servers, "t"))


def test_servers_come_from_the_setting_a_cluster_or_the_writes_in_that_order() -> None:
    """The setting wins; else Spark's one configured cluster; else the writes seen so far,
    which a read before them does not have."""
    learned = KafkaServers(None)
    assert learned.servers is None
    assert learned.unknown_reason == "neither the event log nor spark.kafka_bootstrap names them"
    learned.written([DatasetRef("input", "Scan", kafka=(None, "t"))])  # a read names none
    assert learned.servers is None
    learned.written([_write("PLAINTEXT://h1:9092,h2:9092")])
    learned.written([_write("h1:9092")])  # the same first server: no ambiguity
    assert learned.servers == "PLAINTEXT://h1:9092,h2:9092"
    cluster = "spark.kafka.clusters.main.auth.bootstrap.servers"
    learned.environment({cluster: "c1:9093", "spark.kafka.clusters.main.ssl.keystore": "x"})
    assert learned.servers == "c1:9093"
    configured = KafkaServers("set:9094")
    configured.environment({cluster: "c1:9093"})
    configured.written([_write("h1:9092")])
    assert configured.servers == "set:9094"


def test_servers_stay_unknown_when_ambiguous() -> None:
    """Writes to two clusters, or two configured clusters: which one a read uses is not in
    the log, and the reason says so."""
    writes = KafkaServers(None)
    writes.written([_write("h1:9092"), _write("h2:9092")])
    assert writes.servers is None
    assert writes.unknown_reason == "the application's Kafka writes name different servers"
    clusters = KafkaServers(None)
    clusters.environment(
        [
            ["spark.kafka.clusters.a.auth.bootstrap.servers", "a:9092"],
            ["spark.kafka.clusters.b.auth.bootstrap.servers", "b:9092"],
        ]
    )
    clusters.written([_write("h1:9092")])
    assert clusters.servers is None
    assert clusters.unknown_reason == "the application configures several Kafka clusters (a, b)"
