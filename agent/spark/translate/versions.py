"""What a Delta or Iceberg table's own metadata tells of it: the version a statement
committed and the table's schema, asked behind the `TableMetadata` seam, after translation.

The event log never says which version a write committed (Delta's `_delta_log/<v>.json`,
Iceberg's `metadata/*.metadata.json` do), and plans print many of a table's columns without
a type and its scans pruned to the columns read. The translator stays pure: it only notes a
`VersionRequest` for each Delta or Iceberg output of a COMPLETE event on a local file
system, and a `SchemaRequest` for each Delta or Iceberg dataset on one with a schema facet
and each parquet input there (Spark writes the schema into parquet footers).
The caller fills them (`fill`) through a `TableMetadata`, off the event loop, before the
events are claimed and signed: a version that cannot be told leaves the dataset without the
facet; a schema that cannot be told leaves the facet as the plan gave it. An input's schema
becomes the table's (every column); an output's untyped fields take their column's type;
written columns copied from a column so typed take its type too (`type_through_lineage`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agent.facets import facet
from agent.spark.plan.schema import Field
from agent.spark.translate.datasets import schema_fields
from agent.spark.translate.schemas import type_through_lineage

TableFormat = Literal["delta", "iceberg"]
#: What a schema is read from: a table's metadata, or the footer of a dataset's parquet files.
SchemaSource = Literal["delta", "iceberg", "parquet"]


@dataclass(frozen=True, slots=True)
class VersionRequest:
    """An output dataset of a COMPLETE event whose committed version is to be looked up."""

    dataset: dict[str, Any]  # the event's output dataset, filled in place
    format: TableFormat
    path: str  # the table's directory on a local file system
    start_ms: int  # the run's start and end, Spark's clock: the commit happened in between
    end_ms: int


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    """A dataset of an event whose schema facet the table's metadata may complete."""

    event: dict[str, Any]  # the RunEvent the dataset is in
    dataset: dict[str, Any]  # the dataset, filled in place
    format: SchemaSource
    path: str  # the table's directory (the parquet file or directory) on a local file system
    whole: bool  # an input: the facet becomes the table's whole schema
    version: str | None = None  # the version an input read (time travel), if the event says


class TableMetadata(Protocol):
    """Reads a table's metadata to tell the version a write committed and its schema.
    Both block on the file system (call them from a worker thread), are bounded and never
    raise."""

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        """The latest version (Delta version, Iceberg snapshot id) the table at `path`
        committed between `start_ms` and `end_ms` inclusive, or None when its metadata does
        not tell."""
        ...

    def schema(self, fmt: SchemaSource, path: str, version: str | None) -> Sequence[Field] | None:
        """The table's columns at `version` (Delta version, Iceberg snapshot id), else its
        current ones (a parquet dataset's: those Spark wrote into its footer), typed with
        Spark's type names (`long`, `string`, `decimal(10,2)`), or None when its metadata
        does not tell."""
        ...


TableRequest = VersionRequest | SchemaRequest


def fill(requests: Iterable[TableRequest], tables: TableMetadata) -> None:
    """Add the `version` facet to each requested dataset whose version `tables` tells, and
    complete the schema facets whose table's schema it tells."""
    typed: dict[int, dict[str, Any]] = {}  # events whose schemas changed
    for request in requests:
        if isinstance(request, VersionRequest):
            found = tables.committed(request.format, request.path, request.start_ms, request.end_ms)
            if found is not None:
                facets = request.dataset.setdefault("facets", {})
                facets["version"] = facet("version", datasetVersion=found)
            continue
        columns = tables.schema(request.format, request.path, request.version)
        if columns and _complete(request, columns):
            typed[id(request.event)] = request.event
    for event in typed.values():
        type_through_lineage(event.get("inputs", ()), event.get("outputs", ()))


def _complete(request: SchemaRequest, columns: Sequence[Field]) -> bool:
    """Complete one dataset's schema facet from its table's columns; whether it changed."""
    schema = request.dataset.get("facets", {}).get("schema")
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return False
    by_name = {column["name"]: column for column in schema_fields(columns)}
    if request.whole:
        before = list(fields)
        fields[:] = list(by_name.values())
        return fields != before
    changed = False
    for i, found in enumerate(fields):
        column = by_name.get(str(found.get("name"))) if isinstance(found, dict) else None
        if column is not None and "type" not in found:
            fields[i] = {**column, "name": found["name"]}
            changed = True
    return changed
