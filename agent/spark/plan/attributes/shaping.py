"""Operators that reshape rows without reading a dataset: windows, sorts and limits,
`Expand`, `Generate`, Python UDF and UDTF evaluation and Iceberg's `MergeRows`.

Each handler receives the walk (`operators.AttributeGraph`, seen through the `Walk`
Protocol), the operator, its first child's attributes and the dataset-level dependencies
of its tree, and returns the attributes the operator produces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

from agent import linear
from agent.spark.plan.attributes.kinds import PYTHON_EVAL, PYTHON_UDTF
from agent.spark.plan.syntax.schema import split_top
from agent.spark.plan.syntax.text import Attribute, PlanNode, bracketed, parse_attribute

#: The result id a Python UDF call ends with (`udf(a#1)#3L`).
_RESULT_ID = linear.compile(r"#\d+L?$")


class Walk(Protocol):
    """What a handler may ask of the attribute walk."""

    defined: set[int]
    generated: dict[int, tuple[str, int]]

    def project(self, items: Sequence[str]) -> list[Attribute]:
        """Define each output item; return the attributes they name."""
        ...

    def define(self, item: str, *, generated: bool = False) -> Attribute | None:
        """Record where one `expr AS name#id` item comes from."""
        ...

    def depends(self, text: str | None, subtype: str, dataset: list[tuple[int, str]]) -> None:
        """Add the attributes `text` references as INDIRECT `subtype` dependencies."""
        ...

    def unrecognized_node(
        self, node: PlanNode, first: list[Attribute], *, note: bool = True
    ) -> list[Attribute]:
        """Pass the child's attributes on; those the operator makes have no lineage."""
        ...


Handler = Callable[[Walk, PlanNode, list[Attribute], list[tuple[int, str]]], list[Attribute]]


