"""The side-by-side harness's pure parts on hand-written event pairs: pairing, comparison,
classification and the summary (no Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.peer import compare, report
from tests.peer.classify import CLASSES, classify
from tests.peer.cost import ARMS, order
from tests.peer.sidebyside import Outputs

APP = "peer_x"
APP_RUN = "00000000-0000-7000-8000-000000000001"


def dataset(
    name: str, fields: Sequence[str] = (), lineage: dict[str, Any] | None = None
) -> dict[str, Any]:
    facets: dict[str, Any] = {"schema": {"fields": [{"name": f, "type": "long"} for f in fields]}}
    if lineage is not None:
        facets["columnLineage"] = lineage
    return {"namespace": "file", "name": name, "facets": facets}


def event(
    kind: str,
    job: str,
    run: str,
    second: int,
    inputs: Sequence[Any] = (),
    outputs: Sequence[Any] = (),
    job_type: str = "SQL_JOB",
) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    if job_type != "APPLICATION":
        facets["parent"] = {"run": {"runId": APP_RUN}, "job": {"namespace": "spark", "name": APP}}
    return {
        "eventType": kind,
        "eventTime": f"2026-01-01T00:00:{second:02d}.000Z",
        "run": {"runId": run, "facets": facets},
        "job": {"namespace": "spark", "name": job, "facets": {"jobType": {"jobType": job_type}}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def app(kind: str, second: int) -> dict[str, Any]:
    return event(kind, APP, APP_RUN, second, job_type="APPLICATION")


def direct(field: str) -> dict[str, Any]:
    transformation = {"type": "DIRECT", "subtype": "IDENTITY"}
    return {
        "inputFields": [
            {
                "namespace": "file",
                "name": "/in",
                "field": field,
                "transformations": [transformation],
            }
        ]
    }


def agent_events() -> list[dict[str, Any]]:
    out = dataset("/out", ["id"], {"fields": {"id": direct("id")}})
    return [
        app("START", 0),
        event("START", f"{APP}.ctas.default_t", "a1", 1, [dataset("/in", ["id"])], [out]),
        event("FAIL", f"{APP}.ctas.default_t", "a1", 5, [dataset("/in", ["id"])], [out]),
        app("FAIL", 9),
    ]


def listener_events() -> list[dict[str, Any]]:
    out = dataset("/out", ["id"], {"fields": {"id": direct("id")}})
    source = dataset("/in", ["id", "name"])
    return [
        app("START", 0),
        event("START", f"{APP}.ctas.x_t", "l1", 1, [source], [out]),
        event("START", f"{APP}.insert.x_t", "l2", 2, [source], [out]),
        event("COMPLETE", f"{APP}.insert.x_t", "l2", 4, [source], [out]),
        event("RUNNING", f"{APP}.ctas.x_t", "l1", 4, [source], [out]),
        event("COMPLETE", f"{APP}.ctas.x_t", "l1", 5, [source], [out]),
        event("START", f"{APP}.map_partitions_parallel_collection", "l3", 0, [source]),
        app("COMPLETE", 9),
    ]


def test_pairs_by_shared_output_before_name_and_leaves_the_rest_alone() -> None:
    """The agent's run pairs with the listener's root run (shared output, started together),
    not its nested insert; the nested and the internal run stay unpaired."""
    _, mine = compare.split(agent_events())
    _, theirs = compare.split(listener_events())
    pairs = compare.pair(mine, theirs)
    assert [(a and a.run_id, b and b.run_id) for a, b in pairs] == [
        ("a1", "l1"),
        (None, "l2"),
        (None, "l3"),
    ]
    assert compare.nested_in(theirs[1], mine) == f"{APP}.ctas.default_t"
    assert compare.nested_in(theirs[2], mine) is None


def test_differences_are_found_and_each_is_classified() -> None:
    """Schema, terminal, event counts, job name and extra runs differ; every difference
    lands in the class that explains it."""
    result = compare.compare_app("x", agent_events(), listener_events())
    context = {"x": {"error": "ArithmeticException: [DIVIDE_BY_ZERO]"}}
    found = {}
    for difference in result["differences"]:
        known = classify(difference, context)
        found[(difference.aspect, difference.execution)] = known.id if known else None
    assert found == {
        ("job_name", f"{APP}.ctas.default_t"): "output_part_of_name",
        ("schema_fields", f"{APP}.ctas.default_t"): "pruned_input_schema",
        ("terminal", f"{APP}.ctas.default_t"): "listener_misses_failure",
        ("event_count", f"{APP}.ctas.default_t"): "terminal_counted",
        ("run_only_listener", f"{APP}.insert.x_t"): "listener_nested_run",
        ("run_only_listener", f"{APP}.map_partitions_parallel_collection"): (
            "listener_internal_job"
        ),
        ("app_terminal", APP): "caught_failure_app",
        ("app_event_count", APP): "terminal_counted",
    }
    (execution, *_) = result["executions"]
    assert execution["agree"] == {
        "job_name": False,
        "inputs": True,
        "outputs": True,
        "columns": True,
        "terminal": False,
        "events": False,
    }


def test_column_lineage_compared_edge_by_edge() -> None:
    """A DIRECT edge only one side has and a dataset-wide INDIRECT edge are both reported,
    counted by kind."""
    indirect = {
        "namespace": "file",
        "name": "/in",
        "field": "k",
        "transformations": [{"type": "INDIRECT", "subtype": "GROUP_BY"}],
    }
    mine = dataset("/out", ["id"], {"fields": {"id": direct("id")}, "dataset": [indirect]})
    theirs = dataset("/out", ["id"], {"fields": {"id": direct("other")}})
    agent = [event("START", "j", "a", 1, [], [mine]), event("COMPLETE", "j", "a", 2, [], [mine])]
    listener = [
        event("START", "j", "b", 1, [], [theirs]),
        event("COMPLETE", "j", "b", 2, [], [theirs]),
    ]
    result = compare.compare_app("x", agent, listener)
    kinds = {
        d.aspect: (d.agent["only_agent"], d.listener["only_listener"])
        for d in result["differences"]
        if d.aspect.startswith("columns")
    }
    assert kinds == {"columns_direct": (1, 1), "columns_indirect": (1, 0)}


def test_cancelled_run_ended_abort_or_fail() -> None:
    """A cancelled query: the agent's ABORT against the listener's FAIL is a choice."""
    agent = [event("START", "j", "a", 1), event("ABORT", "j", "a", 2)]
    listener = [event("START", "j", "b", 1), event("FAIL", "j", "b", 2)]
    result = compare.compare_app("x", agent, listener)
    context = {"x": {"error": "SparkException: Job 3 cancelled part of cancelled job group"}}
    (terminal,) = [d for d in result["differences"] if d.aspect == "terminal"]
    known = classify(terminal, context)
    assert known is not None
    assert (known.id, known.verdict) == ("cancel_abort_or_fail", "both_valid")


def test_unclassified_difference_counts_as_unexplained() -> None:
    """Outputs no class knows about are unexplained in the shape and in the summary."""
    agent = [event("START", "j", "a", 1, [], [dataset("/one")]), event("COMPLETE", "j", "a", 2)]
    listener = [event("START", "j", "b", 1, [], [dataset("/two")]), event("COMPLETE", "j", "b", 2)]
    outputs = Outputs(
        apps={"x": {"app_id": "local-1"}},
        listener={"x": listener},
        agent={"x": agent},
        skipped={},
        spark_seconds=0.0,
    )
    built = report.build(outputs)
    (difference,) = [d for d in built["shapes"]["x"]["differences"] if d["aspect"] == "outputs"]
    assert difference["verdict"] == "unexplained"
    assert built["summary"]["unexplained_differences"] >= 1
    assert built["summary"]["executions"] == 1
    assert built["summary"]["datasets_agree"] == 0
    assert "UNEXPLAINED" in built["shapes"]["x"]["verdict"]


def test_every_class_that_blames_the_agent_proposes_a_fix() -> None:
    """A class whose verdict makes it an agent defect says how to fix the agent."""
    ids = [known.id for known in CLASSES]
    assert len(ids) == len(set(ids))
    assert [
        k.id for k in CLASSES if k.verdict in ("listener_right", "both_wrong") and not k.fix
    ] == []


def test_cost_rounds_alternate_every_arm_in_every_block() -> None:
    """Each block of three rounds runs every arm once, in a rotating, reversing order."""
    rounds = order(8)
    assert len(rounds) == 24
    for block in range(8):
        assert sorted(rounds[block * 3 : block * 3 + 3]) == sorted(ARMS)
    firsts = {rounds[block * 3] for block in range(8)}
    assert firsts == set(ARMS)


T = "/lake/db/orders"  # a table's location, as both name it
K = "kafka://unknown"
LAKE: list[tuple[str, compare.Difference]] = [
    (
        "stream_run_per_query",
        compare.Difference(
            "stream_file_parquet",
            "peer.streaming_query.q",
            "run_only_agent",
            {"job": "peer.streaming_query.q", "inputs": ["/in"], "outputs": ["/out"]},
            None,
        ),
    ),
    (
        "stream_micro_batch_run",
        compare.Difference(
            "stream_failure",
            "peer.project",
            "run_only_listener",
            None,
            {
                "job": "peer.project",
                "terminal": "COMPLETE",
                "inputs": ["/in/part-0.json"],
                "outputs": [],
                "nested_in": None,
            },
        ),
    ),
    (
        "iceberg_ctas_append",
        compare.Difference(
            "iceberg_hadoop",
            "peer.append_data.lake_db_tags",
            "run_only_listener",
            None,
            {
                "job": "peer.append_data.lake_db_tags",
                "terminal": "COMPLETE",
                "inputs": [],
                "outputs": [T],
                "nested_in": None,
            },
        ),
    ),
    (
        "listener_schema_inference_run",
        compare.Difference(
            "csv",
            "peer.collect_limit",
            "run_only_listener",
            None,
            {
                "job": "peer.collect_limit",
                "terminal": "COMPLETE",
                "inputs": ["/in/people.csv"],
                "outputs": [],
                "nested_in": None,
            },
        ),
    ),
    (
        "stream_query_name",
        compare.Difference(
            "stream_kafka_delta",
            "peer.streaming_query.q",
            "job_name",
            "peer.streaming_query.q",
            "peer.execute_merge_into_command",
        ),
    ),
    (
        "iceberg_replace_data_name",
        compare.Difference(
            "iceberg_jdbc",
            "peer.update_table.db_orders",
            "job_name",
            "peer.update_table.db_orders",
            "peer.replace_data.jcat_db_orders",
        ),
    ),
    (
        "kafka_topic_column",
        compare.Difference(
            "kafka_batch",
            "peer.execute_save_into_data_source_command.SaveIntoDataSourceCommand",
            "outputs",
            ["unknown:SaveIntoDataSourceCommand"],
            [],
        ),
    ),
    (
        "listener_command_only_name",
        compare.Difference(
            "delta_path",
            "peer.execute_delete_command.data_t",
            "job_name",
            "peer.execute_delete_command.data_t",
            "peer.execute_delete_command",
        ),
    ),
    (
        "listener_misses_delta_dml",
        compare.Difference(
            "delta_catalog",
            "peer.execute_update_command.default_sales",
            "inputs",
            [T],
            [],
            listener_job="peer.execute_update_command",
        ),
    ),
    (
        "listener_misses_jdbc_catalog",
        compare.Difference("iceberg_jdbc", "peer.append_data.db_orders", "outputs", [T], []),
    ),
    (
        "iceberg_create_unnamed",
        compare.Difference(
            "iceberg_hadoop", "peer.create_table.db_orders", "outputs", ["unknown:db.orders"], [T]
        ),
    ),
    (
        "iceberg_jdbc_create_unnamed",
        compare.Difference(
            "iceberg_jdbc", "peer.create_table.db_orders", "outputs", ["unknown:db.orders"], []
        ),
    ),
    (
        "kafka_listener_joins_topics",
        compare.Difference(
            "kafka_batch",
            "peer.x",
            "inputs",
            [f"{K}:clicks", f"{K}:events-a"],
            ["kafka://127.0.0.1:9092:clicks,events-a"],
        ),
    ),
    (
        "kafka_servers_not_in_log",
        compare.Difference(
            "kafka_batch", "peer.x", "inputs", [f"{K}:clicks"], ["kafka://127.0.0.1:9092:clicks"]
        ),
    ),
    (
        "kafka_pattern_read",
        compare.Difference("kafka_batch", "peer.x", "inputs", [f"{K}:events-.*"], []),
    ),
    (
        "stream_kafka_input",
        compare.Difference(
            "stream_kafka_delta", "peer.streaming_query.q", "inputs", [f"{K}:orders"], []
        ),
    ),
    (
        "stream_failure_app",
        compare.Difference("stream_failure", "peer", "app_terminal", "FAIL", "COMPLETE"),
    ),
    (
        "untyped_lake_columns",
        compare.Difference(
            "iceberg_hadoop",
            "peer.merge_into_table.db_orders",
            "schema_fields",
            [["amount", ""], ["status", ""]],
            [["_file", "string"], ["amount", "double"], ["status", "string"]],
            T,
            "inputs",
        ),
    ),
    (
        "lake_output_schema_missing",
        compare.Difference(
            "delta_path", "peer.x", "schema_fields", [], [["id", "long"]], T, "outputs"
        ),
    ),
    (
        "listener_misses_merge_target",
        compare.Difference(
            "delta_path",
            "peer.execute_merge_into_command.t",
            "columns_indirect",
            {"only_agent": 1, "sample": [["*", "file", T, "id", "INDIRECT", "CONDITIONAL"]]},
            {"only_listener": 0, "sample": []},
            T,
            "outputs",
            "peer.execute_merge_into_command.t",
        ),
    ),
    (
        "iceberg_metadata_filter",
        compare.Difference(
            "iceberg_hadoop",
            "peer.delete_from_table.db_orders",
            "columns_indirect",
            {"only_agent": 0, "sample": []},
            {"only_listener": 1, "sample": [["*", "file", T, "_file", "INDIRECT", "FILTER"]]},
            T,
            "outputs",
        ),
    ),
    (
        "iceberg_update_transformation",
        compare.Difference(
            "iceberg_hadoop",
            "peer.update_table.db_orders",
            "columns_direct",
            {
                "only_agent": 1,
                "sample": [["amount", "file", T, "amount", "DIRECT", "TRANSFORMATION"]],
            },
            {"only_listener": 1, "sample": [["amount", "file", T, "amount", "DIRECT", "IDENTITY"]]},
            T,
            "outputs",
            "peer.replace_data.lake_db_orders",
        ),
    ),
    (
        "kafka_columns",
        compare.Difference(
            "kafka_batch",
            "peer.x",
            "columns_direct",
            {"only_agent": 1, "sample": [["v", K, "clicks", "value", "DIRECT", "TRANSFORMATION"]]},
            {"only_listener": 0, "sample": []},
            "/out",
            "outputs",
        ),
    ),
    (
        "delta_catalog_write_lineage",
        compare.Difference(
            "delta_catalog",
            "peer.atomic_create_table_as_select.default_sales_by_region",
            "columns_indirect",
            {"only_agent": 0, "sample": []},
            {"only_listener": 1, "sample": [["*", "file", T, "region", "INDIRECT", "GROUP_BY"]]},
            "/out",
            "outputs",
            "peer.atomic_create_table_as_select.default_sales_by_region",
        ),
    ),
]


@pytest.mark.parametrize(("expected", "difference"), LAKE, ids=[c for c, _ in LAKE])
def test_lakehouse_kafka_and_streaming_differences_classified(
    expected: str, difference: compare.Difference
) -> None:
    """Each class added with the lakehouse, Kafka and streaming shapes explains its difference."""
    known = classify(difference, {difference.shape: {"error": None}})
    assert known is not None and known.id == expected


def test_lake_input_without_listener_input_is_not_a_subquery() -> None:
    """An input only the agent has is a scalar-subquery read only in that shape."""
    odd = compare.Difference("delta_path", "peer.x", "inputs", [T], [])
    assert classify(odd, {}) is None
    subquery = compare.Difference("scalar_subquery", "peer.x", "inputs", ["/orders"], [])
    known = classify(subquery, {})
    assert known is not None and known.id == "subquery_inputs"
