"""Read the `physicalPlanDescription` of a SQL execution: Spark's `explain formatted` text.

The text has a tree of operators, each tagged with an operator id, then one detail block per
operator, then the same again for every subquery::

    == Physical Plan ==
    AdaptiveSparkPlan (9)
    +- == Final Plan ==
       Execute InsertIntoHadoopFsRelationCommand (8)
       +- WriteFiles (7)
          +- * Project (6)
             :- ...
    +- == Initial Plan ==
       ...

    (6) Project [codegen id : 1]
    Output [2]: [id#0L, (id#0L % 10) AS k#1L]
    Input [1]: [id#0L]

    ===== Subqueries =====

    Subquery:1 Hosting operator id = 6 Hosting Expression = Subquery subquery#5, [id=#12]
    * HashAggregate (12)
    ...

`parse_plan` turns it into `PlanNode` trees whose nodes carry their detail blocks. Under an
`AdaptiveSparkPlan` the node keeps the final (else the current) plan as its children; the
initial plan is kept apart in `PlanText.initial`, because AQE re-plans keep attribute ids and
some operators of the final plan (a reused exchange, a final aggregate) still name attributes
that only the initial plan defines. Attributes are printed `name#id` with `L` for longs
(`k#4L`); expression ids are unique within an execution, which is what lineage follows.

Nothing here raises on unexpected text: lines that fit no shape are skipped, and a plan
without operator ids (another `spark.sql.ui.explainMode`) gives an empty `PlanText`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from agent.spark.plan.schema import split_top

_ATTRIBUTE = re.compile(r"^(?P<name>.+)#(?P<id>\d+)(?P<long>L)?$", re.DOTALL)
_HEADER = re.compile(r"^\((?P<id>\d+)\) (?P<name>.*?)(?: \[codegen id : \d+\])?$")
_DETAIL = re.compile(r"^(?P<key>[A-Z][A-Za-z ]*?)\s*(?:\[(?P<count>\d+)\])?\s*: ?(?P<value>.*)$")
_TREE_MARKER = re.compile(r"^[ :]*?[+:]- ")  # `   :  +- ` before a child operator
_TREE_NODE = re.compile(r"^(?:\* )?(?P<name>.+?) \((?P<id>\d+)\)(?:,.*)?$")
_TREE_SECTION = re.compile(r"^== (?P<section>.+) ==$")
_SUBQUERY = re.compile(r"^Subquery:\d+ Hosting operator id = (?P<host>\d+) Hosting Expression = ")
#: The plan section of an adaptive plan that ran, best first.
_SECTIONS: Final = ("Final Plan", "Current Plan")


@dataclass(frozen=True, slots=True)
class Attribute:
    """A plan attribute such as ``k#4L``: name, expression id, whether Spark marked it long."""

    name: str
    expr_id: int
    is_long: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    """The detail block of one operator: ``(6) Project`` and its ``Key: value`` lines."""

    name: str
    details: Mapping[str, str]
    op_id: int = -1
    counts: Mapping[str, int] = field(default_factory=dict)  # `Output [2]` -> 2


@dataclass(slots=True)
class PlanNode:
    """One operator of the tree: its id, the name its block gives, details, children."""

    op_id: int
    name: str
    details: Mapping[str, str]
    children: list[PlanNode] = field(default_factory=list)
    section: str | None = None  # a `== Final Plan ==` line rather than an operator
    counts: Mapping[str, int] = field(default_factory=dict)  # `Output [2]` -> 2

    def detail_list(self, key: str) -> list[str] | None:
        """A bracketed detail (`Output [2]: [a#1, b#2]`) split into items; None if absent."""
        return bracketed(self.details.get(key))

    def unsplittable(self) -> list[str]:
        """Details whose items do not split into the count Spark printed: a string literal
        with brackets or quotes in it (Spark prints literals unquoted)."""
        return [
            key
            for key, count in self.counts.items()
            if len(bracketed(self.details.get(key)) or ()) != count
        ]


@dataclass(frozen=True, slots=True)
class Subquery:
    """A subquery: the operator hosting it, the expression naming it, and its plan."""

    host: int
    expression: str
    root: PlanNode | None  # None for a reused subquery


@dataclass(frozen=True, slots=True)
class PlanText:
    root: PlanNode | None
    subqueries: tuple[Subquery, ...] = ()
    #: the initial plans of adaptive operators; their attributes keep their ids
    initial: tuple[PlanNode, ...] = ()


def parse_attribute(text: str) -> Attribute | None:
    """``k#4L`` -> Attribute('k', 4, True); ``a + 1 AS b#7`` -> Attribute('b', 7)."""
    text = text.strip().rpartition(" AS ")[2]
    match = _ATTRIBUTE.match(text)
    if match is None:
        return None
    return Attribute(match["name"], int(match["id"]), match["long"] is not None)


