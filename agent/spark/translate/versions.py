"""What only a table's own metadata on disk tells, asked behind the `TableVersions` seam
after translation: the version a statement committed to a Delta or Iceberg table, and which
Iceberg catalog holds a table that a CREATE or CTAS names without its catalog.

The event log never says which version a write committed (Delta's `_delta_log/<v>.json`,
Iceberg's `metadata/*.metadata.json` do). Nor does it say the catalog of a CREATE / CTAS
target (`SparkCatalog@hash, db.orders`): with several Iceberg catalogs configured the dataset
is `unknown:db.orders`, and the table is the one of them whose `<warehouse>/<ns>/<table>`
holds Iceberg metadata. The translator stays pure: on a COMPLETE event it only notes a
`VersionRequest` for each Delta or Iceberg output on a local file system, and on any event a
`PlaceRequest` for each such unplaced Iceberg output whose catalogs all lay their tables out
on a local file system. The caller fills them (`fill`) through a `TableVersions`, off the
event loop, before the events are claimed and signed; a version that cannot be told leaves
the dataset without the facet, a place that cannot be told leaves it `unknown`. A table is
placed where it is now, else where the application's earlier events found it (`Seen`): a
DROP's COMPLETE, read after the table is gone, is named as its START and earlier statements
were.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from agent.facets import facet
from agent.spark.translate.naming import DatasetName, datasource_uri

TableFormat = Literal["delta", "iceberg"]


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


class TableVersions(Protocol):
    """Reads tables' metadata: the version a write committed, whether a table is there."""

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        """The latest version (Delta version, Iceberg snapshot id) the table at `path`
        committed between `start_ms` and `end_ms` inclusive, or None when its metadata does
        not tell. Blocks on the file system (call it from a worker thread); bounded; never
        raises."""
        ...

    def exists(self, fmt: TableFormat, path: str) -> bool:
        """Whether the directory `path` holds a table of that format (its metadata). Blocks
        on the file system; bounded; never raises."""
        ...


#: Where an application's tables were last found: (format, the places asked) -> the place
#: that held the table. A table gone since (a DROP, or dropped before the agent looked
#: again) is still named where it was.
Seen = dict[tuple[TableFormat, tuple[tuple[DatasetName, str], ...]], tuple[DatasetName, str]]
_SEEN_KEPT: Final = 4096  # tables remembered per application


def fill(
    requests: Iterable[VersionRequest | PlaceRequest],
    versions: TableVersions,
    seen: Seen | None = None,
) -> None:
    """Rename each placed dataset to the one location that holds its table (else where it
    was last seen, in `seen`), then add the `version` facet to each requested dataset whose
    version `versions` tells."""
    seen = {} if seen is None else seen
    for request in requests:
        wanted = _place(request, versions, seen) if isinstance(request, PlaceRequest) else request
        if wanted is None:
            continue
        found = versions.committed(wanted.format, wanted.path, wanted.start_ms, wanted.end_ms)
        if found is not None:
            facets = wanted.dataset.setdefault("facets", {})
            facets["version"] = facet("version", datasetVersion=found)


def _place(request: PlaceRequest, versions: TableVersions, seen: Seen) -> VersionRequest | None:
    """Name the dataset by the only place that holds its table, else by the one it was last
    seen in when none holds it now (several: it stays `unknown`); its version request when
    the event is a COMPLETE."""
    key = (request.format, request.places)
    held = [
        (name, link) for name, link in request.places if versions.exists(request.format, name.name)
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
