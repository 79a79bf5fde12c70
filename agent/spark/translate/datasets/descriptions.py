"""What Structured Streaming's progress events say of a query's sources and sink, in words.

Each `QueryProgressEvent` describes the sources and the sink by their `toString` (measured on
PySpark 4.1.1, Delta 4.3.1, Iceberg 1.12.0 and the Kafka connector; see
tests/data/eventlogs/lakehouse/NOTES.md):

* `FileStreamSource[file:/dir]`, `DeltaSource[file:/table]`: the directory or table location;
* `FileSink[file:/dir]`, `DeltaSink[/table]` (the path as the job gave it): likewise;
* `KafkaV2[Subscribe[a, b]]`, `KafkaV2[Assign[a-0, a-1]]`: the topics, named after the
  bootstrap servers the translator is told (a read's are not in the log);
  `KafkaV2[SubscribePattern[p]]`: the pattern, marked a pattern (`lineageAgent_topicPattern`),
  as the topics it matched are not in the log;
* `lake.db.events`: a V2 catalog table as sink (Iceberg), located by `Tables`; an Iceberg
  source is only `SparkMicroBatchStream@hash`, its table in the micro-batch scan;
* rate, memory and socket sources, console, memory, foreach and foreachBatch sinks: no
  dataset of their own;
* `KafkaSourceProvider$KafkaTable@hash`: a Kafka sink, whose topic is not in the log.

Anything else is not understood: a dataset in namespace `unknown` named by the description,
and a note for the warnings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agent import linear
from agent.spark.plan.datasets import DatasetRef, Role
from agent.spark.plan.syntax.tables import parse_table_ident
from agent.spark.translate.model import CatalogTable
from agent.spark.translate.naming import (
    Catalog,
    DatasetName,
    from_kafka,
)

Described = tuple[DatasetRef | DatasetName | CatalogTable, ...]

#: Descriptions and their arguments are stripped: `$` is their end.
_KIND: Final = linear.compile(
    rf"(?s)^(?P<kind>[{linear.WORD}$.]+?)(?:\[(?P<arg>.*?)\]?)?(?:@[0-9a-f]+)?$"
)
_KAFKA_STRATEGY: Final = linear.compile(rf"(?s)^(?P<strategy>[{linear.WORD}]+)\[(?P<items>.*)\]$")
_FILE_SOURCES: Final = frozenset({"FileStreamSource", "DeltaSource"})
_FILE_SINKS: Final = frozenset({"FileSink", "DeltaSink"})
_KAFKA_SOURCES: Final = frozenset({"KafkaV2", "KafkaSource", "KafkaMicroBatchStream"})
#: Sources that generate rows (no dataset), sources whose tables the micro-batch plans name
#: (Iceberg), and sinks whose writes, if any, the plans show.
_NO_DATASET: Final = frozenset(
    {
        "org.apache.iceberg.spark.source.SparkMicroBatchStream",
        "RateStreamV2",
        "RateSourceV2",
        "RateStreamSource",
        "RatePerMicroBatchStream",
        "MemoryStream",
        "MemoryStreamDataSource",
        "TextSocketV2",
        "TextSocketSource",
        "ForeachBatchSink",
        "ForeachWriterTable",
        "MemorySink",
        "MemorySinkV2",
        "NoopTable",
        "ConsoleTable$",
        "org.apache.spark.sql.execution.streaming.ConsoleTable$",
        "org.apache.spark.sql.execution.streaming.sources.ConsoleTable$",
    }
)
_KAFKA_SINK: Final = "kafka010.KafkaSourceProvider$KafkaTable"  # its toString: no topic


@dataclass(frozen=True, slots=True)
class Tables:
    """Names the tables of V2 catalogs (Iceberg) as streaming progress and micro-batch plans
    print them, `catalog.namespace.table`, located as batch plans' tables are: by the
    session's `Catalog` (`IcebergCatalog.location`)."""

    catalog: Catalog

    def table(self, role: Role, text: str) -> CatalogTable | None:
        """The table `text` names when its catalog is configured; None when it is no such
        table name. An Iceberg catalog that lays its tables out under its warehouse (hadoop,
        JDBC) tells the location; other catalogs keep their tables' locations in their own
        store, which the event log does not show."""
        ident = parse_table_ident(text)
        if ident is None or ident.database is None or ident.catalog is None:
            return None
        iceberg = self.catalog.iceberg_catalog(ident, None)
        if iceberg is None and ident.catalog not in self.catalog.others:
            return None
        location = iceberg.location(ident) if iceberg is not None else None
        symlink = iceberg.symlink_namespace if iceberg is not None else ident.catalog
        if location is not None:
            return CatalogTable(DatasetRef(role, text, location=location), symlink, ident.qualified)
        reason = f"the location of a table of catalog {ident.catalog!r} is not in the event log"
        ref = DatasetRef(role, text, table=ident, unknown_reason=reason)
        return CatalogTable(ref, symlink, ident.qualified)


def described(
    role: Role, text: str, kafka: str | None, tables: Tables
) -> tuple[Described, str | None]:
    """What a source (`input`) or sink (`output`) description names, and a note when the
    agent cannot name it (not understood, a Kafka sink's topic, a table's location)."""
    what = f"{'source' if role == 'input' else 'sink'} {text[:200]!r}"
    found = _named(role, text, kafka)
    if found is not None:
        return found, None
    table = tables.table(role, text) if role == "output" else None
    if table is not None:  # a V2 table sink (Iceberg): `catalog.ns.table`
        reason = table.ref.unknown_reason
        return (table,), None if table.ref.location is not None else f"{what}: {reason}"
    if role == "output" and _KAFKA_SINK in text:
        return (), f"{what}: the event log does not show a Kafka sink's topic"
    return (), f"{what} not understood"  # no dataset named after the description


def _named(role: str, text: str, kafka: str | None) -> Described | None:
    """What a file, Kafka or row-generating source or sink names; None when it is none."""
    match = _KIND.match(text.strip())
    if match is None:
        return None
    kind, arg = match["kind"], (match["arg"] or "").strip()
    if kind in _NO_DATASET or text.startswith(tuple(_NO_DATASET)):
        return ()
    if role == "input" and kind in _FILE_SOURCES and arg:
        return (DatasetRef("input", kind, location=arg),)
    if role == "output" and kind in _FILE_SINKS and arg:
        return (DatasetRef("output", kind, location=arg),)
    if role == "input" and kind in _KAFKA_SOURCES:
        pattern = _KAFKA_STRATEGY.match(arg)
        if pattern is not None and pattern["strategy"] == "SubscribePattern" and pattern["items"]:
            topic = (kafka, pattern["items"].strip())
            return (DatasetRef("input", kind, kafka=topic, format="kafka", pattern=True),)
        topics = _kafka_topics(arg)
        return None if topics is None else tuple(from_kafka(kafka, t) for t in topics)
    return None


def _kafka_topics(arg: str) -> list[str] | None:
    """Topics of `Subscribe[a, b]`, `Assign[a-0, a-1]`."""
    match = _KAFKA_STRATEGY.match(arg)
    if match is None:
        return None
    items = [i.strip() for i in match["items"].split(",") if i.strip()]
    strategy = match["strategy"]
    if strategy == "Subscribe":
        return items or None
    if strategy == "Assign":
        return list(dict.fromkeys(i.rsplit("-", 1)[0] for i in items)) or None
    return None
