"""How each Spark operator defines its attributes: the walk behind column lineage.

`AttributeGraph(plan)` walks every operator of a `text.PlanText` once, children before
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
logical `Project`, `Filter` and `Aggregate` a save command's query prints, the
hash, sort-merge, nested-loop and cartesian joins, `Union`, `Window`, `WindowGroupLimit`,
`Expand`, `Generate`, `Sort` (only a global sort is a SORT dependency: local sorts serve
joins, windows and partitioned writes), limits,
`TakeOrderedAndProject`, Python UDF evaluation (the row-shaping operators live in `shaping`,
the scans in `leaves`),
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

from collections.abc import Sequence

from agent import linear
from agent.spark.plan.attributes.kinds import (
    AGGREGATES,
    KEYED_JOINS,
    LOCAL_LEAVES,
    LOGICAL_RELATION,
    OTHER_JOINS,
    PASS_THROUGH,
    aggregate_phase,
    distinct_phases,
    nodes,
)
from agent.spark.plan.attributes.leaves import DATASET_SCANS, Source, dataset_scan, logical_relation
from agent.spark.plan.attributes.shaping import HANDLERS, attributes
from agent.spark.plan.syntax.expressions import (
    IDENTITY,
    TRANSFORMATION,
    Transformation,
    indirect,
    references,
)
from agent.spark.plan.syntax.schema import split_top
from agent.spark.plan.syntax.text import Attribute, PlanNode, PlanText, bracketed, parse_attribute

_REUSED = linear.compile(r"\[Reuses operator id: (\d+)\]")


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
        self.unread = 0  # attributes made up for columns only a pushed filter tests
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
        if name.startswith(DATASET_SCANS):
            return dataset_scan(self, node, dataset)
        if name == LOGICAL_RELATION:
            return logical_relation(self, node)
        logical = _logical(node)
        if head == "Project":
            return self.project(node.detail_list("Arguments" if logical else "Output") or [])
        if head == "Filter":
            condition = node.details.get("Arguments" if logical else "Condition")
            self.depends(condition, "FILTER", dataset)
            return first
        if head in AGGREGATES:
            return self._aggregate(node, dataset)
        if head == "Aggregate" and logical:
            return self._logical_aggregate(node, first, dataset)
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

    def _logical_aggregate(
        self, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
    ) -> list[Attribute]:
        """`Aggregate` of a logical plan (a save's query): `Arguments: [keys], [results]`,
        each result an aggregate function, a key, or an expression of them."""
        lists = [bracketed(t.strip()) for t in split_top(node.details.get("Arguments", ""))]
        if len(lists) != 2 or lists[0] is None or lists[1] is None:
            return self.unrecognized_node(node, first)
        for key in lists[0]:
            self.depends(key, "GROUP_BY", dataset)
        return self.project(lists[1])

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
