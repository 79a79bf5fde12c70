"""What Structured Streaming's listener events and micro-batch plans say of a query. Pure.

The facts (measured on PySpark 4.1.1 logs): `QueryStartedEvent` names the query (`id`, stable
across restarts from one checkpoint; `runId`, new at every start; `name`) and nothing of its
sources or sink. Each `QueryProgressEvent` follows a completed micro-batch and describes the
sources and the sink in words (read by `descriptions`), with offsets and row counts; a V2
source's table (Iceberg) is in the micro-batch plan's scan only. A micro-batch runs as SQL
executions whose description is `<name>\\nid = <id>\\nrunId = <runId>\\nbatch = <n>`: a file
source's batch scans only that batch's files (folded here into the source directory), a file
sink is not in the plan at all, and what a `foreachBatch` function runs is nested under the
batch's root execution.

A query run's datasets are the union of what the descriptions name and what its micro-batch
plans name (Delta's own `_delta_log` reads left out). A description not understood is named
in a warning and becomes a dataset in namespace `unknown`, so events stay schema-valid.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from agent import linear
from agent.facets import facet
from agent.spark.plan.datasets import DatasetRef, Role
from agent.spark.plan.touched.lineage import kafka_columns
from agent.spark.plan.touched.scans import MICRO_BATCH_SOURCE
from agent.spark.translate.datasets.columnfacet import DEFAULT_MAX_FIELDS
from agent.spark.translate.datasets.descriptions import Tables, described
from agent.spark.translate.datasets.rundatasets import RunDatasets, collect, describe
from agent.spark.translate.model import (
    CatalogTable,
    Failure,
    Run,
    StreamQuery,
    classify,
    task_error,
)
from agent.spark.translate.naming import (
    KAFKA_UNKNOWN,
    UNKNOWN_NAMESPACE,
    Catalog,
    DatasetName,
    datasource_uri,
    from_location,
)
from agent.spark.translate.values import as_int, as_str, as_uuid, mappings

JOB_TYPE: Final = "STREAMING_QUERY"
_MICRO_BATCH: Final = linear.compile(
    r"(?:^|\n)id = (?P<id>[0-9a-fA-F-]{36})\nrunId = (?P<run>[0-9a-fA-F-]{36})\n"
    r"batch = (?P<batch>\d+)"
)
MAX_REFS: Final = 256  # distinct datasets one query's micro-batch plans may add
_MAX_DESCRIBED: Final = 64  # distinct source and sink descriptions one query may add
_MAX_TEXT: Final = 4096  # characters of one offset or description in the facet
NO_PROGRESS: Final = (
    "ended before its first progress event: its sink is not in the event log, and a file "
    "source is named by the directory of the files its micro-batch read"
)
#: Why a query that ended before any progress, no micro-batch write naming its sink, has none.
SINK_UNSEEN: Final = "ended before its first progress event, the only event naming its sink"
NO_PROGRESS_PLANNED: Final = (
    "ended before its first progress event: its sink is named by its micro-batch's write, "
    "and a file source by the directory of the files the micro-batch read"
)


def micro_batch_of(description: object) -> tuple[str, str, int] | None:
    """(query id, Spark run id, batch id) of a micro-batch execution's description."""
    if not isinstance(description, str):
        return None
    match = _MICRO_BATCH.search(description)
    if match is None:
        return None
    return match["id"].lower(), match["run"].lower(), int(match["batch"])


