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
without operator ids (another `spark.sql.ui.explainMode`) gives an empty `PlanText`. The
text is untrusted and every line is read, so the shapes are read by hand-written scanners,
each a few passes of `str` methods over its line: linear in the text, and cheaper per line
than a call into RE2 (`agent.linear`).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from agent.spark.plan.syntax.schema import split_top

#: The plan section of an adaptive plan that ran, best first.
_SECTIONS: Final = ("Final Plan", "Current Plan")
_CODEGEN: Final = " [codegen id : "
_HOSTING: Final = " Hosting operator id = "
_HOSTED: Final = " Hosting Expression = "
_KEY_START: Final = frozenset(string.ascii_uppercase)
_KEY_CHARS: Final = string.ascii_letters + " "


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
    """``k#4L`` -> Attribute('k', 4, True); ``a + 1 AS b#7`` -> Attribute('b', 7); an
    event-time column below a watermark (``ts#17-T300000ms``) is its attribute."""
    text = text.strip().rpartition(" AS ")[2]
    name, sep, tail = text.rpartition("#")
    tail = without_delay(tail)
    is_long = tail.endswith("L")
    number = tail[:-1] if is_long else tail
    if not (sep and name and is_number(number)):
        return None
    return Attribute(name, int(number), is_long)


def without_delay(tail: str) -> str:
    """The id part of an attribute that `EventTimeWatermark` marked with its delay
    (``17-T300000ms`` -> ``17``): the same attribute, read after the watermark."""
    number, sep, delay = tail.partition("-T")
    return number if sep and delay.endswith("ms") and delay[:-2].isdigit() else tail


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
        header = _header(line)
        if header:
            if name is not None:
                blocks.append(Block(name, details, op_id, counts))
            op_id, name, details, counts = header[0], header[1].strip(), {}, {}
            continue
        if name is None:
            continue
        detail = _detail(line)
        if detail is None and line.strip() and "" not in details:
            details[""] = line.strip()  # a line without a key: a V2 scan's description
        if detail and detail[0] not in details:
            key, count, details[key] = detail
            if count is not None:
                counts[key] = count
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
        elif _hosting(line):
            current = []
            trees.append((line, current))
        elif not line.strip() or _header(line):
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
        host = _hosting(hosting)
        assert host is not None
        subqueries.append(Subquery(host[0], hosting[host[1] :], tree))
    return PlanText(root, tuple(subqueries), tuple(initial))


def _build_tree(
    lines: Sequence[str], blocks: Mapping[int, Block], initial: list[PlanNode]
) -> PlanNode | None:
    """Nest tree lines by their columns: a line's parent is the nearest line above it whose
    text starts at or left of where this line's `+-` / `:-` marker (or text) starts."""
    stack: list[tuple[int, PlanNode]] = []  # (text column, node)
    top: PlanNode | None = None
    for line in lines:
        start, text_column = _tree_columns(line)
        content = line[text_column:]
        section = _tree_section(content)
        operator = None if section is not None else _tree_node(content)
        if section is not None:
            node = PlanNode(-1, section, {}, section=section)
        elif operator is not None:
            op_id = operator[1]
            block = blocks.get(op_id)
            name = block.name if block else operator[0].strip()
            node = PlanNode(op_id, name, block.details if block else {})
            node.counts = block.counts if block else {}
        else:
            continue
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


# -- the shapes of lines, each read by hand in linear time -----------------------------------


def _header(line: str) -> tuple[int, str] | None:
    """`(6) Project [codegen id : 1]` -> (6, 'Project'); None for another line."""
    if not line.startswith("("):
        return None
    number, sep, name = line[1:].partition(") ")
    if not (sep and is_number(number)):
        return None
    head, codegen, tail = name.rpartition(_CODEGEN)
    if codegen and tail.endswith("]") and is_number(tail[:-1]):
        name = head
    return int(number), name


def _detail(line: str) -> tuple[str, int | None, str] | None:
    """`Output [2]: [a#1, b#2]` -> ('Output', 2, '[a#1, b#2]'): a key of letters and spaces
    that starts with a capital, an optional count, a colon; None for another line."""
    if not line or line[0] not in _KEY_START:
        return None
    letters = len(line) - len(line.lstrip(_KEY_CHARS))  # the key and the spaces after it
    key = line[:letters].rstrip(" ")
    rest = line[len(key) :].lstrip()
    count = None
    if rest.startswith("["):
        number, sep, after = rest[1:].partition("]")
        if not (sep and is_number(number)):
            return None
        count, rest = int(number), after.lstrip()
    if not rest.startswith(":"):
        return None
    return key, count, rest[2:] if rest.startswith(": ") else rest[1:]


def _tree_columns(line: str) -> tuple[int, int]:
    """Where a tree line's `+-` / `:-` marker (else its text) starts, and where its text
    starts: the marker follows the `   :  ` that draws the branches to its left."""
    drawn = len(line) - len(line.lstrip(" :"))
    if line.startswith("+- ", drawn):
        return drawn, drawn + 3
    if drawn and line[drawn - 1] == ":" and line.startswith("- ", drawn):
        return drawn - 1, drawn + 2
    return drawn, drawn


def _tree_section(content: str) -> str | None:
    """`== Final Plan ==` -> 'Final Plan'; None for another text."""
    if len(content) > 6 and content.startswith("== ") and content.endswith(" =="):
        return content[3:-3]
    return None


def _tree_node(content: str) -> tuple[str, int] | None:
    """`* Project (6)` or `Exchange (4), ...` -> ('Project', 6): the name up to the first
    ` (N)` that ends the text or precedes a comma; None for another text."""
    for start in (2, 0) if content.startswith("* ") else (0,):
        at = content.find(" (", start + 1)
        while at != -1:
            end = digits_end(content, at + 2)
            closed = end > at + 2 and content.startswith(")", end)
            if closed and (end + 1 == len(content) or content[end + 1] == ","):
                return content[start:at], int(content[at + 2 : end])
            at = content.find(" (", at + 1)
    return None


def _hosting(line: str) -> tuple[int, int] | None:
    """`Subquery:1 Hosting operator id = 6 Hosting Expression = ...` -> (6, where the
    expression starts); None for another line."""
    if not line.startswith("Subquery:"):
        return None
    host = digits_end(line, 9)
    if host == 9 or not line.startswith(_HOSTING, host):
        return None
    host += len(_HOSTING)
    end = digits_end(line, host)
    if end == host or not line.startswith(_HOSTED, end):
        return None
    return int(line[host:end]), end + len(_HOSTED)


def is_number(text: str) -> bool:
    """One or more ASCII digits (Spark prints its ids, expression ids and counts so)."""
    return text.isascii() and text.isdigit()


def digits_end(text: str, start: int) -> int:
    """Where the run of ASCII digits at `start` ends (`start` when there is none)."""
    end = start
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    return end
