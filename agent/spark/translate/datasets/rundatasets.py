"""OpenLineage datasets of a run, from what its plans name: named the OpenLineage way
(`naming`), with schema / dataSource / symlinks / lifecycleStateChange / version facets (and
`lineageAgent_topicPattern` on a Kafka read named by its pattern), statistics on
terminal events, and a ``columnLineage`` facet on written datasets whose plan's column lineage
was followed, its input fields named like the input datasets and bounded by `columnfacet`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agent.facets import facet
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.syntax.tables import TableIdent
from agent.spark.plan.touched.lineage import Resolved
from agent.spark.translate.datasets.columnfacet import DEFAULT_MAX_FIELDS, column_lineage_facets
from agent.spark.translate.datasets.merges import merged
from agent.spark.translate.naming import (
    UNKNOWN_NAMESPACE,
    Catalog,
    DatasetName,
    datasource_uri,
    from_jdbc,
    from_kafka,
    from_location,
    output_suffix,
)

_TABLE_FORMATS: Final = frozenset({"delta", "iceberg"})
_STAT_FIELDS: Final = {"rows": "rowCount", "bytes": "size", "files": "fileCount"}
#: Writes whose query runs as a nested execution (a `feeds_write` reference).
_FED_WRITES: Final = frozenset(
    {"SaveIntoDataSourceCommand", "AppendDataExecV1", "OverwriteByExpressionExecV1"}
)

Dataset = dict[str, Any]


def describe(ref: DatasetRef, catalog: Catalog) -> tuple[DatasetName, Dataset]:
    """The OpenLineage dataset for a plan reference, with schema / dataSource / symlinks /
    lifecycleStateChange facets; one that cannot be named lands in namespace `unknown`."""
    name: DatasetName | None = None
    if ref.unknown_reason is None:
        try:
            if ref.jdbc is not None:
                name = from_jdbc(*ref.jdbc)
            elif ref.kafka is not None:
                servers, topic = ref.kafka
                name = from_kafka(servers or catalog.kafka_bootstrap, topic)
            elif ref.location is not None:
                name = from_location(ref.location)
            elif ref.table is not None:
                name = catalog.table_location(ref.table, ref.format)
        except ValueError:
            name = None
    if name is None:  # a JDBC table without its url is still named by the table
        label = ref.jdbc[1] if ref.jdbc else ref.node.strip()
        name = DatasetName(UNKNOWN_NAMESPACE, label or "unknown")
    facets: dict[str, Any] = {}
    if ref.fields:
        facets["schema"] = facet("schema", fields=[_schema_field(f) for f in ref.fields])
    if name.namespace != UNKNOWN_NAMESPACE:
        source = facet("dataSource", name=name.namespace)
        uri = datasource_uri(name.namespace)
        if uri:
            source["uri"] = uri
        facets["dataSource"] = source
    if ref.table is not None:
        link = {
            "namespace": catalog.symlink_namespace(ref.table, name, ref.format),
            "name": ref.table.qualified,
            "type": "TABLE",
        }
        facets["symlinks"] = facet("symlinks", identifiers=[link])
    if ref.lifecycle:
        facets["lifecycleStateChange"] = facet(
            "lifecycleStateChange", lifecycleStateChange=ref.lifecycle
        )
        if ref.previous is not None:
            before = (
                from_location(ref.previous_location)
                if ref.previous_location is not None
                else catalog.table_location(ref.previous, ref.format)
            )
            previous = {"namespace": before.namespace, "name": before.name}
            facets["lifecycleStateChange"]["previousIdentifier"] = previous
    if ref.version is not None:
        facets["version"] = facet("version", datasetVersion=ref.version)
    if ref.pattern and ref.kafka is not None:  # named by a pattern: the topics are not known
        facets["lineageAgent_topicPattern"] = facet(
            "lineageAgent_topicPattern", pattern=ref.kafka[1]
        )
    if ref.paths_cut is not None:  # Spark cut the scan's path list: the rest is unnamed
        read, named = ref.paths_cut
        facets["lineageAgent_pathList"] = facet(
            "lineageAgent_pathList", pathsRead=read, pathsNamed=named
        )
    dataset: Dataset = {"namespace": name.namespace, "name": name.name}
    if facets:
        dataset["facets"] = facets
    return name, dataset


@dataclass(slots=True)
class RunDatasets:
    """The datasets of one run, merged over the plan nodes and executions that name them."""

    inputs: dict[DatasetName, Dataset] = field(default_factory=dict)
    outputs: dict[DatasetName, Dataset] = field(default_factory=dict)
    tables: dict[DatasetName, TableIdent] = field(default_factory=dict)  # output -> table
    stats: dict[tuple[str, DatasetName], dict[str, int]] = field(default_factory=dict)
    tables_of: dict[DatasetName, str] = field(default_factory=dict)  # dataset -> delta, iceberg
    files_of: dict[DatasetName, str] = field(default_factory=dict)  # dataset -> parquet, csv, ...
    #: what the run read or wrote that the log gives no name for: (role, why), in order
    unnamed: dict[tuple[str, str], None] = field(default_factory=dict)

    @property
    def first_output_suffix(self) -> str | None:
        """The job-name suffix of the run's first output, if it has one."""
        first = next(iter(self.outputs), None)
        return None if first is None else output_suffix(first, self.tables.get(first))

    @property
    def first_input_suffix(self) -> str | None:
        """The job-name suffix of the run's first input (named like an output)."""
        first = next(iter(self.inputs), None)
        return None if first is None else output_suffix(first, None)

    def as_lists(self, *, statistics: bool) -> tuple[list[Dataset], list[Dataset]]:
        """`inputs` and `outputs` of a RunEvent; statistics facets on terminal events only."""
        if statistics:
            for role, datasets in (("input", self.inputs), ("output", self.outputs)):
                key = f"{role}Statistics"
                for name, dataset in datasets.items():
                    found = self.stats.get((role, name))
                    if found:
                        values = {_STAT_FIELDS[s]: found[s] for s in _STAT_FIELDS if s in found}
                        dataset[f"{role}Facets"] = {key: facet(key, **values)}
        return list(self.inputs.values()), list(self.outputs.values())


