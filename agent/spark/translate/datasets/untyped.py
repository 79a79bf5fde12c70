"""No schema field without a type leaves the agent. Pure.

Marquez keys a dataset's fields by name and type and takes a field without a type for a
column of its own, a new one at every event (measured with Marquez 0.51: the three columns
of a dataset written from local data showed as nine after one application, four untyped
copies of each after a rerun). A field whose type neither the plan, the DDL, what the
application showed before (`schemas`), the files' footers nor the tables' metadata
(`versions`) tell is left out of its dataset's `schema` facet rather than sent untyped;
nested fields likewise, and a facet left without fields goes. Column lineage still names
the column. `ApplicationLog` holds every event it hands out to this.
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]


def drop_untyped(event: Event) -> Event:
    """The event, its datasets' schema facets without the fields that have no type (in
    place)."""
    for side in ("inputs", "outputs"):
        datasets = event.get(side)
        for dataset in datasets if isinstance(datasets, list) else ():
            facets = dataset.get("facets") if isinstance(dataset, dict) else None
            schema = facets.get("schema") if isinstance(facets, dict) else None
            if not isinstance(facets, dict) or not isinstance(schema, dict):
                continue
            fields = _typed(schema.get("fields"))
            if fields:
                schema["fields"] = fields
            else:
                del facets["schema"]
    return event


def _typed(fields: object) -> list[dict[str, Any]]:
    """The fields that have a type, each with its typed nested fields."""
    kept: list[dict[str, Any]] = []
    for found in fields if isinstance(fields, list) else ():
        if not isinstance(found, dict) or not isinstance(found.get("type"), str):
            continue
        if not found["type"]:
            continue
        if "fields" in found:
            children = _typed(found["fields"])
            found = {k: v for k, v in found.items() if k != "fields"}
            if children:
                found["fields"] = children
        kept.append(found)
    return kept
