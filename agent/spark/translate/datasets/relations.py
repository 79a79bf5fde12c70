"""Where the application read the files of a relation that a later plan prints without them.
Pure.

A Kafka save's query is a logical plan: `LogicalRelation csv, [sensor_id#17, …], false`
names the format and the columns but no path (tests/data/eventlogs/lakehouse/NOTES.md). The
same application's log locates it in one of two places:

* a file scan of the same relation in an earlier plan: Spark gives a relation's columns
  their ids once, when the program makes the DataFrame, so a scan whose output has those
  ids read those files (and its read schema types them);
* the schema inference of the reader call that made the relation: `spark.read.csv(p)`
  without a schema runs executions of Spark's own that scan `p` as text (`CollectLimit 1`,
  then `DeserializeToObject … obj#N`), their first frame `DataFrameReader.csv`, and the
  relation's columns are the next attributes Spark makes: their first id follows the
  highest one those executions print within `ADJACENT` (measured on PySpark 4.1.1 and
  4.3.0: one id in between). A relation made without inference (its schema given) right
  after an inferred one starts after that one's columns, further away, and is not taken
  for it.

A relation located by neither stays unnamed (the run's `lineageAgent_unnamedDatasets` facet
says why). A JSON or parquet read infers its schema in a job without a SQL execution: unless
a plan scans the same relation, its files are in no plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agent.spark.plan.datasets import DatasetRef, FileRead
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.touched.scans import UNLOCATED_RELATION

#: How far the first column id of an inferred relation may follow the inference's last id.
ADJACENT: Final = 2
_KEPT_COLUMNS: Final = 65_536  # column ids of file scans remembered, the newest kept
_KEPT_INFERENCES: Final = 256  # schema inferences remembered, the newest kept


@dataclass(frozen=True, slots=True)
class _Inference:
    reader: str  # the DataFrameReader method: `csv`
    last_id: int
    datasets: tuple[DatasetRef, ...]


class FileRelations:
    """The file scans and schema inferences of one application's plans so far."""

    def __init__(self) -> None:
        self._columns: dict[int, FileRead] = {}
        self._inferences: list[_Inference] = []

    def learn(
        self, reads: Sequence[FileRead], last_id: int | None = None, reader: str | None = None
    ) -> None:
        """What one plan shows: its file scans, by their columns; with `reader` (the
        `DataFrameReader` method behind an execution of Spark's own) and the highest
        attribute id the plan prints, a schema inference of the files it scans, whose
        text scan is no relation of the program."""
        if reader is not None:
            datasets = tuple(d for read in reads for d in read.datasets)
            if datasets and last_id is not None:
                self._inferences.append(_Inference(reader, last_id, datasets))
                del self._inferences[:-_KEPT_INFERENCES]
            return
        for read in reads:
            for column in read.columns:
                self._columns.pop(column, None)  # the newest last
                self._columns[column] = read
        for column in list(self._columns)[: max(len(self._columns) - _KEPT_COLUMNS, 0)]:
            del self._columns[column]

    def locate(self, refs: Sequence[DatasetRef]) -> list[DatasetRef]:
        """The plan's references, each relation printed without its files replaced by the
        files the application showed it reads, in the inputs of column lineage too."""
        out: list[DatasetRef] = []
        for ref in refs:
            if ref.columns is not None:
                inputs = {
                    scan: tuple(d for r in found for d in self._located(r))
                    for scan, found in ref.columns.inputs.items()
                }
                ref = dataclasses.replace(
                    ref, columns=dataclasses.replace(ref.columns, inputs=inputs)
                )
            out += self._located(ref)
        return out

    def _located(self, ref: DatasetRef) -> tuple[DatasetRef, ...]:
        if ref.unknown_reason != UNLOCATED_RELATION or not ref.attribute_ids:
            return (ref,)
        read = self._scanned(ref.attribute_ids)
        if read is not None:
            types = {f.name: f for r in read for d in r.datasets for f in d.fields}
            return tuple(_relation(ref, d, types) for d in read[0].datasets)
        inferred = self._inferred(ref)
        return tuple(_relation(ref, d, {}) for d in inferred) if inferred else (ref,)

    def _scanned(self, columns: Sequence[int]) -> list[FileRead] | None:
        """The scans that output some of these columns, if all of them read the same files
        (a scan prunes the columns its query does not use)."""
        found = [self._columns[c] for c in columns if c in self._columns]
        places = {tuple(d.location for d in read.datasets) for read in found}
        return found if len(places) == 1 else None

    def _inferred(self, ref: DatasetRef) -> tuple[DatasetRef, ...]:
        """The files of the schema inference that made this relation, if one did."""
        first = min(ref.attribute_ids)
        before = [i for i in self._inferences if i.reader == ref.format and i.last_id < first]
        if not before:
            return ()
        nearest = max(before, key=lambda i: i.last_id)
        return nearest.datasets if first - nearest.last_id <= ADJACENT else ()


def _relation(ref: DatasetRef, read: DatasetRef, types: dict[str, Field]) -> DatasetRef:
    """The relation as a dataset of the files `read` names: its own columns, typed by the
    scan of the same relation when the plan left them untyped."""
    fields = tuple(f if f.type is not None else types.get(f.name, f) for f in ref.fields)
    return DatasetRef(
        "input",
        ref.node,
        location=read.location,
        format=ref.format or read.format,
        fields=fields,
        paths_cut=read.paths_cut,
    )
