"""Column lineage of a SQL execution, followed through the attribute ids of its plan text.

`PlanGraph(plan)` is the `operators.AttributeGraph` of a plan (where each attribute comes
from) plus its resolution: `lineage(columns)` follows written attributes back to scanned
fields, composing the transformations of each step (`expressions.compose`), and gathers the
dataset-level INDIRECT dependencies (filters, joins, groupings, global sorts). Each
attribute is resolved once and remembered, iteratively (no recursion limit), so the work
stays linear in the size of the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.spark.plan.attributes.leaves import Source
from agent.spark.plan.attributes.operators import AttributeGraph, written_attributes
from agent.spark.plan.syntax.expressions import (
    DIRECT_ORDER,
    IDENTITY,
    Transformation,
    compose,
    indirect,
)
from agent.spark.plan.syntax.text import PlanNode, PlanText

__all__ = [
    "ColumnLineage",
    "InputField",
    "OutputColumn",
    "PlanGraph",
    "Source",
    "collapse",
    "written_attributes",
]


@dataclass(frozen=True, slots=True)
class InputField:
    scan: int  # operator id of the scan in the plan description
    field: str
    transformations: tuple[Transformation, ...]


@dataclass(frozen=True, slots=True)
class OutputColumn:
    name: str
    inputs: tuple[InputField, ...]


@dataclass(frozen=True, slots=True)
class ColumnLineage:
    """Lineage of the written columns, in write order, and of the dataset as a whole."""

    columns: tuple[OutputColumn, ...]
    dataset: tuple[InputField, ...]  # INDIRECT: filters, joins, groupings, global sorts
    incomplete: tuple[str, ...] = ()  # columns whose lineage the plan shows only in part
    #: operator id -> the scan node (its name, Location, ReadSchema name the dataset)
    scans: Mapping[int, PlanNode] = field(default_factory=dict, compare=False)

    @property
    def size(self) -> int:
        """Input-field entries of the facet: what an event carries for this lineage."""
        return len(self.dataset) + sum(len(c.inputs) for c in self.columns)


_Resolved = dict[Source, frozenset[Transformation]]


class PlanGraph(AttributeGraph):
    """An attribute graph that resolves attributes to scanned fields, remembering each."""

    def __init__(self, plan: PlanText) -> None:
        super().__init__(plan)
        self._memo: dict[int, tuple[_Resolved, bool]] = {}

    def lineage(self, columns: Sequence[tuple[str, int]]) -> ColumnLineage:
        """Lineage of written columns given as (name, attribute id), in write order."""
        written: list[OutputColumn] = []
        incomplete: list[str] = []
        used: set[int] = set()
        for name, attr in columns:
            resolved, partial = self.resolve(attr)
            written.append(OutputColumn(name, _input_fields(resolved)))
            used.update(source.scan for source in resolved)
            if partial:
                incomplete.append(name)
        dataset: dict[Source, set[Transformation]] = {}
        for attr, subtype in self.dataset:
            resolved, _ = self.resolve(attr)
            for source in resolved:
                dataset.setdefault(source, set()).add(indirect(subtype))
        used.update(source.scan for source in dataset)
        frozen = {source: frozenset(found) for source, found in dataset.items()}
        return ColumnLineage(
            tuple(written),
            _input_fields(frozen),
            tuple(incomplete),
            {scan: self.scans[scan] for scan in sorted(used) if scan in self.scans},
        )

    def resolve(self, attr: int) -> tuple[_Resolved, bool]:
        """The scanned fields behind an attribute, and whether its lineage is partial."""
        stack = [attr]
        visiting: set[int] = set()
        while stack:
            current = stack[-1]
            if current in self._memo:
                stack.pop()
                continue
            if current not in visiting:
                visiting.add(current)
                stack += [
                    child
                    for child, _ in self.edges.get(current, ())
                    if child not in self._memo and child not in visiting
                ]
                continue
            stack.pop()
            visiting.discard(current)
            self._memo[current] = self._combine(current)
        return self._memo[attr]

    def _combine(self, attr: int) -> tuple[_Resolved, bool]:
        found: dict[Source, set[Transformation]] = {}
        leaf = self.leaves.get(attr)
        if leaf is not None:
            found[leaf] = {IDENTITY}
        edges = self.edges.get(attr, [])
        partial = attr in self.partial or not (leaf or edges or attr in self.defined)
        for child, outer in edges:
            # a child still unresolved here closes a cycle: it gives nothing, and says so
            resolved, child_partial = self._memo.get(child, ({}, True))
            partial = partial or child_partial
            for source, inner in resolved.items():
                found.setdefault(source, set()).update(compose(outer, t) for t in inner)
        return {source: frozenset(ts) for source, ts in found.items()}, partial


def _input_fields(resolved: Mapping[Source, frozenset[Transformation]]) -> tuple[InputField, ...]:
    return tuple(
        InputField(source.scan, source.field, collapse(found)) for source, found in resolved.items()
    )


def collapse(found: frozenset[Transformation]) -> tuple[Transformation, ...]:
    """One DIRECT transformation per input field (the strongest; masking only if every path
    masks: one readable path reveals the value), then the INDIRECT ones, sorted so replays
    give identical events."""
    direct = [t for t in found if t.type == "DIRECT"]
    kept = sorted(t for t in found if t.type == "INDIRECT")
    if direct:
        strongest = max(direct, key=lambda t: DIRECT_ORDER.index(t.subtype))
        masking = all(t.masking for t in direct)
        kept.insert(0, Transformation("DIRECT", strongest.subtype, masking))
    return tuple(kept)
