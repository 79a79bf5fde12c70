"""Kafka in a batch plan: the topics a query reads or a save writes, as the plan names them.

Reads: `Scan KafkaRelation(strategy=Subscribe[a, b] | SubscribePattern[p] | Assign[t-0, t-1],
…)`; the bootstrap servers of a read are not in the plan (the translator takes them from its
options). A pattern is named as it is written: the topics it matched are not in the event log.
Writes: `SaveIntoDataSourceCommand` of `KafkaSourceProvider` with the options
`kafka.bootstrap.servers` and `topic`; a write whose topics are a column of the rows names no
topic and becomes a dataset with `unknown_reason`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.schema import split_top

_RELATION = re.compile(r"^Scan KafkaRelation\(strategy=(?P<kind>\w+)\[(?P<items>[^\]]*)\]")
_PARTITION = re.compile(r"^(?P<topic>.+)-\d+$")


def kafka_scan(name: str) -> list[DatasetRef] | None:
    """The topics a `KafkaRelation` scan reads; None if `name` is no Kafka scan."""
    matched = _RELATION.match(name)
    if matched is None:
        return None
    items = [i.strip() for i in split_top(matched["items"]) if i.strip()]
    if matched["kind"] == "Assign":  # topic partitions: `clicks-0`
        items = [m["topic"] if (m := _PARTITION.match(i)) else i for i in items]
    elif matched["kind"] == "SubscribePattern":
        items = [matched["items"].strip()]
    return [
        DatasetRef("input", name, kafka=(None, topic), format="kafka")
        for topic in dict.fromkeys(items)
    ]


def kafka_save(node: str, options: Mapping[str, str], notes: list[str]) -> DatasetRef:
    """The topic a Kafka batch save writes, on the servers its options name."""
    servers = options.get("kafka.bootstrap.servers")
    topic = options.get("topic")
    if topic:
        return DatasetRef("output", node, kafka=(servers, topic), format="kafka")
    notes.append("Kafka save without a topic option: the topics are a column of its rows")
    return DatasetRef(
        "output", node, format="kafka", unknown_reason="Kafka topics taken from a column"
    )
