"""Schema facets completed from what the application already showed. Pure.

A plan prints a scan's columns pruned to those it reads (`ReadSchema`) and many attributes
without a type (a Hive scan, Delta and Iceberg commands). `KnownSchemas` remembers, per
application, the schema of each dataset it saw: a write's columns, a scan's columns with
their types. Later datasets of the same name are completed from it: an input lists every
column seen of its dataset (the schema facet describes the dataset, not the read), and an
untyped field of an input or output gets the type seen before. Written columns copied
unchanged from an input column (a DIRECT IDENTITY column lineage from one input field) take
that field's type (`type_through_lineage`). A write that creates or overwrites its dataset
(lifecycle CREATE / OVERWRITE) replaces what was known of it; other writes and scans add to
it. A dataset is known by its name and by its catalog tables (`symlinks`). Bounded: the
`MAX_DATASETS` most recently seen names and tables are remembered, each with at most
`MAX_FIELDS` top-level fields.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agent.spark.translate.datasets.rundatasets import RunDatasets
from agent.spark.translate.naming import UNKNOWN_NAMESPACE, DatasetName

#: Datasets whose schema an application's translator remembers (least recently seen go first).
MAX_DATASETS: Final = 1024
#: Top-level fields of a schema worth remembering; a wider one is not remembered at all.
MAX_FIELDS: Final = 4096
_REPLACING: Final = frozenset({"CREATE", "OVERWRITE"})

Field = dict[str, Any]  # a schema facet's field: name, type (if known), fields (if nested)
Dataset = dict[str, Any]


class KnownSchemas:
    """The schemas one application showed of its datasets; see the module docstring."""

    def __init__(self, limit: int = MAX_DATASETS) -> None:
        self._limit = limit
        self._known: collections.OrderedDict[DatasetName, list[Field]] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._known)

    def complete(self, datasets: RunDatasets) -> None:
        """Complete the schema facets of a run's datasets in place, then remember them."""
        for name, dataset in datasets.inputs.items():
            self._complete(name, dataset, whole=True)
        for name, dataset in datasets.outputs.items():
            self._complete(name, dataset, whole=False)
        type_through_lineage(datasets.inputs.values(), datasets.outputs.values())
        for name, dataset in datasets.inputs.items():
            self.learn(name, dataset, replace=False)
        for name, dataset in datasets.outputs.items():
            lifecycle = dataset.get("facets", {}).get("lifecycleStateChange", {})
            self.learn(name, dataset, replace=lifecycle.get("lifecycleStateChange") in _REPLACING)

    def learn(self, name: DatasetName, dataset: Dataset, *, replace: bool) -> None:
        """Remember a dataset's schema facet: in place of what was known, or added to it."""
        fields = _fields(dataset)
        if not fields:
            return
        known = self._find(name, dataset)
        learnt = _copy(fields) if replace or known is None else _union(known, fields)
        for key in _keys(name, dataset):
            self._known.pop(key, None)
            if len(learnt) <= MAX_FIELDS:
                self._known[key] = learnt
        while len(self._known) > self._limit:
            self._known.popitem(last=False)

    def _find(self, name: DatasetName, dataset: Dataset) -> list[Field] | None:
        for key in _keys(name, dataset):
            if key in self._known:
                return self._known[key]
        return None

    def _complete(self, name: DatasetName, dataset: Dataset, *, whole: bool) -> None:
        known = self._find(name, dataset)
        fields = _fields(dataset)
        if known is None or not fields:
            return
        if whole:
            fields[:] = _union(known, fields)
        else:
            by_name = {f["name"]: f for f in known}
            for i, found in enumerate(fields):
                fields[i] = _typed(found, by_name.get(found["name"]))


def type_through_lineage(inputs: Iterable[Dataset], outputs: Iterable[Dataset]) -> None:
    """Type written fields that copy one input field unchanged (DIRECT IDENTITY) from it."""
    typed: dict[tuple[str, str, str], Field] = {}
    for dataset in inputs:
        for found in _fields(dataset):
            if "type" in found:
                typed[(dataset["namespace"], dataset["name"], found["name"])] = found
    if not typed:
        return
    for dataset in outputs:
        fields = _fields(dataset)
        lineage = dataset.get("facets", {}).get("columnLineage", {}).get("fields", {})
        for i, found in enumerate(fields):
            if "type" in found:
                continue
            sources = {
                (entry.get("namespace"), entry.get("name"), entry.get("field"))
                for entry in lineage.get(found["name"], {}).get("inputFields", ())
                if _identity(entry)
            }
            if len(sources) == 1:
                fields[i] = _typed(found, typed.get(sources.pop()))


def _keys(name: DatasetName, dataset: Dataset) -> list[DatasetName]:
    """What a dataset is known by: its name and its catalog tables (`symlinks`), so that a
    table written by location and read by name is one dataset; none of namespace `unknown`,
    which only labels what could not be named."""
    keys = [name] if name.namespace != UNKNOWN_NAMESPACE else []
    links = dataset.get("facets", {}).get("symlinks", {}).get("identifiers", ())
    for link in links:
        key = DatasetName(str(link.get("namespace")), str(link.get("name")))
        if key.namespace != UNKNOWN_NAMESPACE and key not in keys:
            keys.append(key)
    return keys


def _identity(entry: Mapping[str, Any]) -> bool:
    return any(
        t.get("type") == "DIRECT" and t.get("subtype") == "IDENTITY"
        for t in entry.get("transformations", ())
    )


def _fields(dataset: Dataset) -> list[Field]:
    fields = dataset.get("facets", {}).get("schema", {}).get("fields")
    return fields if isinstance(fields, list) else []


def _typed(found: Field, known: Field | None) -> Field:
    """`found` with the type (and nested fields) of `known` when it has none of its own."""
    if "type" in found or known is None or "type" not in known:
        return found
    return {**_copy([known])[0], "name": found["name"]}


def _union(known: list[Field], seen: list[Field]) -> list[Field]:
    """Every known field in its order (typed from `seen` where only `seen` types it), then
    the fields only `seen` has."""
    by_name = {f["name"]: f for f in seen}
    merged = [_copy([_typed(f, by_name.get(f["name"]))])[0] for f in known]
    names = {f["name"] for f in known}
    return merged + _copy([f for f in seen if f["name"] not in names])


def _copy(fields: Iterable[Field]) -> list[Field]:
    """Fields that share nothing with the events they came from or go to."""
    return [{k: _copy(v) if k == "fields" else v for k, v in found.items()} for found in fields]
