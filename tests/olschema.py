"""Validate RunEvents offline against the official OpenLineage schema and their facets' schemas.

`validate_run_event(event)` checks the event against `OpenLineage.json#/$defs/RunEvent` (2-0-2,
with format checks: uuid, date-time, uri) and then every facet in run, job, inputs and outputs
against the schema its `_schemaURL` names: the standard facets from the copy of the spec in
`tests/data/openlineage-spec` (see its SOURCE.md), ours (`lineageAgent_*`) from
`agent/schemas`. A `_schemaURL` on openlineage.io or under our
schema base that names no local schema is an error (a wrong version would otherwise go
unchecked); URLs of other producers are skipped. The schema files are read once and every
validator is built once per URL.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from agent.facets import OPENLINEAGE_SCHEMA_URL, SCHEMA_BASE

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tests" / "data" / "openlineage-spec"
AGENT_SCHEMAS = ROOT / "agent" / "schemas"

_OPENLINEAGE_PREFIX = "https://openlineage.io/spec/"


class SchemaViolation(AssertionError):
    """The event breaks the OpenLineage schema or a facet schema; one line per problem."""


def validate_run_event(event: Mapping[str, Any]) -> None:
    """Raise SchemaViolation listing every schema problem of `event`; return None if valid."""
    problems = [
        _describe(error, "")
        for error in schema_validator(OPENLINEAGE_SCHEMA_URL).iter_errors(event)
    ]
    for where, name, facet in _facets(event):
        url = facet.get("_schemaURL")
        if not isinstance(url, str):
            continue  # the core schema already reported it
        base, _, fragment = url.partition("#")
        if base not in _schema_ids():
            if base.startswith((_OPENLINEAGE_PREFIX, SCHEMA_BASE)):
                problems.append(f"{where}: _schemaURL {url} names no local schema{_hint(base)}")
            continue
        # With a fragment the URL names the facet's own definition; without, the document,
        # whose top-level `properties` map the facet's key to that definition.
        instance = facet if fragment else {name: facet}
        try:
            errors = list(schema_validator(url).iter_errors(instance))
        except Unresolvable:
            problems.append(f"{where}: _schemaURL {url} does not resolve to a definition")
            continue
        prefix = where if fragment else where.rpartition(".")[0]
        problems += [_describe(error, prefix) for error in errors]
    if problems:
        raise SchemaViolation("\n".join(sorted(problems)))


def example_run_event() -> dict[str, Any]:
    """A realistic SQL_JOB COMPLETE RunEvent (about 5 KB, unsigned, schema-valid) with the
    facets the agent emits and a few floats where a producer may put them."""
    producer = "https://github.com/edge-lineage/lineage-agent/tree/v0.1.0"

    def facet(schema: str, **fields: Any) -> dict[str, Any]:
        return {"_producer": producer, "_schemaURL": schema, **fields}

    def standard(name: str, version: str) -> str:
        return f"https://openlineage.io/spec/facets/{version}/{name}.json#/$defs/{name}"

    columns = [
        ("order_id", "bigint"), ("customer_id", "bigint"), ("status", "string"),
        ("amount", "decimal(12,2)"), ("created_at", "timestamp"), ("discount", "double"),
    ]  # fmt: skip
    raw = "/data/warehouse/orders_raw"
    clean = "/data/warehouse/orders_clean"
    source = facet(standard("DatasourceDatasetFacet", "1-0-1"), name="file", uri="file:///")
    return {
        "eventTime": "2025-03-14T09:26:53.589Z",
        "eventType": "COMPLETE",
        "producer": producer,
        "schemaURL": OPENLINEAGE_SCHEMA_URL,
        "run": {
            "runId": "0195942f-5a2d-7c3e-9b1a-3f4e5d6c7b8a",
            "facets": {
                "parent": facet(
                    standard("ParentRunFacet", "1-2-0"),
                    run={"runId": "0195942f-4a00-7000-8000-000000000001"},
                    job={"namespace": "spark", "name": "daily_orders"},
                    root={
                        "run": {"runId": "0195942f-4a00-7000-8000-000000000001"},
                        "job": {"namespace": "spark", "name": "daily_orders"},
                    },
                ),
                "processing_engine": facet(
                    standard("ProcessingEngineRunFacet", "1-1-1"),
                    version="4.3.0",
                    name="spark",
                    openlineageAdapterVersion="0.1.0",
                ),
                "lineageAgent_run": facet(
                    SCHEMA_BASE + "lineageAgent_run.json#/$defs/RunCountersRunFacet",
                    recordsIn=1250000,
                    recordsOut=1249875,
                    bytesIn=73400320,
                    bytesOut=51200000,
                    failedTasks=0,
                ),
            },
        },
        "job": {
            "namespace": "spark",
            "name": "daily_orders.execute_insert_into_hadoop_fs_relation_command.orders_clean",
            "facets": {
                "jobType": facet(
                    standard("JobTypeJobFacet", "2-0-4"),
                    processingType="BATCH",
                    integration="SPARK",
                    jobType="SQL_JOB",
                ),
                "sql": facet(
                    standard("SQLJobFacet", "1-1-0"),
                    query="INSERT OVERWRITE TABLE orders_clean SELECT order_id, customer_id, "
                    "status, amount * (1.0 - discount) AS amount, created_at, discount "
                    "FROM orders_raw WHERE status <> 'cancelled'",
                ),
            },
        },
        "inputs": [
            {
                "namespace": "file",
                "name": raw,
                "facets": {
                    "dataSource": source,
                    "schema": facet(
                        standard("SchemaDatasetFacet", "1-2-0"),
                        fields=[{"name": name, "type": kind} for name, kind in columns],
                    ),
                    "symlinks": facet(
                        standard("SymlinksDatasetFacet", "1-0-1"),
                        identifiers=[
                            {
                                "namespace": "file:/data/warehouse",
                                "name": "default.orders_raw",
                                "type": "TABLE",
                            },
                        ],
                    ),
                },
                "inputFacets": {
                    "inputStatistics": facet(
                        standard("InputStatisticsInputDatasetFacet", "1-0-0"),
                        rowCount=1250000,
                        size=73400320,
                        fileCount=16,
                    ),
                    "dataQualityMetrics": facet(
                        standard("DataQualityMetricsInputDatasetFacet", "1-0-3"),
                        rowCount=1250000,
                        columnMetrics={
                            "amount": {"nullCount": 0, "min": 0.5, "max": 18250.0, "sum": 3.1e7},
                            "discount": {"nullCount": 12, "min": 0.0, "max": 0.35},
                        },
                    ),
                },
            }
        ],
        "outputs": [
            {
                "namespace": "file",
                "name": clean,
                "facets": {
                    "dataSource": source,
                    "schema": facet(
                        standard("SchemaDatasetFacet", "1-2-0"),
                        fields=[{"name": name, "type": kind} for name, kind in columns],
                    ),
                    "columnLineage": facet(
                        standard("ColumnLineageDatasetFacet", "1-2-0"),
                        fields={
                            name: {
                                "inputFields": [
                                    {
                                        "namespace": "file",
                                        "name": raw,
                                        "field": name,
                                        "transformations": [
                                            {"type": "DIRECT", "subtype": "IDENTITY"}
                                        ],
                                    }
                                ]
                            }
                            for name, _ in columns[:5]
                        },
                    ),
                },
                "outputFacets": {
                    "outputStatistics": facet(
                        standard("OutputStatisticsOutputDatasetFacet", "1-0-2"),
                        rowCount=1249875,
                        size=51200000,
                        fileCount=8,
                    ),
                },
            }
        ],
    }


def _facets(event: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(location, key, facet) of every facet object the event carries."""
    holders: list[tuple[str, Any]] = [
        ("$.run.facets", _get(event, "run", "facets")),
        ("$.job.facets", _get(event, "job", "facets")),
    ]
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        datasets = event.get(side)
        for index, dataset in enumerate(datasets if isinstance(datasets, list) else []):
            for group in ("facets", extra):
                holders.append((f"$.{side}[{index}].{group}", _get(dataset, group)))
    for where, facets in holders:
        if isinstance(facets, Mapping):
            for name, facet in facets.items():
                if isinstance(facet, Mapping):
                    yield f"{where}.{name}", name, facet


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _describe(error: ValidationError, prefix: str) -> str:
    # anyOf/oneOf report "is not valid under any of the given schemas"; the best branch
    # error says what is actually wrong.
    if error.context:
        error = best_match(error.context)
    path = error.json_path
    where = prefix + path[1:] if prefix else path
    return f"{where}: {error.message}"


@functools.cache
def _registry() -> Registry[Any]:
    files = [SPEC / "OpenLineage.json", *sorted((SPEC / "facets").glob("*.json"))]
    files += sorted((SPEC / "registry").glob("**/facets/*.json"))
    files += sorted(AGENT_SCHEMAS.glob("*.json"))
    resources = []
    for path in files:
        contents = json.loads(path.read_text(encoding="utf-8"))
        resource = Resource.from_contents(contents, default_specification=DRAFT202012)
        resources.append((contents["$id"], resource))
    return Registry().with_resources(resources).crawl()


@functools.cache
def _schema_ids() -> frozenset[str]:
    return frozenset(_registry())


@functools.cache
def schema_validator(url: str) -> Draft202012Validator:
    """A format-checking validator for the schema at `url` (a local $id, with fragment)."""
    return Draft202012Validator(
        {"$ref": url},
        registry=_registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def _hint(base: str) -> str:
    """Which versions of the same schema file exist locally, if any."""
    name = base.rpartition("/")[2]
    known = sorted(uri for uri in _schema_ids() if uri.rpartition("/")[2] == name)
    return f" (local: {', '.join(known)})" if known else ""