def iso_ms(value: object) -> int | None:
    """Unix ms of the listener's ISO-8601 UTC timestamps (`2026-11-24T04:47:53.925Z`)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def new_query(event: Mapping[str, Any]) -> StreamQuery:
    """The query a QueryStartedEvent names (its `id` and `runId` are checked by `required`)."""
    name = as_str(event.get("name"))
    return StreamQuery(
        query_id=str(as_uuid(event["id"])), spark_run_id=str(as_uuid(event["runId"])), name=name
    )


def add_progress(
    query: StreamQuery, progress: Mapping[str, Any], kafka: str | None, tables: Tables
) -> list[str]:
    """Take in one QueryProgressEvent's `progress`; what it newly says that the agent cannot
    name (a description not understood, a Kafka sink's topic), for the warnings. `kafka`:
    the bootstrap servers of reads; `tables`: the catalogs, for a sink named as a table."""
    query.name = query.name or as_str(progress.get("name"))
    batch = as_int(progress.get("batchId"))
    query.batch_id = batch if batch is not None and batch >= 0 else query.batch_id
    query.batches += 1
    sources = mappings(progress.get("sources"))
    query.sources = tuple(sources)
    query.input_rows += sum(max(as_int(s.get("numInputRows")) or 0, 0) for s in sources)
    query.input_rows_per_second = _rate(sources, "inputRowsPerSecond")
    query.processed_rows_per_second = _rate(sources, "processedRowsPerSecond")
    sink = progress.get("sink")
    sink = sink if isinstance(sink, Mapping) else {}
    query.sink = as_str(sink.get("description"))
    written = as_int(sink.get("numOutputRows"))  # -1: the file and foreachBatch sinks
    if written is not None and written >= 0:
        query.output_rows = (query.output_rows or 0) + written
    notes: list[str] = []
    texts: list[tuple[Role, str]] = [("input", as_str(s.get("description")) or "") for s in sources]
    for role, text in [*texts, ("output", query.sink or "")]:
        if not text or (role, text) in query.described or len(query.described) >= _MAX_DESCRIBED:
            continue
        found, note = described(role, text, kafka, tables)
        query.described[(role, text)] = found
        if note is not None:
            notes.append(note)
    for source in sources:  # for inputStatistics, of the sources kept (`_MAX_DESCRIBED`)
        text, rows = as_str(source.get("description")) or "", as_int(source.get("numInputRows"))
        if ("input", text) in query.described and rows is not None and rows >= 0:
            query.source_rows[text] = query.source_rows.get(text, 0) + rows
    for key, ref in list(query.refs.items()):  # batch 0's files, read before any progress
        folded = _fold(query, ref)
        if folded is not ref:
            del query.refs[key]
            query.refs.setdefault(_key(folded), folded)
    return notes


def add_scanned_tables(query: StreamQuery, names: Iterable[str], tables: Tables) -> list[str]:
    """Catalog tables a micro-batch plan scans through a V2 source (Iceberg): inputs of the
    query; what cannot be located, for the warnings."""
    notes: list[str] = []
    for text in names:
        key = ("input", f"table {text}")
        if key in query.described or len(query.described) >= _MAX_DESCRIBED:
            continue
        table = tables.table("input", text)
        query.described[key] = (table,) if table is not None else ()
        if table is not None and table.ref.location is None:
            notes.append(f"source table {text!r}: {table.ref.unknown_reason}")
    return notes


def absorb(query: StreamQuery, refs: Iterable[DatasetRef]) -> bool:
    """Add what a micro-batch plan names; False the first time a dataset is left out because
    the query holds `MAX_REFS` already."""
    for ref in refs:
        if ref.location is not None and "/_delta_log" in ref.location:
            continue  # Delta reading its own log
        ref = _fold(query, ref)
        key = _key(ref)
        if key not in query.refs:
            if len(query.refs) >= MAX_REFS:
                first, query.full = not query.full, True
                return not first
            query.refs[key] = ref
    return True


def terminated(event: Mapping[str, Any], query: StreamQuery) -> Failure | None:
    """How a QueryTerminatedEvent ended the query: None on a clean stop, else its failure."""
    exception = as_str(event.get("exception"))
    query.error_class = as_str(event.get("errorClassOnException")) or query.error_class
    if not exception:
        return None
    message = task_error(exception.split("\n\tat ", 1)[0].rstrip())
    return Failure(classify(message), message, exception)


def stream_facet(query: StreamQuery) -> dict[str, Any]:
    """The `lineageAgent_stream` run facet: the query and its latest progress."""
    fields: dict[str, Any] = {"queryId": query.query_id, "queryRunId": query.spark_run_id}
    if query.name:
        fields["name"] = query.name
    if query.batch_id is not None:
        fields["batchId"] = query.batch_id
    fields["batches"] = query.batches
    fields["inputRows"] = query.input_rows
    if query.output_rows is not None:
        fields["outputRows"] = query.output_rows
    if query.input_rows_per_second is not None:
        fields["inputRowsPerSecond"] = query.input_rows_per_second
    if query.processed_rows_per_second is not None:
        fields["processedRowsPerSecond"] = query.processed_rows_per_second
    if query.sources:
        fields["sources"] = [_source(s) for s in query.sources]
    if query.sink:
        fields["sink"] = query.sink[:_MAX_TEXT]
    if query.error_class:
        fields["errorClass"] = query.error_class
    return facet("lineageAgent_stream", **fields)


def stream_datasets(
    run: Run, catalog: Catalog, column_lineage_max_fields: int = DEFAULT_MAX_FIELDS
) -> RunDatasets:
    """A query run's datasets: the sources and sink its progress describes, then what its
    micro-batch plans name."""
    assert run.stream is not None
    query = run.stream
    refs: list[tuple[DatasetRef, Mapping[int, int]]] = []
    topics: list[tuple[str, DatasetName]] = []
    tables: list[CatalogTable] = []
    unnamed: dict[tuple[str, str], None] = {}
    for (role, text), found in query.described.items():
        if not found:  # not understood, or a Kafka sink without its topic: no dataset
            what = "source" if role == "input" else "sink"
            unnamed[(role, f"the {what} {text[:200]!r} names no dataset the agent knows")] = None
        for item in found:
            if isinstance(item, CatalogTable):
                tables.append(item)
                refs.append((_with_rows(query, item.ref), {}))
            elif isinstance(item, DatasetRef):
                refs.append((_with_fields(query, _with_rows(query, item)), {}))
            else:
                topics.append((role, item))
    unprogressed = query.batches == 0  # no progress event: no source or sink described
    if unprogressed and not query.plan_sink and run.state != "RUNNING":  # ended: say so
        unnamed[("output", SINK_UNSEEN)] = None
    for ref in query.plan_sink if unprogressed else ():  # the sink its micro-batch's write names
        table = Tables(catalog).table("output", ref.table.qualified) if ref.table else None
        tables += [table] if table is not None else []
        refs.append((kafka_columns(_with_rows(query, table.ref if table else ref)), {}))
    refs += [(_directory(ref) if unprogressed else ref, {}) for ref in query.refs.values()]
    datasets = collect(refs, catalog, column_lineage_max_fields=column_lineage_max_fields)
    datasets.unnamed.update(unnamed)
    for table in tables:  # the catalog's own namespace, not the session catalog's
        name = describe(table.ref, catalog)[0]
        dataset = (datasets.inputs if table.ref.role == "input" else datasets.outputs).get(name)
        if dataset is not None:
            link = {"namespace": table.symlink_namespace, "name": table.symlink_name}
            dataset.setdefault("facets", {})["symlinks"] = facet(
                "symlinks", identifiers=[{**link, "type": "TABLE"}]
            )
    for role, name in topics:
        target = datasets.inputs if role == "input" else datasets.outputs
        dataset = {"namespace": name.namespace, "name": name.name}
        if name.namespace != UNKNOWN_NAMESPACE:
            source = facet("dataSource", name=name.namespace)
            uri = datasource_uri(name.namespace)
            if uri:
                source["uri"] = uri
            dataset["facets"] = {"dataSource": source}
        target.setdefault(name, dataset)
    _statistics(query, datasets, catalog)
    return datasets


def _statistics(query: StreamQuery, datasets: RunDatasets, catalog: Catalog) -> None:
    """Rows each source read and the sink wrote, as the progress events counted them: the
    datasets' statistics when a description names exactly one dataset (a source reading two
    Kafka topics counts them together)."""
    for (role, text), found in query.described.items():
        rows = query.source_rows.get(text) if role == "input" else query.output_rows
        if rows is None or len(found) != 1:
            continue
        item = found[0]
        if isinstance(item, CatalogTable):
            item = item.ref
        name = item if isinstance(item, DatasetName) else describe(item, catalog)[0]
        if name in (datasets.inputs if role == "input" else datasets.outputs):
            datasets.stats[(role, name)] = {"rows": rows}


def _fold(query: StreamQuery, ref: DatasetRef) -> DatasetRef:
    """A scan of files inside a file source's directory, as that directory."""
    if ref.role != "input" or ref.location is None:
        return ref
    for directory in _source_dirs(query):
        if _inside(ref.location, directory):
            return DatasetRef("input", ref.node, location=directory, fields=ref.fields)
    return ref


