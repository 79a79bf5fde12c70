"""The SQL executions of one application that are open now, grouped into runs by their root.

Pure bookkeeping for the translator: nested executions (a CTAS and the insert it runs share
`rootExecutionId`) belong to one run, keyed by the root; what an execution's plans name is
merged onto it (`add_plan`), its SQL metric values too (`add_metrics`). The nested execution
that runs a Delta write's query (recognized by the attributes its root returns) adds the rows
it returns, which lend that write their lineage and schema. A root that ended is
remembered (recent ones: see `remember`), so a late nested execution cannot reopen it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, ValuesView
from typing import Any

from agent import linear
from agent.spark.plan.touched.read import (
    attribute_sources,
    merge_source_filters,
    merge_source_rows,
    merge_source_scans,
    read_plan,
    returned_rows,
)
from agent.spark.translate.datasets.brokers import KafkaServers
from agent.spark.translate.datasets.jdbc import JdbcUrls
from agent.spark.translate.datasets.places import TablePlaces
from agent.spark.translate.datasets.relations import FileRelations
from agent.spark.translate.datasets.rundatasets import names_dataset
from agent.spark.translate.model import Execution, Run, remember
from agent.spark.translate.values import as_int, as_number

#: Delta's description of a nested execution that replays a table's log up to a version.
_SNAPSHOT = linear.compile(r"Compute snapshot for version: (\d+)")
#: Delta's description of the nested execution that materializes a MERGE's source.
_MATERIALIZE = "MERGE operation - materialize source"


class SqlRuns:
    """Open SQL runs by root execution id, and their executions by id."""

    def __init__(self) -> None:
        self._runs: dict[int, Run] = {}
        self._executions: dict[int, Execution] = {}
        self._ended_roots: set[int] = set()

    def __bool__(self) -> bool:
        """Whether any SQL run is still open."""
        return bool(self._runs)

    def runs(self) -> ValuesView[Run]:
        return self._runs.values()

    def execution(self, exec_id: int | None) -> Execution | None:
        return self._executions.get(exec_id) if exec_id is not None else None

    def run_of(self, execution: Execution) -> Run:
        return self._runs[execution.root]

    def ended(self, root: int) -> bool:
        """Whether the run of this root execution ended recently."""
        return root in self._ended_roots

    def open(self, exec_id: int, root: int, new_run: Callable[[], Run]) -> tuple[Run, Execution]:
        """Add an execution to its root's run, opening the run (`new_run`) if need be."""
        run = self._runs.get(root)
        if run is None:
            run = self._runs[root] = new_run()
        execution = self._executions[exec_id] = Execution(exec_id, root)
        run.executions.append(execution)
        return run, execution

    def close(self, run: Run) -> None:
        """Forget an ended run and its executions; remember its root as ended."""
        del self._runs[run.key]
        remember(self._ended_roots, run.key)
        for execution in run.executions:
            self._executions.pop(execution.exec_id, None)


