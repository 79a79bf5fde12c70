"""Column lineage of a Delta MERGE, completed from the statement's other executions.

The MERGE command names what each clause assigns (`plan.dml`), by attribute; the source's
and the target's attributes are defined in the executions Delta runs for it (materializing
the source, scanning files for matches), whose plans resolve them to dataset fields
(`Execution.attributes`). Each target column then reads its own values (rows no clause
changes) and what its clauses assign, through the source's transformations; the columns the
clause conditions and the merge condition read decide which rows change (INDIRECT
CONDITIONAL). A column assigned from an attribute no execution resolved stays incomplete.

When Delta materializes the source, the optimizer may drop the aliases that gave the
source's columns the ids the MERGE names (a view over a query, `SELECT *` through a window):
the materializing execution's root then returns other ids. The statement's later executions
scan the materialized rows (`mergeMaterializedSource`) under the MERGE's ids, column for
column in the same order, which ties each to the field the materialization resolved
(`materialized`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from agent.spark.plan.attributes.columns import InputField, OutputColumn
from agent.spark.plan.datasets import DatasetRef, WrittenLineage
from agent.spark.plan.syntax.expressions import Transformation, compose, indirect
from agent.spark.plan.touched.lineage import Resolved
from agent.spark.translate.model import Execution

_CONDITIONAL = indirect("CONDITIONAL")


def materialized(executions: Sequence[Execution], attributes: dict[int, Resolved]) -> None:
    """Resolve, in `attributes`, the MERGE's ids of a materialized source's columns that no
    plan defines (scanned from the materialized rows only) by position, from the columns the
    materializing execution returned."""
    rows = [e.source_rows for e in executions if e.source_rows]
    scans = {scan for e in executions for scan in e.source_scans}
    for returned in rows:
        for scan in scans:
            if len(scan) != len(returned):
                continue
            for attr, source in zip(scan, returned, strict=True):
                if not attributes.get(attr) and attributes.get(source):
                    attributes[attr] = attributes[source]


def merged(ref: DatasetRef, attributes: Mapping[int, Resolved], rows: Resolved = ()) -> DatasetRef:
    """`ref` with its MERGE lineage completed from `attributes`, and `rows` (what decides
    which rows of its source exist) at the dataset level; `ref` itself otherwise."""
    written = ref.columns
    merge = written.merge if written is not None else None
    if written is None or merge is None:
        return ref
    inputs = dict(written.inputs)
    scans: dict[tuple[object, ...], int] = {}

    def scan_of(source: DatasetRef) -> int:
        """A made-up scan id per dataset read elsewhere (below the table's own, -1)."""
        key = (source.location, source.table, source.jdbc, source.kafka, source.node)
        if key not in scans:
            scans[key] = -2 - len(scans)
            inputs[scans[key]] = (source,)
        return scans[key]

    def fields(attr: int, outer: Transformation) -> list[InputField]:
        return [
            InputField(scan_of(source), field, tuple(compose(outer, t) for t in found))
            for source, field, found in attributes.get(attr, ())
        ]

    columns = []
    incomplete = []
    for column in written.lineage.columns:
        extra: list[InputField] = []
        for attr, how in merge.assigned.get(column.name, ()):
            if attr not in attributes:
                incomplete.append(column.name)
            extra += fields(attr, how)
        columns.append(OutputColumn(column.name, (*column.inputs, *extra)))
    dataset = [f for attr in merge.conditions for f in fields(attr, _CONDITIONAL)]
    dataset += [InputField(scan_of(source), field, found) for source, field, found in rows]
    lineage = dataclasses.replace(
        written.lineage,
        columns=tuple(columns),
        dataset=(*written.lineage.dataset, *dataset),
        incomplete=tuple(dict.fromkeys(incomplete)),
    )
    return dataclasses.replace(ref, columns=WrittenLineage(lineage, inputs, merge))