def _directory(ref: DatasetRef) -> DatasetRef:
    """A file a micro-batch scans (`…/landing/batch-0.csv`), named as the directory a file
    source reads, when no progress event described the source (its first batch failed):
    a last path segment with an extension is taken for a file, its parent for the source.
    A static input read from one file in such a batch is named by its directory too."""
    location = ref.location
    if ref.role != "input" or location is None or ref.table is not None:
        return ref
    parent, _, last = location.rstrip("/").rpartition("/")
    stem, dot, extension = last.rpartition(".")
    if not (parent and stem and dot and extension.isalnum()) or parent.endswith(":"):
        return ref
    return DatasetRef("input", ref.node, location=parent, format=ref.format, fields=ref.fields)


def _with_fields(query: StreamQuery, ref: DatasetRef) -> DatasetRef:
    """A source directory carries the schema its micro-batch scans read."""
    if ref.role != "input" or ref.location is None or ref.fields:
        return ref
    for other in query.refs.values():
        if other.location == ref.location and other.fields:
            return DatasetRef("input", ref.node, location=ref.location, fields=other.fields)
    return ref


def _with_rows(query: StreamQuery, ref: DatasetRef) -> DatasetRef:
    """A sink outside the plan writes the rows the micro-batch returned: their schema and
    column lineage, the scanned files named by their source directory (as the inputs are,
    before any progress event too)."""
    rows = query.rows
    if ref.role != "output" or rows is None:
        return ref
    columns = rows.columns
    if columns is not None:
        early = query.batches == 0
        inputs = {
            k: tuple(
                s for r in v for s in _sourced(query, _fold(query, _directory(r) if early else r))
            )
            for k, v in columns.inputs.items()
        }
        columns = dataclasses.replace(columns, inputs=inputs)
    return dataclasses.replace(ref, fields=rows.fields, columns=columns)