def add_plan(
    execution: Execution,
    event: Mapping[str, Any],
    urls: JdbcUrls,
    run: Run | None = None,
    kafka: KafkaServers | None = None,
    places: TablePlaces | None = None,
    files: FileRelations | None = None,
) -> tuple[list[str], bool]:
    """Merge what the event's plan names onto the execution: (new notes on what could not be
    read, whether the execution now names a dataset). JDBC tables printed without their url
    take the one the application's log showed (`urls`, which learns this plan's first);
    session-catalog tables printed without their location, the place it showed (`places`,
    which learns from each reference in turn).
    When a Delta MERGE of its `run` assigns from attributes, those this plan defines are
    resolved onto the execution. The servers of its Kafka writes go to `kafka`, and a note
    says when its Kafka reads' are unknown. A relation printed without its files takes
    those the application's plans showed it reads (`files`, which learns this plan's scans
    after)."""
    plan = read_plan(event.get("sparkPlanInfo"), event.get("physicalPlanDescription"))
    for ref in plan.datasets:
        urls.learn(ref)
    datasets = [urls.resolve(ref) for ref in plan.datasets]
    if files is not None:
        datasets = files.locate(datasets)
        files.learn(plan.reads)
    if places is not None:
        datasets = [places.place(ref) for ref in datasets]
    with_url = {ref.jdbc[1] for ref in datasets if ref.jdbc is not None and ref.jdbc[0]}
    told = [
        note
        for note in plan.notes
        if not any(note.startswith(f"JDBC table {table} is ") for table in with_url)
    ]
    if kafka is not None:
        kafka.written(datasets)
        read = [r.kafka[1] for r in datasets if r.role == "input" and r.kafka is not None]
        if read and kafka.servers is None:
            told.append(
                f"Kafka topics {', '.join(read)} are read, named kafka://unknown: "
                f"{kafka.unknown_reason}"
            )
    notes = [note for note in told if note not in execution.notes]
    execution.notes.update(notes)
    execution.command = execution.command or plan.command
    execution.writes = execution.writes or plan.writes
    for ref in datasets:
        # a later plan of the same execution (an AQE update) may print less: a V2 write
        # without its arguments does not undo the table an earlier plan named
        named = {(r.role, r.node) for r in execution.refs.values() if r.unknown_reason is None}
        if ref.unknown_reason is not None and (ref.role, ref.node) in named:
            continue
        if ref.unknown_reason is None:
            for key in [k for k, r in execution.refs.items() if r.unknown_reason is not None]:
                if (execution.refs[key].role, execution.refs[key].node) == (ref.role, ref.node):
                    del execution.refs[key]
        execution.refs[(ref.role, ref.node, ref.location, ref.table, ref.jdbc, ref.kafka)] = ref
    if places is not None and run is not None:  # a CTAS's table at its insert's path
        places.created(r for e in run.executions for r in e.refs.values())
    snapshot = (
        _SNAPSHOT.search(description)
        if isinstance(description := event.get("description"), str)
        else None
    )
    if snapshot is not None:  # Delta computing the version a statement reads
        execution.snapshots.update(dict.fromkeys(plan.delta_logs, snapshot[1]))
    if run is not None and execution.exec_id != execution.root and not plan.writes:
        for query in _delta_queries(run):  # the nested execution that runs a write's query
            rows = returned_rows(event.get("physicalPlanDescription"), query)
            if rows is not None:
                execution.refs[("output", rows.node, None, None, None, None, query)] = rows
                break
    wanted = _merge_attributes(run) if run is not None else set()
    if wanted:
        text = event.get("physicalPlanDescription")
        label = event.get("description")
        if isinstance(label, str) and _MATERIALIZE in label:
            # the optimizer may drop the aliases that gave the source's columns the ids the
            # MERGE names; its later scans of the materialized rows use those ids again
            execution.source_rows = merge_source_rows(text)
            execution.source_filters = merge_source_filters(text)
            wanted = wanted | set(execution.source_rows)
        execution.source_scans.update(merge_source_scans(text))
        found = attribute_sources(text, wanted)
        execution.attributes.update(found)
    return notes, any(map(names_dataset, execution.refs.values()))


def _delta_queries(run: Run) -> list[tuple[int, ...]]:
    """The queries the Delta writes of a run run as nested executions, by the attributes
    each returns (`DatasetRef.query`); those already found are left out."""
    refs = [r for e in run.executions for r in e.refs.values() if r.query]
    found = {r.query for r in refs if r.feeds_write}
    return [q for q in dict.fromkeys(r.query for r in refs if not r.feeds_write) if q not in found]


def _merge_attributes(run: Run) -> set[int]:
    """The attributes the Delta MERGE commands of a run assign from or test."""
    wanted: set[int] = set()
    for execution in run.executions:
        for ref in execution.refs.values():
            merge = ref.columns.merge if ref.columns is not None else None
            if merge is not None:
                wanted.update(a for found in merge.assigned.values() for a, _ in found)
                wanted.update(merge.conditions)
    return wanted


def add_metrics(execution: Execution, updates: object) -> None:
    """Record a DriverAccumUpdates event's `[accumulator id, value]` pairs."""
    if not isinstance(updates, Sequence):
        return
    for pair in updates:
        if isinstance(pair, Sequence) and len(pair) == 2:
            acc, value = as_int(pair[0]), as_number(pair[1])
            if acc is not None and value is not None:
                execution.values[acc] = value