def window(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    arguments = split_top(node.details.get("Arguments", ""))
    windows = bracketed(arguments[0]) if arguments else None
    return [*first, *graph.project(windows or [])]


def window_group_limit(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """The rank filter pushed below a window: it drops rows by partition and order."""
    for argument in split_top(node.details.get("Arguments", ""))[:2]:
        for item in bracketed(argument) or []:
            graph.depends(item, "FILTER", dataset)
    return first


def sort(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    arguments = [a.strip() for a in split_top(node.details.get("Arguments", ""))]
    if len(arguments) > 1 and arguments[1] == "true":  # global: the output is ordered
        for order in bracketed(arguments[0]) or []:
            graph.depends(order, "SORT", dataset)
    return first


def take_ordered(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    lists = [b for a in split_top(node.details.get("Arguments", "")) if (b := bracketed(a))]
    if not lists:
        return graph.unrecognized_node(node, first)
    for order in lists[0]:
        graph.depends(order, "SORT", dataset)
    return graph.project(lists[1]) if len(lists) > 1 else first


def expand(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """`[[projection], ...], [output]`: each output takes its position in every
    projection (grouping sets null out what a set does not group by)."""
    arguments = split_top(node.details.get("Arguments", ""))
    if len(arguments) < 2:
        return graph.unrecognized_node(node, first)
    projections = [bracketed(p) or [] for p in bracketed(arguments[0]) or []]
    out = attributes(bracketed(arguments[-1]))
    for position, attr in enumerate(out):
        graph.defined.add(attr.expr_id)
        for projection in projections:
            if position < len(projection):
                graph.define(f"{projection[position]} AS {attr.name}#{attr.expr_id}")
    return out


def generate(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """`generator(expr), [kept attributes], outer, [generated attributes]`; Spark leaves an
    empty list of kept attributes out (`explode(split(text#1,  , -1)), false, [word#2]`)."""
    arguments = split_top(node.details.get("Arguments", ""))
    if len(arguments) not in (3, 4) or arguments[-2].strip() not in ("true", "false"):
        return graph.unrecognized_node(node, first)
    kept = attributes(bracketed(arguments[1])) if len(arguments) == 4 else []
    generated = attributes(bracketed(arguments[-1]))
    for position, attr in enumerate(generated):
        graph.generated[attr.expr_id] = (arguments[0].strip(), position)
        graph.define(f"{arguments[0].strip()} AS {attr.name}#{attr.expr_id}", generated=True)
    return [*kept, *generated]


def python(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """`[udf(a#1)#3L, ...], [pythonUDF0#5L, ...]`: a UDF call prints its result id last."""
    arguments = split_top(node.details.get("Arguments", ""))
    calls = bracketed(arguments[0]) if arguments else None
    results = attributes(bracketed(arguments[1])) if len(arguments) > 1 else []
    if calls is None or len(calls) != len(results):
        return graph.unrecognized_node(node, first)
    for call, attr in zip(calls, results, strict=True):
        body = _RESULT_ID.sub("", call.strip())
        graph.define(f"{body} AS {attr.name}#{attr.expr_id}", generated=True)
    return [*first, *results]


def python_udtf(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """A Python UDTF: `udtf(a#1)#3, [kept attributes], [result attributes]`; every result
    is made from every argument of the call (the function is opaque)."""
    arguments = split_top(node.details.get("Arguments", ""))
    if len(arguments) != 3:
        return graph.unrecognized_node(node, first)
    kept = attributes(bracketed(arguments[1]))
    results = attributes(bracketed(arguments[2]))
    if not results:
        return graph.unrecognized_node(node, first)
    body = _RESULT_ID.sub("", arguments[0].strip())
    for attr in results:
        graph.define(f"{body} AS {attr.name}#{attr.expr_id}", generated=True)
    return [*kept, *results]


def merge_rows(
    graph: Walk, node: PlanNode, first: list[Attribute], dataset: list[tuple[int, str]]
) -> list[Attribute]:
    """Iceberg's MERGE (`MergeRowsExec`): `<source present>, <target present>, [matched],
    [not matched], [not matched by source], <check>, [output]`. Each instruction
    `keep(<kind>, <condition>, <operation>, <value>, ...)` gives the output attributes their
    values by position (the operation is the first output, `__row_operation`);
    `split(<condition>, <deleted row>, <inserted row>)` (merge-on-read) gives two; `discard`,
    `keep` and `split` conditions decide which rows are written."""
    arguments = split_top(node.details.get("Arguments", ""))
    out = attributes(bracketed(arguments[-1])) if arguments else []
    if len(arguments) < 6 or not out:
        return graph.unrecognized_node(node, first)
    for clauses in arguments[2:5]:
        for instruction in bracketed(clauses) or []:
            kind, _, body = instruction.strip().partition("(")
            values = split_top(body.removesuffix(")"))
            if kind == "discard":
                graph.depends(body.removesuffix(")"), "FILTER", dataset)
                continue
            # keep(<kind>, <condition>, <row>): split(<condition>, <row>, <row>), the
            # merge-on-read update as a deleted and an inserted row
            rows = [values[2:]] if kind == "keep" else []
            if kind == "split":
                rows = [values[1 : 1 + len(out)], values[1 + len(out) :]]
            condition = values[1 if kind == "keep" else 0] if len(values) > 1 else "true"
            if rows and condition.strip() != "true":
                graph.depends(condition, "CONDITIONAL", dataset)
            for row in rows:
                for attr, value in zip(out, row, strict=False):
                    graph.define(f"{value.strip()} AS {attr.name}#{attr.expr_id}")
    return out


HANDLERS: Final[dict[str, Handler]] = {
    "MergeRows": merge_rows,
    "Window": window,
    "WindowGroupLimit": window_group_limit,
    "Sort": sort,
    "TakeOrderedAndProject": take_ordered,
    "Expand": expand,
    "Generate": generate,
    **dict.fromkeys(PYTHON_EVAL, python),
    **dict.fromkeys(PYTHON_UDTF, python_udtf),
}


def attributes(items: Sequence[str] | None) -> list[Attribute]:
    """The attributes among `items`, unparseable items skipped."""
    return [a for a in map(parse_attribute, items or ()) if a is not None]
