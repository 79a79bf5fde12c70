"""Column lineage of the writes of one plan: `columns.PlanGraph` over the plan description,
attached to the output datasets `read` found, with the scans it follows named as datasets
and every written column typed (`typeinfer`).

Writes followed: `InsertIntoHadoopFsRelationCommand`, `InsertIntoHiveTable` and the V2
writes whose query is their child in the same plan (`AppendData`, `OverwriteByExpression`,
...). A write that runs its query as a nested execution (a JDBC save, a V2 write through
the V1 fallback) is handled from the other side: that query's plan has no write, its root
hands rows to the caller (`DeserializeToObject`), and its lineage and typed columns become a
`feeds_write` reference that the translator lends to the run's output (the schema even when
the query reads no dataset). CTAS commands name their table only; the insert they run carries
the lineage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from agent.spark.plan.attributes.columns import PlanGraph, written_attributes
from agent.spark.plan.attributes.typeinfer import TypeOracle
from agent.spark.plan.datasets import DatasetRef, WrittenLineage
from agent.spark.plan.syntax.expressions import Transformation
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.syntax.text import Attribute, PlanNode, PlanText, parse_attribute, parse_plan

ScanDatasets = Callable[[PlanNode, Mapping[int, Field]], list[DatasetRef]]

_FOLLOWED: Final = frozenset(
    {
        "Execute InsertIntoHadoopFsRelationCommand",
        "InsertIntoHiveTable",
        "InsertIntoHiveDirCommand",
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
        "ReplaceData",
        "WriteDelta",
    }
)
_WRAPPERS: Final = ("AdaptiveSparkPlan", "ResultQueryStage")
_SAVE: Final = "SaveIntoDataSourceCommand"
#: The columns a Kafka sink takes, with the type the topic stores them as (None: as given).
_KAFKA_RECORD: Final = {
    "key": "binary",
    "value": "binary",
    "topic": "string",
    "partition": "integer",
    "headers": None,
}
#: Delta's scan of the MERGE source it materialized in an execution of its own.
_MATERIALIZED: Final = "Scan ExistingRDD mergeMaterializedSource"
_MAX_WALK: Final = 100_000
#: Row-level writes (Iceberg MERGE / UPDATE / DELETE) and the metadata columns they carry.
_ROW_LEVEL: Final = ("ReplaceData", "WriteDelta")
_ROW_LEVEL_COLUMNS: Final = frozenset(
    {"__row_operation", "__row_id", "_file", "_pos", "_spec_id", "_partition"}
)
#: The root of a query whose rows a write in the calling execution consumes.
_FEEDING: Final = "DeserializeToObject"
_TRUNCATED_NOTE: Final = (
    "column lineage of {what} is incomplete: the plan cuts long expressions "
    "(spark.sql.debug.maxToStringFields); a cut expression is taken to read every column "
    "its operator reads"
)


def followed(ref: DatasetRef) -> bool:
    """Whether the column lineage of this output is followed through its plan."""
    command = ref.node.removeprefix("Execute ")
    return ref.role == "output" and (
        ref.node in _FOLLOWED
        or command in _FOLLOWED
        or command.split(" ", 1)[0] in _FOLLOWED
        or (ref.format == "kafka" and command == _SAVE)  # its query is a logical plan
    )


def kafka_columns(ref: DatasetRef) -> DatasetRef:
    """A Kafka save's written columns as the topic stores them: in a Kafka record's order
    (`key`, `value`, `topic`, …) and types (a string `key` or `value` is stored as bytes),
    the schema a read of the topic shows."""
    if ref.role != "output" or ref.format != "kafka" or not ref.fields:
        return ref
    order = list(_KAFKA_RECORD)
    fields = sorted(ref.fields, key=lambda f: order.index(f.name) if f.name in order else 9)
    stored = (Field(f.name, _KAFKA_RECORD.get(f.name), f.fields) for f in fields)
    return dataclasses.replace(ref, fields=tuple(stored))


def save_inputs(datasets: Sequence[DatasetRef]) -> list[DatasetRef]:
    """What the query of a Kafka save reads: the plan has no scan node for it, only the
    relations of the logical plan its lineage followed (one per dataset)."""
    found: dict[tuple[object, ...], DatasetRef] = {}
    for ref in datasets:
        if ref.role != "output" or ref.format != "kafka" or ref.columns is None:
            continue
        for scanned in ref.columns.inputs.values():
            for read in scanned:
                found.setdefault((read.location, read.kafka, read.jdbc, read.node), read)
    return list(found.values())


def attach(
    datasets: Sequence[DatasetRef],
    description: str,
    types: Mapping[int, Field],
    scan_datasets: ScanDatasets,
    notes: list[str],
) -> list[DatasetRef]:
    """`datasets` with column lineage on the outputs it follows (and a `feeds_write`
    reference for a query feeding another execution's write). Never raises."""
    out = list(datasets)
    writes = [i for i, ref in enumerate(out) if followed(ref)]
    writes_any = any(ref.role == "output" for ref in out)
    if not writes and (writes_any or _FEEDING not in description):
        return out
    plan = parse_plan(description)
    if plan.root is None:
        if writes and description.strip():  # empty: the execution never planned
            notes.append(
                "no column lineage: the plan description has no operator ids "
                "(spark.sql.ui.explainMode is not 'formatted')"
            )
        return out
    feeding = None if writes_any else _feeding_root(plan.root)
    if not writes and feeding is None:
        return out
    try:
        return _follow(out, writes, plan, feeding, types, scan_datasets, notes)
    except Exception as exc:  # a reader bug must not cost the datasets; the note says why
        notes.append(f"column lineage not read: internal error {exc!r}")
        return list(datasets)


def _follow(
    out: list[DatasetRef],
    writes: list[int],
    plan: PlanText,
    feeding: PlanNode | None,
    types: Mapping[int, Field],
    scan_datasets: ScanDatasets,
    notes: list[str],
) -> list[DatasetRef]:
    graph = PlanGraph(plan)
    oracle = TypeOracle(graph, types)
    for index in writes:
        ref = out[index]
        command = ref.node.removeprefix("Execute ")
        node = graph.find(ref.node, f"Execute {command}", command)
        if node is None:
            notes.append(f"no column lineage for {ref.node!r}: not in the plan description")
            continue
        attrs = written_attributes(graph, node)
        if command.startswith(_ROW_LEVEL):  # the row's operation and file are no columns
            attrs = [a for a in attrs if a.name not in _ROW_LEVEL_COLUMNS]
        out[index] = _with_lineage(ref, graph, attrs, oracle, scan_datasets, types)
    if feeding is not None:
        attrs = written_attributes(graph, feeding)
        query = DatasetRef("output", feeding.name, feeds_write=True)
        query = _with_lineage(query, graph, attrs, oracle, scan_datasets, types)
        # a query that reads nothing (a range, local rows) still gives the write its schema
        if query.fields or (query.columns is not None and query.columns.lineage.size):
            out.append(query)
    for name in dict.fromkeys(graph.unrecognized):
        notes.append(f"column lineage stops at unrecognized plan node {name!r}")
    for name, key in dict.fromkeys(graph.unreadable):
        notes.append(
            f"column lineage stops at {name!r}: its {key} list does not split into the "
            "items Spark counted (a string literal with brackets or quotes?)"
        )
    for ref in out:
        if ref.columns is not None and ref.columns.lineage.incomplete and graph.truncated:
            notes.append(_TRUNCATED_NOTE.format(what=repr(ref.node)))
    return out


def returned(
    description: str,
    types: Mapping[int, Field],
    scan_datasets: ScanDatasets,
    query: Collection[int] = (),
) -> DatasetRef | None:
    """The rows a plan's root returns to its caller, as a `feeds_write` reference with their
    schema and column lineage: a streaming micro-batch, whose sink is not in its plan; with
    `query`, the query of a Delta write run as this nested execution, recognized by its
    root returning every one of those attributes (else None). None when the plan does not
    tell; never raises."""
    plan = parse_plan(description)
    if plan.root is None:
        return None
    try:
        graph = PlanGraph(plan)
        root = plan.root
        while root.name.startswith(_WRAPPERS) and root.children:
            root = root.children[0]
        rows = DatasetRef("output", root.name, feeds_write=True, query=tuple(query))
        oracle = TypeOracle(graph, types)
        # a V2 sink's write (Kafka, Iceberg) is the root: what it writes is its child's output
        attrs = graph.output(root) or written_attributes(graph, root)
        if not set(query) <= {a.expr_id for a in attrs}:
            return None  # another of the statement's executions (Delta's log replay, ...)
        rows = _with_lineage(rows, graph, attrs, oracle, scan_datasets, types)
    except Exception:  # a reader bug must not cost the micro-batch its datasets
        return None
    return rows if rows.fields else None


def _feeding_root(root: PlanNode) -> PlanNode | None:
    node = root
    while node.name.startswith(_WRAPPERS) and node.children:
        node = node.children[0]
    return node if node.name.startswith(_FEEDING) else None


def _with_lineage(
    ref: DatasetRef,
    graph: PlanGraph,
    attrs: Sequence[Attribute],
    oracle: TypeOracle,
    scan_datasets: ScanDatasets,
    types: Mapping[int, Field],
) -> DatasetRef:
    """The written columns' lineage and types; names from the command when it lists as
    many as are written (it can rename: `INSERT INTO t SELECT a + 1`), else the attributes'."""
    if not attrs:
        return ref
    names = [f.name for f in ref.fields]
    if len(names) != len(attrs):
        names = [a.name for a in attrs]
    lineage = graph.lineage([(n, a.expr_id) for n, a in zip(names, attrs, strict=True)])
    inputs = {scan: tuple(scan_datasets(node, types)) for scan, node in lineage.scans.items()}
    fields = tuple(
        _typed(name, attr, ref.fields[i] if len(ref.fields) == len(attrs) else None, oracle)
        for i, (name, attr) in enumerate(zip(names, attrs, strict=True))
    )
    if not (lineage.size or lineage.incomplete):  # nothing read: no facet to carry
        return dataclasses.replace(ref, fields=fields)
    return dataclasses.replace(ref, columns=WrittenLineage(lineage, inputs), fields=fields)


def _typed(name: str, attr: Attribute, known: Field | None, oracle: TypeOracle) -> Field:
    if known is not None and known.type is not None:
        return known
    found = oracle.of(attr.expr_id)
    if found is not None and found.type is not None:
        return Field(name, found.type, found.fields)
    return Field(name, "long" if attr.is_long else None)


#: An attribute resolved in another execution: (dataset, field, transformations) it reads.
Resolved = tuple[tuple[DatasetRef, str, tuple[Transformation, ...]], ...]


def resolve_attributes(
    description: str,
    wanted: Collection[int],
    types: Mapping[int, Field],
    scan_datasets: ScanDatasets,
) -> dict[int, Resolved]:
    """The dataset fields behind the `wanted` attributes this plan defines (a Delta MERGE's
    source and target, read in the statement's other executions). Never raises."""
    try:
        plan = parse_plan(description)
        if plan.root is None:
            return {}
        graph = PlanGraph(plan)
    except Exception:  # a reader bug costs this resolution only
        return {}
    known = graph.leaves.keys() | graph.defined | graph.edges.keys()
    found: dict[int, Resolved] = {}
    for attr in wanted:
        if attr not in known:
            continue
        resolved, partial = graph.resolve(attr)
        if partial:
            continue
        fields = []
        for source, transformations in sorted(
            resolved.items(), key=lambda i: (i[0].scan, i[0].field)
        ):
            node = graph.scans.get(source.scan)
            for ref in scan_datasets(node, types) if node is not None else []:
                fields.append((ref, source.field, tuple(sorted(transformations))))
        found[attr] = tuple(fields)
    return found


def returned_ids(description: str) -> tuple[int, ...]:
    """The ids of the attributes a plan's root returns, in order; () when the plan does not
    tell. Never raises."""
    plan = parse_plan(description)
    if plan.root is None:
        return ()
    try:
        graph = PlanGraph(plan)
        root = plan.root
        while root.name.startswith(_WRAPPERS) and root.children:
            root = root.children[0]
        return tuple(a.expr_id for a in graph.output(root))
    except Exception:  # a reader bug costs this lookup only
        return ()


def materialized_scans(description: str) -> tuple[tuple[int, ...], ...]:
    """The attributes each scan of a Delta MERGE's materialized source outputs, in order
    (`Scan ExistingRDD mergeMaterializedSource`, in the statement's later executions)."""
    plan = parse_plan(description)
    found: dict[tuple[int, ...], None] = {}
    stack = [*([plan.root] if plan.root else []), *plan.initial]
    seen = 0
    while stack and seen < _MAX_WALK:
        node = stack.pop()
        seen += 1
        stack.extend(node.children)
        if node.name.startswith(_MATERIALIZED):
            attrs = [parse_attribute(item) for item in node.detail_list("Output") or ()]
            if attrs and all(a is not None for a in attrs):
                found[tuple(a.expr_id for a in attrs if a is not None)] = None
    return tuple(found)
