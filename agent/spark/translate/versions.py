"""The version a statement committed to a Delta or Iceberg table: asked of the table's own
metadata, behind the `TableVersions` seam, after translation.

The event log never says which version a write committed (Delta's `_delta_log/<v>.json`,
Iceberg's `metadata/*.metadata.json` do). The translator stays pure: on a COMPLETE event it
only notes a `VersionRequest` for each Delta or Iceberg output on a local file system. The
caller fills them (`fill`) through a `TableVersions`, off the event loop, before the events
are claimed and signed; a version that cannot be told leaves the dataset without the facet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agent.facets import facet

TableFormat = Literal["delta", "iceberg"]


@dataclass(frozen=True, slots=True)
class VersionRequest:
    """An output dataset of a COMPLETE event whose committed version is to be looked up."""

    dataset: dict[str, Any]  # the event's output dataset, filled in place
    format: TableFormat
    path: str  # the table's directory on a local file system
    start_ms: int  # the run's start and end, Spark's clock: the commit happened in between
    end_ms: int


class TableVersions(Protocol):
    """Reads a table's metadata to tell the version a write committed."""

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        """The latest version (Delta version, Iceberg snapshot id) the table at `path`
        committed between `start_ms` and `end_ms` inclusive, or None when its metadata does
        not tell. Blocks on the file system (call it from a worker thread); bounded; never
        raises."""
        ...


def fill(requests: Iterable[VersionRequest], versions: TableVersions) -> None:
    """Add the `version` facet to each requested dataset whose version `versions` tells."""
    for request in requests:
        found = versions.committed(request.format, request.path, request.start_ms, request.end_ms)
        if found is not None:
            facets = request.dataset.setdefault("facets", {})
            facets["version"] = facet("version", datasetVersion=found)