def collect(
    refs: Iterable[tuple[DatasetRef, Mapping[int, int]]],
    catalog: Catalog,
    *,
    column_lineage_max_fields: int = DEFAULT_MAX_FIELDS,
    attributes: Mapping[int, Resolved] | None = None,
    snapshots: Mapping[str, str] | None = None,
    merge_rows: Resolved = (),
) -> RunDatasets:
    """Merge plan references (with their execution's accumulator values) into a run's datasets.

    A CTAS names only its table; the insert it runs names the table's path. The table goes
    onto that path's dataset (symlink, lifecycle CREATE): the output at the table's default
    location, else the only output without a table of its own (a custom LOCATION).

    Outputs get their `columnLineage` facet (at most `column_lineage_max_fields` input
    fields; 0 leaves it out) from the first reference that carries lineage. A query feeding
    a write of another execution (`feeds_write`) lends its lineage, and its schema if the
    output has none, to the run's only output that writes through such a query. The query
    of a Delta write, recognized by the attributes it returns (`DatasetRef.query`), lends
    its lineage to that write's output, in place of what the write's arguments tell.
    `merge_rows`: what decides which rows of a Delta MERGE's materialized source exist.
    """
    run = RunDatasets()
    created: list[DatasetRef] = []
    feeding: list[DatasetRef] = []
    lineages: dict[DatasetName, DatasetRef] = {}
    fed: list[DatasetName] = []  # outputs whose query ran in a nested execution
    queried: dict[tuple[int, ...], DatasetName] = {}  # Delta writes' queries -> output
    for ref, values in refs:
        if ref.feeds_write:
            feeding.append(ref)
            continue
        if not names_dataset(ref):
            created.append(ref)
            continue
        unnamed = unnamed_reason(ref)
        if unnamed is not None:
            run.unnamed[(ref.role, unnamed)] = None
            continue
        name, dataset = describe(ref, catalog)
        _merge(run.inputs if ref.role == "input" else run.outputs, name, dataset)
        fmt = ref.format
        if fmt is None and ref.table is not None and catalog.iceberg_catalog(ref.table, None):
            fmt = "iceberg"  # a V2 command on a table of an Iceberg catalog
        if fmt in _TABLE_FORMATS:
            run.tables_of.setdefault(name, fmt)
        elif fmt is not None:
            run.files_of.setdefault(name, fmt)
        if ref.role == "output":
            if ref.table is not None:
                run.tables.setdefault(name, ref.table)
            if ref.columns is not None:
                lineages.setdefault(name, ref)
            if ref.node.removeprefix("Execute ").split(" ", 1)[0] in _FED_WRITES:
                fed.append(name)
            if ref.query:
                queried[ref.query] = name
        total = run.stats.setdefault((ref.role, name), {})
        for stat, acc in ref.metrics.items():
            if acc in values:
                total[stat] = total.get(stat, 0) + values[acc]
    for ref in created:
        name, dataset = describe(ref, catalog)
        untabled = [n for n in run.outputs if n not in run.tables]
        target = name if name in run.outputs else untabled[0] if len(untabled) == 1 else None
        if target is None:
            _merge(run.outputs, name, dataset)
            target = name
        else:
            facets = run.outputs[target].setdefault("facets", {})
            for key in ("symlinks", "lifecycleStateChange"):
                facets[key] = dataset["facets"][key]
        if ref.table is not None:
            run.tables[target] = ref.table
        if ref.columns is not None:  # a CTAS's query, resolved in its nested executions
            lineages.setdefault(target, ref)
        if ref.query:
            queried[ref.query] = target
        facets = run.outputs[target].setdefault("facets", {})
        if ref.fields and "schema" not in facets:
            facets["schema"] = facet("schema", fields=[_schema_field(f) for f in ref.fields])
        if ref.format in _TABLE_FORMATS:
            run.tables_of.setdefault(target, ref.format)
    for rows in feeding:  # a Delta write's query, run as a nested execution: its plan
        target = queried.get(rows.query) if rows.query else None
        if target is not None:  # tells more than the write's own arguments
            lineages[target] = rows
            _lend_schema(run.outputs[target].setdefault("facets", {}), rows.fields)
    feeding = [rows for rows in feeding if not rows.query]
    fed = [name for name in dict.fromkeys(fed) if name not in lineages]
    if feeding and len(fed) == 1:
        lineages[fed[0]] = feeding[-1]
        facets = run.outputs[fed[0]].setdefault("facets", {})
        if "schema" not in facets and feeding[-1].fields:
            facets["schema"] = facet(
                "schema", fields=[_schema_field(f) for f in feeding[-1].fields]
            )
    for table, version in (snapshots or {}).items():  # the one version a Delta input was read at
        read = run.inputs.get(from_location(table))
        if read is not None and "version" not in read.get("facets", {}):
            read.setdefault("facets", {})["version"] = facet("version", datasetVersion=version)
    if attributes is not None:  # a Delta MERGE's clauses, resolved in other executions
        lineages = {n: merged(ref, attributes, merge_rows) for n, ref in lineages.items()}
    _column_lineage(run, lineages, catalog, column_lineage_max_fields)
    return run


