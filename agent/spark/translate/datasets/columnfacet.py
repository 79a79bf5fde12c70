"""The `columnLineage` dataset facet (OpenLineage 1-2-0) of a written dataset, bounded.

Input fields are named by the datasets their scans read; several scans of one dataset (a
self-join, a reused exchange, the initial and final adaptive plans) merge into one input
field per dataset field, their transformations unioned. Output fields without any input
field (literals, `count(*)`) are left out, as the facet has nothing to say about them.

A wide table must not make a multi-megabyte event: the facet keeps at most `max_fields`
input-field entries (the dataset-level list first, then output fields whole, in write
order, each kept only if it fits). What was cut is recorded beside it in our
`lineageAgent_truncation` dataset facet, with the output fields whose lineage the plan
itself shows only in part (long expressions cut by Spark, unrecognized operators).

Each output field also carries the field-level `transformationType` and
`transformationDescription` the spec keeps (deprecated) beside the per-input
`transformations`: Marquez 0.51 reads only those (`ColumnLineageOutputColumn`), so without
them its column lineage shows no type. The type is the spec's `IDENTITY` or `MASKED` when
the field is one of those, else the strongest DIRECT subtype (`TRANSFORMATION`,
`AGGREGATION`), or `INDIRECT` when no input reaches the field directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from agent.facets import facet
from agent.spark.plan.attributes.columns import collapse
from agent.spark.plan.datasets import DatasetRef, WrittenLineage
from agent.spark.plan.syntax.expressions import DIRECT_ORDER, Transformation

#: Input-field entries a columnLineage facet may carry (about 200 bytes each in JSON).
DEFAULT_MAX_FIELDS: Final = 1000
#: Names of incomplete output fields listed in the truncation facet at most.
_LISTED: Final = 100

Key = tuple[str, str, str]  # namespace, name, field
NameOf = Callable[[DatasetRef], tuple[str, str] | None]  # None: no dataset to name


def column_lineage_facets(
    written: WrittenLineage, name_of: NameOf, max_fields: int
) -> dict[str, dict[str, Any]]:
    """`columnLineage` (and `lineageAgent_truncation` when something was cut) for one
    written dataset; empty when the lineage names no input field or `max_fields` is 0."""
    if max_fields <= 0:
        return {}
    names = {
        scan: [n for ref in refs if (n := name_of(ref)) is not None]
        for scan, refs in sorted(written.inputs.items())
    }
    lineage = written.lineage
    columns: dict[str, dict[Key, set[Transformation]]] = {}
    for column in lineage.columns:
        merged = columns.setdefault(column.name, {})
        for field in column.inputs:
            for namespace, name in names.get(field.scan, ()):
                merged.setdefault((namespace, name, field.field), set()).update(
                    field.transformations
                )
    dataset: dict[Key, set[Transformation]] = {}
    for field in lineage.dataset:
        for namespace, name in names.get(field.scan, ()):
            dataset.setdefault((namespace, name, field.field), set()).update(field.transformations)
    columns = {name: inputs for name, inputs in columns.items() if inputs}
    if not columns and not dataset:
        return {}
    budget = max_fields
    kept_dataset = dict(list(dataset.items())[:budget])
    budget -= len(kept_dataset)
    kept: dict[str, dict[Key, set[Transformation]]] = {}
    for name, inputs in columns.items():
        if len(inputs) <= budget:
            kept[name] = inputs
            budget -= len(inputs)
    lineage_facet = facet(
        "columnLineage",
        fields={name: _output_field(inputs) for name, inputs in kept.items()},
    )
    if kept_dataset:
        lineage_facet["dataset"] = _entries(kept_dataset)
    facets = {"columnLineage": lineage_facet}
    total = len(dataset) + sum(len(inputs) for inputs in columns.values())
    used = max_fields - budget
    if used < total or lineage.incomplete:
        facets["lineageAgent_truncation"] = _truncation(
            max_fields, total, used, len(columns), len(kept), lineage.incomplete
        )
    return facets


def _entries(inputs: Mapping[Key, set[Transformation]]) -> list[dict[str, Any]]:
    return [
        {
            "namespace": namespace,
            "name": name,
            "field": field,
            "transformations": [_transformation(t) for t in collapse(frozenset(found))],
        }
        for (namespace, name, field), found in inputs.items()
    ]


def _output_field(inputs: Mapping[Key, set[Transformation]]) -> dict[str, Any]:
    """One output field: its input fields, and the field-level type and description."""
    kinds = {t for found in inputs.values() for t in collapse(frozenset(found))}
    direct = [t for t in kinds if t.type == "DIRECT"]
    if not direct:
        kind = "INDIRECT"
    elif all(t.masking for t in direct):
        kind = "MASKED"
    else:
        kind = max(direct, key=lambda t: DIRECT_ORDER.index(t.subtype)).subtype
    described = sorted({f"{t.type} {t.subtype}" + (" masking" if t.masking else "") for t in kinds})
    return {
        "inputFields": _entries(inputs),
        "transformationDescription": ", ".join(described),
        "transformationType": kind,
    }


def _transformation(found: Transformation) -> dict[str, Any]:
    return {"type": found.type, "subtype": found.subtype, "masking": found.masking}


def _truncation(
    limit: int, total: int, kept: int, fields: int, kept_fields: int, incomplete: tuple[str, ...]
) -> dict[str, Any]:
    truncation = facet(
        "lineageAgent_truncation",
        facet="columnLineage",
        maxInputFields=limit,
        inputFields=total,
        keptInputFields=kept,
        fields=fields,
        keptFields=kept_fields,
    )
    if incomplete:
        truncation["incompleteFields"] = list(incomplete[:_LISTED])
        truncation["incompleteFieldCount"] = len(incomplete)
    return truncation
