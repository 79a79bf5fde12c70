"""What only a table's own metadata on disk tells, asked behind the `TableMetadata` seam
after translation: the version a statement committed to a Delta or Iceberg table, which
Iceberg catalog holds a table that a CREATE or CTAS names without its catalog, and the
table's schema.

The event log never says which version a write committed (Delta's `_delta_log/<v>.json`,
Iceberg's `metadata/*.metadata.json` do). Nor does it say the catalog of a CREATE / CTAS
target (`SparkCatalog@hash, db.orders`): with several Iceberg catalogs configured the dataset
is `unknown:db.orders`, and the table is the one of them whose `<warehouse>/<ns>/<table>`
holds Iceberg metadata. And plans print many of a table's columns without a type and its
scans pruned to the columns read. The translator stays pure: on a COMPLETE event it only
notes a `VersionRequest` for each Delta or Iceberg output on a local file system, on any
event a `PlaceRequest` for each such unplaced Iceberg output whose catalogs all lay their
tables out on a local file system, and a `SchemaRequest` for each Delta or Iceberg dataset
there with a schema facet, each parquet input there, and each output there with an untyped
field that is no table and not written in another format (Spark writes the schema into
parquet footers; rows of local data, `createDataFrame` or `VALUES`, print no types). The
caller fills them (`fill`) through a `TableMetadata`, off the event loop, before the events
are claimed and signed; a version that cannot be told leaves the dataset without the facet,
a place that cannot be told leaves it `unknown`, a schema that cannot be told leaves the
facet as the plan gave it. A table is placed where it is now, else
where the application's earlier events found it (`Seen`): a DROP's COMPLETE, read after the
table is gone, is named as its START and earlier statements were. An input's schema becomes
the table's (every column); an output's untyped fields take their column's type (of its
files on disk when it is looked up: a START read before an overwrite replaced them sees the
old ones); written columns copied from a column so typed take its type too
(`type_through_lineage`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from agent.facets import facet
from agent.spark.plan.datasets import SchemaSource, TableFormat
from agent.spark.plan.syntax.schema import Field
from agent.spark.translate.datasets.rundatasets import schema_fields
from agent.spark.translate.datasets.schemas import type_through_lineage
from agent.spark.translate.naming import UNKNOWN_NAMESPACE, DatasetName, datasource_uri


@dataclass(frozen=True, slots=True)
class VersionRequest:
    """An output dataset of a COMPLETE event whose committed version is to be looked up."""

    dataset: dict[str, Any]  # the event's output dataset, filled in place
    format: TableFormat
    path: str  # the table's directory on a local file system
    start_ms: int  # the run's start and end, Spark's clock: the commit happened in between
    end_ms: int


@dataclass(frozen=True, slots=True)
class PlaceRequest:
    """An output dataset named `unknown:<ns>.<table>`: an Iceberg table the plan names without
    its catalog while several are configured; where each of them would keep it."""

    dataset: dict[str, Any]  # the event's output dataset, renamed in place
    format: TableFormat
    places: tuple[tuple[DatasetName, str], ...]  # (location, symlink namespace) per catalog
    window: tuple[int, int] | None  # a COMPLETE event's run start and end: ask its version
    # The event the dataset is in, and whether it ends the run: a START or RUNNING event
    # whose table no catalog holds yet (Spark writes a CREATE's metadata at its commit, after
    # the daemon read the start) leaves the output out rather than naming it `unknown`; the
    # run's terminal event names it where the table then is.
    event: dict[str, Any] | None = None
    terminal: bool = True


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
    """Reads tables' metadata: the version a write committed, whether a table is there, its
    schema. Each blocks on the file system (call them from a worker thread), is bounded and
    never raises."""

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

    def exists(self, fmt: TableFormat, path: str) -> bool:
        """Whether the directory `path` holds a table of that format (its metadata)."""
        ...


#: Where an application's tables were last found: (format, the places asked) -> the place
#: that held the table. A table gone since (a DROP, or dropped before the agent looked
#: again) is still named where it was.
Seen = dict[tuple[TableFormat, tuple[tuple[DatasetName, str], ...]], tuple[DatasetName, str]]
_SEEN_KEPT: Final = 4096  # tables remembered per application


TableRequest = VersionRequest | PlaceRequest | SchemaRequest


def fill(requests: Iterable[TableRequest], tables: TableMetadata, seen: Seen | None = None) -> None:
    """Rename each placed dataset to the one location that holds its table (else where it
    was last seen, in `seen`), add the `version` facet to each requested dataset whose
    version `tables` tells, and complete the schema facets whose table's schema it tells."""
    seen = {} if seen is None else seen
    typed: dict[int, dict[str, Any]] = {}  # events whose schemas changed
    # One read of the log can hold many events naming the same tables (a catch-up): each
    # table's schema is read once per call; all of them see the disk as it is now anyway.
    schemas: dict[tuple[SchemaSource, str, str | None], Sequence[Field] | None] = {}
    for request in requests:
        if isinstance(request, SchemaRequest):
            key = (request.format, request.path, request.version)
            if key not in schemas:
                schemas[key] = tables.schema(*key)
            columns = schemas[key]
            if columns and _complete(request.dataset, columns, whole=request.whole):
                typed[id(request.event)] = request.event
            continue
        wanted: VersionRequest | None = request if isinstance(request, VersionRequest) else None
        if isinstance(request, PlaceRequest):
            wanted = _place(request, tables, seen)
            placed = request.dataset
            if placed["namespace"] == UNKNOWN_NAMESPACE and not request.terminal:
                _leave_out(request)
                continue
            if placed["namespace"] == "file":  # now named: typed from its table like any other
                columns = tables.schema(request.format, placed["name"], None)
                if columns:
                    _complete(placed, columns, whole=False)
        if wanted is None:
            continue
        found = tables.committed(wanted.format, wanted.path, wanted.start_ms, wanted.end_ms)
        if found is not None:
            facets = wanted.dataset.setdefault("facets", {})
            facets["version"] = facet("version", datasetVersion=found)
    for event in typed.values():
        type_through_lineage(event.get("inputs", ()), event.get("outputs", ()))