def _sourced(query: StreamQuery, ref: DatasetRef) -> tuple[DatasetRef, ...]:
    """A V2 source's micro-batch scan (Kafka) as the sources of its kind that the query's
    progress describes: the plan does not say which, the descriptions do."""
    if ref.unknown_reason != MICRO_BATCH_SOURCE:
        return (ref,)
    kafka = ref.format == "kafka"
    found: list[DatasetRef] = []
    for (role, _), items in query.described.items():
        for item in items if role == "input" else ():
            if isinstance(item, DatasetName) and kafka and item.namespace.startswith("kafka://"):
                servers = item.namespace.removeprefix("kafka://")
                topic = (None if item.namespace == KAFKA_UNKNOWN else servers, item.name)
                found.append(DatasetRef("input", ref.node, kafka=topic, fields=ref.fields))
            elif isinstance(item, DatasetRef) and (item.kafka is not None) == kafka:
                found.append(dataclasses.replace(item, fields=ref.fields))
            elif isinstance(item, CatalogTable) and not kafka:
                found.append(item.ref)
    return tuple(found)


def _source_dirs(query: StreamQuery) -> list[str]:
    return [
        item.location
        for (role, _), found in query.described.items()
        if role == "input"
        for item in found
        if isinstance(item, DatasetRef) and item.location is not None
    ]


def _inside(location: str, directory: str) -> bool:
    try:
        file, folder = from_location(location), from_location(directory)
    except ValueError:
        return False
    return file.namespace == folder.namespace and (
        file.name == folder.name or file.name.startswith(folder.name.rstrip("/") + "/")
    )


def _key(ref: DatasetRef) -> tuple[object, ...]:
    return (ref.role, ref.location, ref.table, ref.jdbc, ref.unknown_reason, ref.node)


def _rate(sources: list[Mapping[str, Any]], key: str) -> float | None:
    values = [v for s in sources if (v := _number(s.get(key))) is not None]
    return sum(values) if values else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _source(source: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": (as_str(source.get("description")) or "")[:_MAX_TEXT]}
    for key in ("startOffset", "endOffset", "latestOffset"):
        value = as_str(source.get(key))
        if value is not None:
            out[key] = value[:_MAX_TEXT]
    rows = as_int(source.get("numInputRows"))
    if rows is not None and rows >= 0:
        out["numInputRows"] = rows
    return out
