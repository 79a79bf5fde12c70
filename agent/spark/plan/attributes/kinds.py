"""Which Spark operators do what, by name, for the attribute walk of `operators`; and the
phases of one aggregation (partial, merge, final), which only the final one's keys group by."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from agent.spark.plan.syntax.schema import split_top
from agent.spark.plan.syntax.text import PlanNode, PlanText, bracketed

PASS_THROUGH: Final = frozenset(
    {
        "AdaptiveSparkPlan", "AQEShuffleRead", "BroadcastExchange", "BroadcastQueryStage",
        "CoalesceExec", "Coalesce", "CollectLimit", "CollectMetrics", "CollectTail",
        "ColumnarToRow", "DeserializeToObject", "Exchange", "GlobalLimit", "InputAdapter",
        "LocalLimit", "ResultQueryStage", "RowToColumnar", "Sample", "ShuffleQueryStage",
        "Subquery", "SubqueryBroadcast", "SubqueryAdaptiveBroadcast", "TableCacheQueryStage",
        "WholeStageCodegen", "WriteFiles", "ReusedSubquery",
        # writes: their child's attributes are what they write
        "AppendData", "AppendDataExecV1", "OverwriteByExpression", "OverwriteByExpressionExecV1",
        "OverwritePartitionsDynamic", "ReplaceData", "WriteDelta", "InsertIntoHiveTable",
        "SaveIntoDataSourceCommand",
        # streaming state and watermarks: rows kept or dropped, columns unchanged
        "EventTimeWatermark", "StateStoreRestore", "StateStoreSave", "StreamingDeduplicate",
        "SessionWindowStateStoreRestore", "SessionWindowStateStoreSave",
    }
)  # fmt: skip
AGGREGATES: Final = frozenset(
    {"HashAggregate", "ObjectHashAggregate", "SortAggregate", "MergingSessionAggregate"}
)
#: What Spark puts between the phases of one aggregation.
_BETWEEN_PHASES: Final = frozenset(
    {"Exchange", "ShuffleQueryStage", "AQEShuffleRead", "InputAdapter", "WholeStageCodegen", "Sort"}
)
KEYED_JOINS: Final = frozenset({"BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin"})
OTHER_JOINS: Final = frozenset({"BroadcastNestedLoopJoin", "CartesianProduct"})
PYTHON_EVAL: Final = frozenset({"BatchEvalPython", "ArrowEvalPython"})
#: Python UDTF evaluation (`LATERAL udtf(...)`, `udtf(...)` in FROM): a generator node.
PYTHON_UDTF: Final = frozenset({"BatchEvalPythonUDTF", "ArrowEvalPythonUDTF"})
#: Leaves that read no dataset: their attributes are known to come from no input field.
#: A relation in a logical plan (the query of a `SaveIntoDataSourceCommand`).
LOGICAL_RELATION: Final = "LogicalRelation"
LOCAL_LEAVES: Final = (
    "LocalTableScan",
    "Range",
    "Scan ExistingRDD",
    "Scan OneRowRelation",
    "Scan ExternalRDD",
    "Scan RDD",
)


def aggregate_phase(functions: Sequence[str]) -> bool:
    """Whether an aggregate's functions are those of a partial or merge phase."""
    return any(f.startswith(("partial_", "merge_")) for f in functions)


def distinct_phases(plan: PlanText) -> set[int]:
    """Operator ids of the aggregates without functions that Spark plans below a distinct
    aggregate (`partial_count(distinct age#11)`): they group by the final keys plus the
    distinct columns (`countDistinct` alone: keys city, age; no functions)."""
    found: set[int] = set()
    roots = [plan.root, *(s.root for s in plan.subqueries), *plan.initial]
    for node in (n for root in roots for n in nodes(root)):
        functions = node.detail_list("Functions") or []
        if node.name.split(" ", 1)[0] not in AGGREGATES:
            continue
        if not any(f.startswith("partial_") and "(distinct " in f for f in functions):
            continue
        stack = list(node.children)
        while stack:
            child = stack.pop()
            head = child.name.split(" ", 1)[0]
            if head in AGGREGATES:
                below = child.detail_list("Functions") or []
                if below and not aggregate_phase(below):
                    continue  # a final aggregate: another grouping, not a phase of this one
                if not below:
                    found.add(child.op_id)
            elif head not in _BETWEEN_PHASES:
                continue
            stack.extend(child.children)
    return found


def nodes(root: PlanNode | None) -> Iterator[PlanNode]:
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def relation_columns(node: PlanNode) -> list[str] | None:
    """The column list of a `LogicalRelation` printed as a logical plan (`json, [a#1, b#2],
    false`; `JDBCRelation(t) [numPartitions=1], [a#1]`): the first argument that is a list,
    not one that merely holds brackets (`KafkaRelation(strategy=Subscribe[t], …)`)."""
    tokens = (t.strip() for t in split_top(node.details.get("Arguments", "")))
    return next((bracketed(t) for t in tokens if t.startswith("[")), None)
