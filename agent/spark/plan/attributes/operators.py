"""How each Spark operator defines its attributes: the walk behind column lineage.

`AttributeGraph(plan)` walks every operator of a `plantext.PlanText` once, children before
parents, and records per attribute id where its values come from: a scanned field (a leaf),
or other attributes through an expression (an edge carrying the transformation, see
`expressions`). Operators that filter, join, group or sort add dataset-level INDIRECT
dependencies. `columns.PlanGraph` resolves the graph into lineage.

Operators understood (Spark 3.5 / 4.x names): scans of datasets (`Scan <format> [table]`,
`Scan JDBCRelation(...)`, `Scan hive ...`, `BatchScan`, `FileScan`); leaves without a dataset
(`LocalTableScan`, `Range`, `Scan ExistingRDD`, `Scan OneRowRelation`); the cache
(`InMemoryTableScan` over `InMemoryRelation` and its cached plan); `Project`, `Filter`,
`HashAggregate` / `ObjectHashAggregate` / `SortAggregate` (partial buffers skipped: final
aggregates name the original inputs; grouping keys are the final aggregate's, not those of the
phases Spark plans below a distinct aggregate, which also group by the distinct columns), the
hash, sort-merge, nested-loop and cartesian joins, `Union`, `Window`, `WindowGroupLimit`,
`Expand`, `Generate`, `Sort` (only a global sort is a SORT dependency: local sorts serve
joins, windows and partitioned writes), limits,
`TakeOrderedAndProject`, Python UDF evaluation (the row-shaping operators live in `shaping`),
scalar and IN subqueries, V1 and V2 write
commands, and the operators that only move rows (exchanges, query stages, `AQEShuffleRead`,
codegen adapters). `ReusedExchange` maps its attributes onto the exchange it reuses,
position by position.

The initial plan of an adaptive execution is walked for definitions only: AQE keeps
attribute ids, and the final plan can name attributes only the initial plan defines (the
aggregate above a reused exchange). Anything else is *unrecognized*: its name goes to
`unrecognized`, attributes it passes on keep their lineage (ids are never reused for other
values), and attributes it creates have none, so the columns built from them are reported
incomplete, never guessed.

An expression Spark cut at `spark.sql.debug.maxToStringFields` (`..., ... 476 more fields)`)
hides some of its inputs; they can only be among the columns its operator reads. The
attribute it defines gets an edge to every one of them (with the transformation of the inputs
shown), an upper bound that is exact for the common case of a function over all columns (a
row hash), and stays reported incomplete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from agent import linear
from agent.spark.plan.expressions import (
    IDENTITY,
    TRANSFORMATION,
    Transformation,
    indirect,
    references,
)
from agent.spark.plan.kinds import (
    AGGREGATES,
    KEYED_JOINS,
    LOCAL_LEAVES,
    LOGICAL_RELATION,
    OTHER_JOINS,
    PASS_THROUGH,
    aggregate_phase,
    distinct_phases,
    nodes,
    relation_columns,
)
from agent.spark.plan.schema import split_top
from agent.spark.plan.shaping import HANDLERS, attributes
from agent.spark.plan.text import Attribute, PlanNode, PlanText, bracketed, parse_attribute

_DATASET_SCANS: Final = ("Scan ", "FileScan", "BatchScan", "HiveTableScan", "MicroBatchScan")
_HIVE_SCAN: Final = "Scan hive "
#: The column a source filter tests: its first argument (`GreaterThan(amount,30)`,
#: `In(city, [a,b])`, nested in `And(...)`, `Or(...)`, `Not(...)`).
_PUSHED_COLUMN = linear.compile(r"[A-Za-z]+\(([^(),\[\]]+)[,)]")
_REUSED = linear.compile(r"\[Reuses operator id: (\d+)\]")
#: The node of a V2 JDBC catalog's scan, and the names and string literals of its SQL filters.
V2_JDBC_SCAN: Final = "Scan JDBC v1 Relation from v2 scan "
_SQL_NAME = linear.compile(r'`(?:[^`]|``)+`|"[^"]+"|[A-Za-z_][A-Za-z0-9_]*')
_SQL_STRING = linear.compile(r"'(?:[^']|'')*'")


@dataclass(frozen=True, slots=True)
class Source:
    """A field of a scanned dataset: the scan's operator id and the field's name."""

    scan: int
    field: str


class AttributeGraph:
    """Where every attribute of one plan comes from; see the module docstring."""

    def __init__(self, plan: PlanText) -> None:
        self.edges: dict[int, list[tuple[int, Transformation]]] = {}
        self.leaves: dict[int, Source] = {}
        self.defined: set[int] = set()  # attributes made from nothing (literals, ranges)
        self.partial: set[int] = set()  # attributes whose origin the plan hides in part
        self.expressions: dict[int, str] = {}  # attribute -> the expression defining it
        self.generated: dict[int, tuple[str, int]] = {}  # attribute -> (generator, position)
        self.scans: dict[int, PlanNode] = {}
        self.unrecognized: list[str] = []
        self.unreadable: list[tuple[str, str]] = []  # (operator, detail) that did not split
        self.truncated = False  # some expression was cut at spark.sql.debug.maxToStringFields
        self.dataset: list[tuple[int, str]] = []  # (attribute, INDIRECT subtype)
        self._outputs: dict[int, list[Attribute]] = {}  # operator id -> its attributes
        self._reused: list[tuple[list[Attribute], int]] = []
        self.root = plan.root
        self._phases = distinct_phases(plan)
        self._unread = 0  # attributes made up for columns only a pushed filter tests
        self._reading: list[Attribute] = []  # what the operator being walked reads
        if plan.root is not None:
            self._walk(plan.root, self.dataset)
        for subquery in plan.subqueries:
            if subquery.root is not None:
                self._subquery(subquery.expression, subquery.root)
        for tree in plan.initial:  # definitions only: its operators did not run
            self._walk(tree, [])
        for reusing, reused in self._reused:
            original = self._outputs.get(reused, [])
            for mine, theirs in zip(reusing, original, strict=False):
                self._edge(mine.expr_id, theirs.expr_id, IDENTITY)

    # -- queries ----------------------------------------------------------------------------

    def find(self, *names: str) -> PlanNode | None:
        """The first operator (depth first, from the root) whose name starts with one of
        `names`."""
        for node in nodes(self.root):
            if node.name.startswith(names):
                return node
        return None

    def output(self, node: PlanNode) -> list[Attribute]:
        """The attributes an operator produces, as the walk derived them."""
        return list(self._outputs.get(node.op_id, []))

    def _walk(self, root: PlanNode, dataset: list[tuple[int, str]]) -> None:
        """Post-order over one tree: children first, so every operator sees its inputs."""
        stack: list[tuple[PlanNode, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if not expanded:
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(node.children))
                continue
            children = [self._outputs.get(c.op_id, []) for c in node.children]
            self._outputs[node.op_id] = self._operator(node, children, dataset)

    def _subquery(self, expression: str, root: PlanNode) -> None:
        """A subquery's value is its plan's output; what filters or groups inside it is an
        INDIRECT dependency of that value."""
        inside: list[tuple[int, str]] = []
        self._walk(root, inside)
        hosted = [attr for attr, _ in references(expression).references]
        if not hosted:
            return
        value = hosted[0]
        for attribute in self._outputs.get(root.op_id, []):
            self._edge(value, attribute.expr_id, IDENTITY)
        for attr, subtype in inside:
            self._edge(value, attr, indirect(subtype))

    def _operator(
        self, node: PlanNode, children: list[list[Attribute]], dataset: list[tuple[int, str]]
    ) -> list[Attribute]:
        name = node.name
        head = name.split(" ", 1)[0]
        unsplittable = node.unsplittable()
        # what the operator reads: its own `Input` list when it prints one (that is its
        # child's output as Spark knew it), else what the walk derived for the child
        first = [] if "Input" in unsplittable else attributes(node.detail_list("Input"))
        first = first or (children[0] if children else [])
        self._reading = first
        if unsplittable:
            self.unreadable.extend((name, key) for key in unsplittable)
            return self.unrecognized_node(node, first, note=False)
        if name.startswith(LOCAL_LEAVES):
            attrs = attributes(node.detail_list("Output"))
            self.defined.update(a.expr_id for a in attrs)
            return attrs
        if head == "InMemoryTableScan":
            return attributes(node.detail_list("Output")) or first
        if head == "InMemoryRelation":
            return self._cache(node, first)
        if name.startswith(_DATASET_SCANS):
            return self._scan(node, dataset)
        if name == LOGICAL_RELATION:
            return self._logical_relation(node)
        logical = _logical(node)
        if head == "Project":
            return self.project(node.detail_list("Arguments" if logical else "Output") or [])
        if head == "Filter":
            condition = node.details.get("Arguments" if logical else "Condition")
            self.depends(condition, "FILTER", dataset)
            return first
        if head in AGGREGATES:
            return self._aggregate(node, dataset)
        if head in KEYED_JOINS or head in OTHER_JOINS:
            return self._join(node, children, dataset)
        if head == "Union":
            return self._union(children)
        handler = HANDLERS.get(head)
        if handler is not None:
            return handler(self, node, first, dataset)
        if head in PASS_THROUGH or name.startswith("Execute ") or head.startswith("Reused"):
            if head == "ReusedExchange":
                return self._reused_exchange(node)
            return first or attributes(node.detail_list("Output") or node.detail_list("Input"))
        return self.unrecognized_node(node, first)

    def _scan(self, node: PlanNode, dataset: list[tuple[int, str]]) -> list[Attribute]:
        attrs = attributes(node.detail_list("Output"))
        self.scans[node.op_id] = node
        for attr in attrs:
            self.leaves[attr.expr_id] = Source(node.op_id, attr.name)
        for condition in node.detail_list("PartitionFilters") or []:
            self.depends(condition, "FILTER", dataset)
        if node.name.startswith(_HIVE_SCAN):
            # `[attrs], HiveTableRelation [...], [partition pruning predicates]`: the
            # partitions a predicate prunes are never read, and no Filter node is left
            arguments = split_top(node.details.get("Arguments", ""))
            pruning = bracketed(arguments[2].strip()) if len(arguments) > 2 else None
            for condition in pruning or []:
                self.depends(condition, "FILTER", dataset)
        self._pushed_filters(node, attrs, dataset)
        return attrs

    def _logical_relation(self, node: PlanNode) -> list[Attribute]:
        """`LogicalRelation` of a save's query, printed as a logical plan (`Arguments: json,
        [a#1, b#2], false`): a scan of the relation's columns, its files not named."""
        attrs = attributes(relation_columns(node))
        self.scans[node.op_id] = node
        for attr in attrs:
            self.leaves[attr.expr_id] = Source(node.op_id, attr.name)
        return attrs

    def _pushed_filters(
        self, node: PlanNode, attrs: list[Attribute], dataset: list[tuple[int, str]]
    ) -> None:
        """Filters a source handles whole (`PushedFilters: [*GreaterThan(amount,30)]`, a
        JDBC scan) leave no Filter node: each column they test is an INDIRECT FILTER input.
        Filters without `*` are also evaluated by a Filter above the scan, which counts them.
        A tested column the scan does not output gets an attribute of its own (negative)."""
        by_name = {a.name: a.expr_id for a in attrs}
        if node.name.startswith(V2_JDBC_SCAN):
            self._pushed_predicates(node, by_name, dataset)
            return
        for condition in node.detail_list("PushedFilters") or []:
            if not condition.startswith("*"):
                continue
            for column in dict.fromkeys(_PUSHED_COLUMN.findall(condition)):
                column = column.strip().strip('`"')
                if column not in by_name:
                    self._unread -= 1
                    by_name[column] = self._unread
                    self.leaves[self._unread] = Source(node.op_id, column)
                dataset.append((by_name[column], "FILTER"))

    def _pushed_predicates(
        self, node: PlanNode, by_name: Mapping[str, int], dataset: list[tuple[int, str]]
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

    def _cache(self, node: PlanNode, cached: list[Attribute]) -> list[Attribute]:
        """`InMemoryRelation [attrs], StorageLevel(...)` over the plan it cached."""
        arguments = split_top(node.details.get("Arguments", ""))
        attrs = attributes(bracketed(arguments[0]) if arguments else None)
        for mine, theirs in zip(attrs, cached, strict=False):
            self._edge(mine.expr_id, theirs.expr_id, IDENTITY)
        return attrs

    def project(self, items: Sequence[str]) -> list[Attribute]:
        out: list[Attribute] = []
        for item in items:
            attr = self.define(item)
            if attr is not None:
                out.append(attr)
        return out

    def define(self, item: str, *, generated: bool = False) -> Attribute | None:
        """An output item: `expr AS name#id` gets edges; a bare attribute passes through."""
        expression, alias, target = item.rpartition(" AS ")
        attr = parse_attribute(target)
        if attr is None:
            return None
        if not alias:
            return attr
        found = references(expression)
        self.expressions.setdefault(attr.expr_id, expression)
        if found.truncated:
            self.partial.add(attr.expr_id)
            self.truncated = True
        if not found.references:
            self.defined.add(attr.expr_id)
        for child, how in found.references:
            if generated and how == IDENTITY:  # a generated row is never the input itself
                how = TRANSFORMATION
            self._edge(attr.expr_id, child, how)
        if found.truncated:  # the hidden inputs are among what the operator reads
            shown = {child for child, _ in found.references}
            hows = [how for _, how in found.references if how != IDENTITY]
            how = hows[-1] if hows else TRANSFORMATION
            for read in self._reading:
                if read.expr_id not in shown and read.expr_id != attr.expr_id:
                    self._edge(attr.expr_id, read.expr_id, how)
        return attr

    def _aggregate(self, node: PlanNode, dataset: list[tuple[int, str]]) -> list[Attribute]:
        functions = node.detail_list("Functions") or []
        # partial and merge phases repeat the final aggregate's keys, or add to them the
        # columns a distinct aggregate groups by first: only the final keys group the rows
        if not aggregate_phase(functions) and node.op_id not in self._phases:
            for key in node.detail_list("Keys") or []:
                self.depends(key, "GROUP_BY", dataset)
        results = node.detail_list("Aggregate Attributes") or []
        if len(functions) == len(results):  # partial modes list buffers, which go unread
            for function, result in zip(functions, results, strict=True):
                attr = parse_attribute(result)
                if attr is not None and not function.startswith(("partial_", "merge_")):
                    self.define(f"{function} AS {result}")
        return self.project(node.detail_list("Results") or [])

    def _join(
        self, node: PlanNode, children: list[list[Attribute]], dataset: list[tuple[int, str]]
    ) -> list[Attribute]:
        keys = (node.detail_list("Left keys") or []) + (node.detail_list("Right keys") or [])
        condition = node.details.get("Join condition", "None").strip()
        conditions = keys + ([condition] if condition not in ("None", "") else [])
        for text in conditions:
            self.depends(text, "JOIN", dataset)
        left = children[0] if children else []
        right = children[1] if len(children) > 1 else []
        join_type = node.details.get("Join type", "Inner").strip()
        if join_type.startswith(("LeftSemi", "LeftAnti")):
            return left
        if join_type.startswith("ExistenceJoin"):
            exists = parse_attribute(join_type.removeprefix("ExistenceJoin(").rstrip(")"))
            if exists is None:
                return left
            for text in conditions:
                for child, _ in references(text).references:
                    self._edge(exists.expr_id, child, TRANSFORMATION)
            return [*left, exists]
        return [*left, *right]

    def _union(self, children: list[list[Attribute]]) -> list[Attribute]:
        """Union's attributes are its first child's; the others add to them by position."""
        if not children:
            return []
        for other in children[1:]:
            for mine, theirs in zip(children[0], other, strict=False):
                self._edge(mine.expr_id, theirs.expr_id, IDENTITY)
        return children[0]

    def _reused_exchange(self, node: PlanNode) -> list[Attribute]:
        attrs = attributes(node.detail_list("Output"))
        match = _REUSED.search(node.name)
        if match is None:
            self.unrecognized.append(node.name)
            self.partial.update(a.expr_id for a in attrs)
        else:  # resolved after the walk: the reused exchange may come later in the text
            self._reused.append((attrs, int(match[1])))
        return attrs

    def unrecognized_node(
        self, node: PlanNode, first: list[Attribute], *, note: bool = True
    ) -> list[Attribute]:
        """Pass the child's attributes on; those the operator makes have no lineage."""
        if note:
            self.unrecognized.append(node.name)
        attrs = [] if not note else attributes(node.detail_list("Output"))
        if not attrs:
            return first
        known = {a.expr_id for a in first}
        self.partial.update(a.expr_id for a in attrs if a.expr_id not in known)
        return attrs

    def depends(self, text: str | None, subtype: str, dataset: list[tuple[int, str]]) -> None:
        if text:
            dataset.extend((attr, subtype) for attr, _ in references(text).references)

    def _edge(self, attr: int, child: int, how: Transformation) -> None:
        if attr != child:
            self.edges.setdefault(attr, []).append((child, how))


def _logical(node: PlanNode) -> bool:
    """A node of a logical plan, as a save command's query prints (`Project` with
    `Arguments: [...]`, no `Output` or `Input`)."""
    return "Arguments" in node.details and not ({"Output", "Input"} & node.details.keys())


def written_attributes(graph: AttributeGraph, write: PlanNode) -> list[Attribute]:
    """What a write command writes: the attributes its child produces."""
    outputs = [graph.output(child) for child in write.children]
    return outputs[0] if outputs else []
