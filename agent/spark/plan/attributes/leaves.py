"""Scan operators, the leaves of the attribute walk: the dataset fields each attribute they
output reads, and the dataset-level FILTER dependencies of the partitions they prune and of
the filters a source evaluates itself (no Filter node is left for those).

Each function receives the walk (`operators.AttributeGraph`, seen through the `ScanWalk`
Protocol), the scan operator and, where it adds them, the dataset-level dependencies of its
tree, and returns the attributes the operator produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from agent import linear
from agent.spark.plan.attributes.kinds import relation_columns
from agent.spark.plan.attributes.shaping import attributes
from agent.spark.plan.syntax.schema import split_top
from agent.spark.plan.syntax.text import Attribute, PlanNode, bracketed

DATASET_SCANS: Final = ("Scan ", "FileScan", "BatchScan", "HiveTableScan", "MicroBatchScan")
_HIVE_SCAN: Final = "Scan hive "
#: The column a source filter tests: its first argument (`GreaterThan(amount,30)`,
#: `In(city, [a,b])`, nested in `And(...)`, `Or(...)`, `Not(...)`).
_PUSHED_COLUMN = linear.compile(r"[A-Za-z]+\(([^(),\[\]]+)[,)]")
#: The node of a V2 JDBC catalog's scan, and the names and string literals of its SQL filters.
V2_JDBC_SCAN: Final = "Scan JDBC v1 Relation from v2 scan "
_SQL_NAME = linear.compile(r'`(?:[^`]|``)+`|"[^"]+"|[A-Za-z_][A-Za-z0-9_]*')
_SQL_STRING = linear.compile(r"'(?:[^']|'')*'")


@dataclass(frozen=True, slots=True)
class Source:
    """A field of a scanned dataset: the scan's operator id and the field's name."""

    scan: int
    field: str


class ScanWalk(Protocol):
    """What a scan may ask of the attribute walk."""

    leaves: dict[int, Source]
    scans: dict[int, PlanNode]
    unread: int  # the last attribute made up for a column only a pushed filter tests

    def depends(self, text: str | None, subtype: str, dataset: list[tuple[int, str]]) -> None:
        """Add the attributes `text` references as INDIRECT `subtype` dependencies."""
        ...


def dataset_scan(
    graph: ScanWalk, node: PlanNode, dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """A scan of a dataset (`Scan <format>`, `FileScan`, `BatchScan`, a Hive scan)."""
    attrs = attributes(node.detail_list("Output"))
    graph.scans[node.op_id] = node
    for attr in attrs:
        graph.leaves[attr.expr_id] = Source(node.op_id, attr.name)
    for condition in node.detail_list("PartitionFilters") or []:
        graph.depends(condition, "FILTER", dataset)
    if node.name.startswith(_HIVE_SCAN):
        # `[attrs], HiveTableRelation [...], [partition pruning predicates]`: the
        # partitions a predicate prunes are never read, and no Filter node is left
        arguments = split_top(node.details.get("Arguments", ""))
        pruning = bracketed(arguments[2].strip()) if len(arguments) > 2 else None
        for condition in pruning or []:
            graph.depends(condition, "FILTER", dataset)
    _pushed_filters(graph, node, attrs, dataset)
    return attrs


def logical_relation(graph: ScanWalk, node: PlanNode) -> list[Attribute]:
    """`LogicalRelation` of a save's query, printed as a logical plan (`Arguments: json,
    [a#1, b#2], false`): a scan of the relation's columns, its files not named."""
    attrs = attributes(relation_columns(node))
    graph.scans[node.op_id] = node
    for attr in attrs:
        graph.leaves[attr.expr_id] = Source(node.op_id, attr.name)
    return attrs


def _pushed_filters(
    graph: ScanWalk, node: PlanNode, attrs: list[Attribute], dataset: list[tuple[int, str]]
) -> None:
    """Filters a source handles whole (`PushedFilters: [*GreaterThan(amount,30)]`, a
    JDBC scan) leave no Filter node: each column they test is an INDIRECT FILTER input.
    Filters without `*` are also evaluated by a Filter above the scan, which counts them.
    A tested column the scan does not output gets an attribute of its own (negative)."""
    by_name = {a.name: a.expr_id for a in attrs}
    if node.name.startswith(V2_JDBC_SCAN):
        _pushed_predicates(node, by_name, dataset)
        return
    for condition in node.detail_list("PushedFilters") or []:
        if not condition.startswith("*"):
            continue
        for column in dict.fromkeys(_PUSHED_COLUMN.findall(condition)):
            column = column.strip().strip('`"')
            if column not in by_name:
                graph.unread -= 1
                by_name[column] = graph.unread
                graph.leaves[graph.unread] = Source(node.op_id, column)
            dataset.append((by_name[column], "FILTER"))


def _pushed_predicates(
    node: PlanNode, by_name: Mapping[str, int], dataset: list[tuple[int, str]]
) -> None:
    """A V2 JDBC catalog's scan prints the predicates the database evaluates as SQL
    (`PushedFilters: [id IS NOT NULL, id > 1]`, no `*`): each output column they name
    is an INDIRECT FILTER input (one evaluated again by a Filter above counts once)."""
    for condition in node.detail_list("PushedFilters") or []:
        text = _SQL_STRING.sub("", condition)
        for token in dict.fromkeys(_SQL_NAME.findall(text)):
            column = token.strip('`"')
            if column in by_name:
                dataset.append((by_name[column], "FILTER"))