def _leave_out(request: PlaceRequest) -> None:
    """Take an output whose place is not known yet out of its (not terminal) event."""
    if request.event is None:
        return
    outputs = request.event.get("outputs")
    if isinstance(outputs, list):
        request.event["outputs"] = [d for d in outputs if d is not request.dataset]


def _place(request: PlaceRequest, tables: TableMetadata, seen: Seen) -> VersionRequest | None:
    """Name the dataset by the only place that holds its table, else by the one it was last
    seen in when none holds it now (several: it stays `unknown`); its version request when
    the event is a COMPLETE."""
    key = (request.format, request.places)
    held = [
        (name, link) for name, link in request.places if tables.exists(request.format, name.name)
    ]
    if len(held) == 1 and (key in seen or len(seen) < _SEEN_KEPT):
        seen[key] = held[0]
    found = held[0] if len(held) == 1 else seen.get(key) if not held else None
    if found is None:
        return None
    (name, link), dataset = found, request.dataset
    dataset["namespace"], dataset["name"] = name.namespace, name.name
    facets = dataset.setdefault("facets", {})
    source = facet("dataSource", name=name.namespace)
    uri = datasource_uri(name.namespace)
    if uri:
        source["uri"] = uri
    facets["dataSource"] = source
    for identifier in facets.get("symlinks", {}).get("identifiers", []):
        identifier["namespace"] = link
    if request.window is None:
        return None
    return VersionRequest(dataset, request.format, name.name, *request.window)


def _complete(dataset: dict[str, Any], columns: Sequence[Field], *, whole: bool) -> bool:
    """Complete one dataset's schema facet from its table's columns (an input's: all of
    them); whether it changed."""
    schema = dataset.get("facets", {}).get("schema")
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return False
    by_name = {column["name"]: column for column in schema_fields(columns)}
    if whole:
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