def _column_lineage(
    run: RunDatasets,
    lineages: Mapping[DatasetName, DatasetRef],
    catalog: Catalog,
    max_fields: int,
) -> None:
    names: dict[int, tuple[str, str] | None] = {}

    def name_of(ref: DatasetRef) -> tuple[str, str] | None:
        if id(ref) not in names:
            name = None if unnamed_reason(ref) else describe(ref, catalog)[0]
            names[id(ref)] = None if name is None else (name.namespace, name.name)
        return names[id(ref)]

    for output, ref in lineages.items():
        if ref.columns is None or output not in run.outputs:
            continue
        found = column_lineage_facets(ref.columns, name_of, max_fields)
        if found:
            run.outputs[output].setdefault("facets", {}).update(found)


def unnamed_reason(ref: DatasetRef) -> str | None:
    """Why a reference names no dataset the log can tell, or None when it names one: a
    name would have to be made up from a plan node or a command (a relation without its
    files, a write the agent does not read), or a Kafka topic chosen row by row. A JDBC or
    catalog table whose place is unknown is still named by its table."""
    if ref.role == "output" and ref.pattern and ref.kafka is not None:
        return f"Kafka topic chosen per row, by the pattern {ref.kafka[1]!r}"
    if ref.unknown_reason is not None and ref.jdbc is None and ref.table is None:
        return ref.unknown_reason
    return None


def names_dataset(ref: DatasetRef) -> bool:
    """Whether a reference names a dataset by itself: not a CTAS table awaiting its insert,
    not a query feeding another execution's write."""
    return not ref.feeds_write and not (
        not ref.ddl
        and ref.role == "output"
        and ref.location is None
        and ref.jdbc is None
        and ref.unknown_reason is None
        and ref.lifecycle == "CREATE"
    )


def _lend_schema(facets: dict[str, Any], fields: tuple[Field, ...]) -> None:
    """The schema of the rows a query wrote: when the output has none, or when it lists
    the same columns with fewer types (the write's arguments type longs only)."""
    schema = facets.get("schema")
    lent = [_schema_field(f) for f in fields]
    if not lent:
        return
    if schema is not None:
        known = schema.get("fields", [])
        names = [f.get("name") for f in known]
        typed = sum("type" in f for f in known)
        if names != [f["name"] for f in lent] or typed >= sum("type" in f for f in lent):
            return
    facets["schema"] = facet("schema", fields=lent)


def _merge(target: dict[DatasetName, Dataset], name: DatasetName, dataset: Dataset) -> None:
    """Union the facets of one dataset seen in several plan nodes; the first of each wins."""
    existing = target.setdefault(name, dataset)
    if existing is not dataset:
        facets = existing.setdefault("facets", {})
        for key, facet in dataset.get("facets", {}).items():
            facets.setdefault(key, facet)


def schema_fields(fields: Iterable[Field]) -> list[dict[str, Any]]:
    """Fields as the `schema` facet lists them."""
    return [_schema_field(f) for f in fields]


def _schema_field(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name}
    if f.type is not None:
        out["type"] = f.type
    if f.fields:
        out["fields"] = [_schema_field(child) for child in f.fields]
    return out
