"""OpenLineage RunEvents of Spark runs: the event body and its run and job facets. Pure.

Every event carries `processing_engine`, the counters facet `lineageAgent_run` (zeros on
START, live values on RUNNING, final ones on terminal events), `lineageAgent_stream` for a
streaming query run (see `streaming`), `errorMessage` when the run ended with one, `parent`
for child runs (and for the application when the scheduler that launched it said so) and the
`jobType` job facet (processingType STREAMING for a streaming query and its micro-batches);
the caller adds the facets of `appfacets`. Dataset statistics facets appear on terminal
events only: before the end they would be partial.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from agent import __version__
from agent.facets import OPENLINEAGE_SCHEMA_URL, PRODUCER, facet
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.touched.lineage import Resolved
from agent.spark.translate.datasets.columnfacet import DEFAULT_MAX_FIELDS
from agent.spark.translate.datasets.merges import materialized
from agent.spark.translate.datasets.rundatasets import RunDatasets, collect
from agent.spark.translate.datasets.streaming import stream_datasets, stream_facet
from agent.spark.translate.model import Failure, Run
from agent.spark.translate.naming import Catalog

Event = dict[str, Any]

MAX_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RunRef:
    """A run as another run's facet names it."""

    namespace: str
    job_name: str
    run_id: str


def run_event(
    event_type: str,
    run: Run,
    time_ms: int,
    *,
    namespace: str,
    spark_version: str | None,
    datasets: RunDatasets,
    parent: dict[str, Any] | None = None,
    failure: Failure | None = None,
    run_facets: Mapping[str, dict[str, Any]] | None = None,
    job_facets: Mapping[str, dict[str, Any]] | None = None,
) -> Event:
    """One RunEvent of `run` at `time_ms` (Spark's clock, Unix ms); `run_facets` and
    `job_facets` are added after the ones every event has."""
    facets: dict[str, Any] = {}
    if parent is not None:
        facets["parent"] = parent
    facets["processing_engine"] = facet(
        "processing_engine",
        version=spark_version or "unknown",
        name="spark",
        openlineageAdapterVersion=__version__,
    )
    counted = event_type != "START"  # START always reports zeros
    tally = run.tally
    facets["lineageAgent_run"] = facet(
        "lineageAgent_run",
        recordsIn=tally.records_in if counted else 0,
        recordsOut=tally.records_out if counted else 0,
        bytesIn=tally.bytes_in if counted else 0,
        bytesOut=tally.bytes_out if counted else 0,
        failedTasks=tally.failed_tasks if counted else 0,
    )
    if run.stream is not None:
        facets["lineageAgent_stream"] = stream_facet(run.stream)
    if failure is not None and failure.message:
        error = facet("errorMessage", message=failure.message, programmingLanguage="JAVA")
        if failure.stack:
            error["stackTrace"] = failure.stack
        facets["errorMessage"] = error
    if datasets.unnamed:  # what the run touched that no dataset can stand for
        facets["lineageAgent_unnamedDatasets"] = facet(
            "lineageAgent_unnamedDatasets",
            datasets=[{"role": role, "reason": why} for role, why in datasets.unnamed],
        )
    facets.update(run_facets or {})
    inputs, outputs = datasets.as_lists(statistics=event_type not in ("START", "RUNNING"))
    streams = run.stream is not None or run.query is not None
    job_type = facet(
        "jobType",
        processingType="STREAMING" if streams else "BATCH",
        integration="SPARK",
        jobType=run.job_type,
    )
    return {
        "eventTime": iso(time_ms),
        "eventType": event_type,
        "producer": PRODUCER,
        "schemaURL": OPENLINEAGE_SCHEMA_URL,
        "run": {"runId": run.run_id, "facets": facets},
        "job": {
            "namespace": namespace,
            "name": run.job_name,
            "facets": {"jobType": job_type, **(job_facets or {})},
        },
        "inputs": inputs,
        "outputs": outputs,
    }


def run_datasets(
    run: Run, catalog: Catalog, column_lineage_max_fields: int = DEFAULT_MAX_FIELDS
) -> RunDatasets:
    """The datasets of a run: a SQL run's from its executions' plans (with their SQL
    metrics and column lineage), an RDD job's from its input and output paths (with the
    job's counters when it has one of either)."""
    if run.kind == "stream":
        return stream_datasets(run, catalog, column_lineage_max_fields)
    if run.kind == "sql":
        refs = [(r, e.values) for e in run.executions for r in e.refs.values()]
        attributes: dict[int, Resolved] = {}
        for execution in run.executions:  # a dataset field wins over a local relation
            for attr, found in execution.attributes.items():  # (Delta's materialized source)
                if found or attr not in attributes:
                    attributes[attr] = found
        materialized(run.executions, attributes)
        rows = tuple(f for e in run.executions for f in e.source_filters)
        snapshots: dict[str, set[str]] = {}
        for execution in run.executions:
            for table, version in execution.snapshots.items():
                snapshots.setdefault(table, set()).add(version)
        return collect(
            refs,
            catalog,
            column_lineage_max_fields=column_lineage_max_fields,
            attributes=attributes,
            snapshots={t: v.pop() for t, v in snapshots.items() if len(v) == 1},
            merge_rows=rows,
        )
    datasets = collect(
        [(DatasetRef("input", "RDD", location=path), {}) for path in run.paths]
        + [(DatasetRef("output", "RDD", location=path), {}) for path in run.output_paths],
        catalog,
    )
    if len(datasets.inputs) == 1:  # the job's read counters are this dataset's
        only = next(iter(datasets.inputs))
        datasets.stats[("input", only)] = {
            "rows": run.tally.records_in,
            "bytes": run.tally.bytes_in,
        }
    if len(datasets.outputs) == 1:  # and its write counters the output's
        only = next(iter(datasets.outputs))
        datasets.stats[("output", only)] = {
            "rows": run.tally.records_out,
            "bytes": run.tally.bytes_out,
        }
    return datasets


def parent_facet(parent: RunRef, root: RunRef | None = None) -> dict[str, Any]:
    """The `parent` run facet; `root` defaults to the parent itself."""
    root = root or parent
    return facet(
        "parent",
        run={"runId": parent.run_id},
        job={"namespace": parent.namespace, "name": parent.job_name},
        root={
            "run": {"runId": root.run_id},
            "job": {"namespace": root.namespace, "name": root.job_name},
        },
    )


def iso(ms: int) -> str:
    """Unix ms -> ISO-8601 UTC as Java's ISO_OFFSET_DATE_TIME writes it: the fraction
    without trailing zeros (`.16`, not `.160`), none when it is zero, and `Z`.

    Marquez parses `eventTime` into a ZonedDateTime and Jackson writes it back in that form;
    an event written so reads back byte for byte, and its signature survives.
    """
    ms = min(max(ms, 0), MAX_MS)
    moment = _EPOCH + timedelta(milliseconds=ms)
    fraction = f"{ms % 1000:03d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}Z" if fraction else "Z")