def bracketed(value: str | None) -> list[str] | None:
    """`[a#1, f(b#2, 3) AS c#4]` -> its top-level items; None unless it is one list."""
    value = (value or "").strip()
    if not (value.startswith("[") and value.endswith("]")):
        return None
    return [item.strip() for item in split_top(value[1:-1]) if item.strip()]


def parse_description(text: str) -> list[Block]:
    """Split `explain formatted` text into its `(N) Node` detail blocks, in order."""
    blocks: list[Block] = []
    name: str | None = None
    op_id = -1
    details: dict[str, str] = {}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            if name is not None:
                blocks.append(Block(name, details, op_id, counts))
            name, op_id, details, counts = header["name"].strip(), int(header["id"]), {}, {}
            continue
        if name is None:
            continue
        detail = _DETAIL.match(line)
        if detail is None and line.strip() and "" not in details:
            details[""] = line.strip()  # a line without a key: a V2 scan's description
        if detail and detail["key"].strip() not in details:
            details[detail["key"].strip()] = detail["value"]
            if detail["count"] is not None:
                counts[detail["key"].strip()] = int(detail["count"])
    if name is not None:
        blocks.append(Block(name, details, op_id, counts))
    return blocks


def block_detail(blocks: Sequence[Block], name: str, key: str) -> str | None:
    """A detail of the first block of operator `name` that has it."""
    for block in blocks:
        if block.name == name and key in block.details:
            return block.details[key]
    return None


def block_list(blocks: Sequence[Block], name: str, key: str) -> list[str]:
    """A bracketed detail of the first block of operator `name`, split; [] if absent."""
    return bracketed(block_detail(blocks, name, key)) or []


def parse_plan(text: str) -> PlanText:
    """The operator trees of a plan description, with their detail blocks attached."""
    blocks = {b.op_id: b for b in parse_description(text)}
    trees: list[tuple[str | None, list[str]]] = []  # (hosting line, tree lines)
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("== Physical Plan =="):
            current = []
            trees.append((None, current))
        elif _SUBQUERY.match(line):
            current = []
            trees.append((line, current))
        elif not line.strip() or _HEADER.match(line):
            current = None  # a tree ends at the first blank line
        elif current is not None:
            current.append(line)
    root: PlanNode | None = None
    subqueries: list[Subquery] = []
    initial: list[PlanNode] = []
    for hosting, lines in trees:
        tree = _build_tree(lines, blocks, initial)
        if hosting is None:
            root = root or tree
            continue
        match = _SUBQUERY.match(hosting)
        assert match is not None
        subqueries.append(Subquery(int(match["host"]), hosting[match.end() :], tree))
    return PlanText(root, tuple(subqueries), tuple(initial))


def _build_tree(
    lines: Sequence[str], blocks: Mapping[int, Block], initial: list[PlanNode]
) -> PlanNode | None:
    """Nest tree lines by their columns: a line's parent is the nearest line above it whose
    text starts at or left of where this line's `+-` / `:-` marker (or text) starts."""
    stack: list[tuple[int, PlanNode]] = []  # (text column, node)
    top: PlanNode | None = None
    for line in lines:
        marker = _TREE_MARKER.match(line)
        text_column = marker.end() if marker else len(line) - len(line.lstrip(" :"))
        start = text_column - 3 if marker else text_column
        content = line[text_column:]
        section = _TREE_SECTION.match(content)
        match = section or _TREE_NODE.match(content)
        if match is None:
            continue
        if section is not None:
            node = PlanNode(-1, section["section"], {}, section=section["section"])
        else:
            op_id = int(match["id"])
            block = blocks.get(op_id)
            name = block.name if block else match["name"].strip()
            node = PlanNode(op_id, name, block.details if block else {})
            node.counts = block.counts if block else {}
        while stack and stack[-1][0] > start:
            stack.pop()
        if stack:
            stack[-1][1].children.append(node)
        elif top is None:
            top = node
        else:
            continue  # a second root: not a tree this reader knows
        stack.append((text_column, node))
    if top is not None:
        _choose_sections(top, initial)
    return top


def _choose_sections(root: PlanNode, initial: list[PlanNode]) -> None:
    """Replace `== X Plan ==` children by the plan that ran; keep the initial plan apart."""
    todo = [root]
    while todo:
        node = todo.pop()
        sections = [c for c in node.children if c.section is not None]
        if sections:
            chosen = next(
                (s for wanted in _SECTIONS for s in sections if s.section == wanted),
                sections[0],
            )
            initial.extend(c for s in sections if s is not chosen for c in s.children)
            node.children = [c for c in node.children if c.section is None] + chosen.children
            todo.extend(c for s in sections if s is not chosen for c in s.children)
        todo.extend(node.children)
