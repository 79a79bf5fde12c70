"""Column lineage from Spark plans: recorded plans of every operator kind (unit), then real
PySpark jobs end to end (`spark`)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.delivery.canonical import canonicalize
from agent.spark.plan.attributes.columns import ColumnLineage, InputField, OutputColumn, PlanGraph
from agent.spark.plan.datasets import DatasetRef, PlanSummary, WrittenLineage
from agent.spark.plan.syntax.expressions import (
    AGGREGATION,
    IDENTITY,
    TRANSFORMATION,
    Transformation,
    compose,
    indirect,
    references,
)
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.syntax.tables import TableIdent
from agent.spark.plan.syntax.text import parse_plan
from agent.spark.plan.touched import read as plans
from agent.spark.translate.datasets.columnfacet import column_lineage_facets
from agent.spark.translate.datasets.rundatasets import collect
from agent.spark.translate.naming import Catalog
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.marquez import marquez_form
from tests.olschema import SchemaViolation, example_run_event, validate_run_event
from tests.samples import sample_bytes
from tests.spark_logs import spark_env

GOLDEN = Path(__file__).resolve().parent / "golden" / "plans"
SQL = "org.apache.spark.sql.execution.ui.SparkListenerSQL"
PEOPLE = "/data/columns/data/people"

Lineage = dict[str, list[tuple[str, ...]]]


@cache
def golden(name: str) -> Mapping[str, Any]:
    """One recorded plan (see tests/golden/plans/make_plans.py)."""
    record: Mapping[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text())
    return record


def read(name: str) -> PlanSummary:
    record = golden(name)
    return plans.read_plan(record["sparkPlanInfo"], record["physicalPlanDescription"])


def written(summary: PlanSummary) -> DatasetRef:
    (output,) = [d for d in summary.datasets if d.role == "output"]
    return output


def _where(lineage: WrittenLineage, scan: int) -> str:
    """A scan's datasets, short: the last path part, or the JDBC table."""
    refs = lineage.inputs[scan]
    return ",".join(
        r.location.rstrip("/").rsplit("/", 1)[-1] if r.location else (r.jdbc or ("", r.node))[1]
        for r in refs
    )


def _how(t: Transformation) -> str:
    return f"{t.type}/{t.subtype}" + ("/masking" if t.masking else "")


def _fields(lineage: WrittenLineage, fields: tuple[InputField, ...]) -> list[tuple[str, ...]]:
    return [(_where(lineage, f.scan), f.field, *map(_how, f.transformations)) for f in fields]


def columns_of(name: str) -> tuple[Lineage, list[tuple[str, ...]]]:
    """Per written column its input fields as (dataset, field, transformations...), and the
    dataset-level ones, of the one output of a recorded plan."""
    output = written(read(name))
    assert output.columns is not None, f"{name}: no column lineage"
    lineage = output.columns
    by_column = {c.name: _fields(lineage, c.inputs) for c in lineage.lineage.columns}
    return by_column, _fields(lineage, lineage.lineage.dataset)


# -- projections, filters, aggregates -----------------------------------------------------


def test_projection_with_expressions() -> None:
    """Renames are IDENTITY, functions TRANSFORMATION, hashes masking, CASE conditions
    CONDITIONAL; literals read nothing; the filter is a dataset-level FILTER."""
    by_column, dataset = columns_of("projection")
    assert by_column == {
        "id": [("people", "id", "DIRECT/IDENTITY")],
        "full_name": [("people", "name", "DIRECT/IDENTITY")],
        "name_upper": [("people", "name", "DIRECT/TRANSFORMATION")],
        "age_next": [("people", "age", "DIRECT/TRANSFORMATION")],
        "name_hash": [("people", "name", "DIRECT/TRANSFORMATION/masking")],
        "segment": [
            ("people", "age", "INDIRECT/CONDITIONAL"),
            ("people", "city", "DIRECT/TRANSFORMATION"),
        ],
        "one": [],
    }
    assert dataset == [("people", "age", "INDIRECT/FILTER")]


def test_written_columns_are_typed_from_their_expressions() -> None:
    """Types come from the scan's read schema through every expression, not only casts."""
    assert written(read("projection")).fields == (
        Field("id", "long"),
        Field("full_name", "string"),
        Field("name_upper", "string"),
        Field("age_next", "integer"),
        Field("name_hash", "string"),
        Field("segment", "string"),
        Field("one", "integer"),
    )
    assert written(read("aggregate")).fields == (
        Field("city", "string"),
        Field("people", "long"),
        Field("payroll", "double"),
        Field("mean_age", "double"),
        Field("last_name", "string"),
        Field("names", "array", (Field("_element", "string"),)),
        Field("ages", "long"),
    )
    who = Field("who", "struct", (Field("name", "string"), Field("age", "integer")))
    assert written(read("json_nested")).fields == (Field("id", "long"), who)


def test_object_hash_aggregate_partial_and_final() -> None:
    """Grouping keys are GROUP_BY; final aggregates name the inputs their partial buffers
    hid (AGGREGATION); count(distinct) masks; count(*) reads no field."""
    by_column, dataset = columns_of("aggregate")
    assert by_column == {
        "city": [("people", "city", "DIRECT/IDENTITY")],
        "people": [],
        "payroll": [("people", "salary", "DIRECT/AGGREGATION")],
        "mean_age": [("people", "age", "DIRECT/AGGREGATION")],
        "last_name": [("people", "name", "DIRECT/AGGREGATION")],
        "names": [("people", "name", "DIRECT/AGGREGATION")],
        "ages": [("people", "age", "DIRECT/AGGREGATION/masking")],
    }
    # the distinct count's first phases group by (city, age): only city groups the rows
    assert dataset == [("people", "city", "INDIRECT/GROUP_BY")]


def test_distinct_aggregate_alone_groups_by_its_keys_only() -> None:
    """countDistinct alone: Spark's function-less phases group by (city, age); only the
    final aggregate's key city is a GROUP_BY input."""
    by_column, dataset = columns_of("distinct_count")
    assert by_column == {
        "city": [("people", "city", "DIRECT/IDENTITY")],
        "ages": [("people", "age", "DIRECT/AGGREGATION/masking")],
    }
    assert dataset == [("people", "city", "INDIRECT/GROUP_BY")]


def test_sort_aggregate_and_its_local_sorts() -> None:
    """SortAggregate like any aggregate; the sorts it needs are local: no SORT dependency."""
    by_column, dataset = columns_of("sort_aggregate")
    assert by_column == {
        "city": [("people", "city", "DIRECT/IDENTITY")],
        "last_name": [("people", "name", "DIRECT/AGGREGATION")],
    }
    assert dataset == [("people", "city", "INDIRECT/GROUP_BY")]


def test_rollup_through_expand() -> None:
    """Expand's grouping sets keep the grouped columns IDENTITY (null where not grouped)."""
    by_column, dataset = columns_of("rollup")
    assert by_column == {
        "city": [("people", "city", "DIRECT/IDENTITY")],
        "age": [("people", "age", "DIRECT/IDENTITY")],
        "payroll": [("people", "salary", "DIRECT/AGGREGATION")],
    }
    assert dataset == [
        ("people", "city", "INDIRECT/GROUP_BY"),
        ("people", "age", "INDIRECT/GROUP_BY"),
    ]


# -- joins and unions ---------------------------------------------------------------------


JOIN_KEYS = [
    ("people", "id", "INDIRECT/FILTER", "INDIRECT/JOIN"),
    ("orders", "customer_id", "INDIRECT/FILTER", "INDIRECT/JOIN"),
]


@pytest.mark.parametrize(
    ("name", "operator", "expected"),
    [
        (
            "join_broadcast",
            "BroadcastHashJoin",
            {
                "name": [("people", "name", "DIRECT/IDENTITY")],
                "order_id": [("orders", "order_id", "DIRECT/IDENTITY")],
                "amount": [("orders", "amount", "DIRECT/IDENTITY")],
            },
        ),
        (
            "join_sort_merge",
            "SortMergeJoin",
            {
                "name": [("people", "name", "DIRECT/IDENTITY")],
                "amount": [("orders", "amount", "DIRECT/IDENTITY")],
            },
        ),
        (
            "join_shuffled_hash",
            "ShuffledHashJoin",
            {
                "city": [("people", "city", "DIRECT/IDENTITY")],
                "amount": [("orders", "amount", "DIRECT/IDENTITY")],
            },
        ),
        ("semi_join", "BroadcastHashJoin", {"name": [("people", "name", "DIRECT/IDENTITY")]}),
    ],
)
def test_joins_on_keys(name: str, operator: str, expected: Lineage) -> None:
    """Hash and sort-merge joins (adaptive, through query stages and shuffle reads): both
    sides' columns pass through; the keys (and the null filters Spark adds) are dataset-level."""
    assert operator in golden(name)["physicalPlanDescription"]
    by_column, dataset = columns_of(name)
    assert by_column == expected
    assert dataset == JOIN_KEYS


def test_nested_loop_and_cartesian_joins() -> None:
    """A non-equi join's condition is a JOIN dependency; a cartesian product has none."""
    by_column, dataset = columns_of("join_nested_loop")
    assert by_column == {
        "name": [("people", "name", "DIRECT/IDENTITY")],
        "order_id": [("orders", "order_id", "DIRECT/IDENTITY")],
    }
    assert dataset == [
        ("people", "salary", "INDIRECT/FILTER", "INDIRECT/JOIN"),
        ("orders", "amount", "INDIRECT/FILTER", "INDIRECT/JOIN"),
    ]
    by_column, dataset = columns_of("join_cartesian")
    assert by_column == {
        "name": [("people", "name", "DIRECT/IDENTITY")],
        "order_id": [("orders", "order_id", "DIRECT/IDENTITY")],
    }
    assert dataset == []


def test_union_adds_every_branch_by_position() -> None:
    """Union's output keeps its first child's ids; the other branches feed it by position."""
    by_column, dataset = columns_of("union")
    assert by_column == {
        "id": [("people", "id", "DIRECT/IDENTITY"), ("people_b", "id", "DIRECT/TRANSFORMATION")],
        "name": [
            ("people", "name", "DIRECT/IDENTITY"),
            ("people_b", "name", "DIRECT/TRANSFORMATION"),
        ],
    }
    assert dataset == []


def test_reused_exchange_maps_onto_the_exchange_it_reuses() -> None:
    """A self-join reuses one aggregation: the reused side's attributes (defined only in the
    initial plan) still lead to the scanned fields."""
    by_column, dataset = columns_of("reused_exchange")
    assert by_column["city"] == [("people", "city", "DIRECT/IDENTITY")]
    # the same field through the original scan and through the initial plan's twin
    assert by_column["twice"] == [
        ("people", "salary", "DIRECT/AGGREGATION"),
        ("people", "salary", "DIRECT/AGGREGATION"),
    ]
    assert dataset == [
        ("people", "city", "INDIRECT/FILTER", "INDIRECT/GROUP_BY", "INDIRECT/JOIN"),
        ("people", "city", "INDIRECT/GROUP_BY", "INDIRECT/JOIN"),
    ]


# -- windows, generators, sorts, limits, subqueries, caches --------------------------------


def test_window_functions() -> None:
    """Partition and order columns are field-level WINDOW; the summed column AGGREGATION,
    the lagged one TRANSFORMATION; ranking reads values only through its ordering."""
    by_column, dataset = columns_of("window")
    window = [("people", "city", "INDIRECT/WINDOW"), ("people", "salary", "INDIRECT/WINDOW")]
    assert by_column == {
        "name": [("people", "name", "DIRECT/IDENTITY")],
        "rank_in_city": window,
        "city_payroll": [
            ("people", "salary", "DIRECT/AGGREGATION"),
            ("people", "city", "INDIRECT/WINDOW"),
        ],
        "previous_age": [("people", "age", "DIRECT/TRANSFORMATION"), *window],
    }
    assert dataset == []


def test_window_group_limit_filters_rows() -> None:
    """`rank() = 1`: the pushed-down WindowGroupLimit and the filter on the rank are FILTERs
    on the window's partition and order columns."""
    by_column, dataset = columns_of("window_top")
    assert by_column == {
        "city": [("people", "city", "DIRECT/IDENTITY")],
        "name": [("people", "name", "DIRECT/IDENTITY")],
    }
    assert dataset == [
        ("people", "city", "INDIRECT/FILTER"),
        ("people", "salary", "INDIRECT/FILTER"),
    ]


def test_explode_and_posexplode() -> None:
    """Generated columns are TRANSFORMATIONs of the array; explode's empty-array filter is a
    FILTER; the element type comes from the array's."""
    by_column, dataset = columns_of("explode")
    assert by_column == {
        "id": [("people", "id", "DIRECT/IDENTITY")],
        "tag": [("people", "tags", "DIRECT/TRANSFORMATION")],
    }
    assert dataset == [("people", "tags", "INDIRECT/FILTER")]
    by_column, _ = columns_of("posexplode")
    assert by_column["pos"] == by_column["col"] == [("people", "tags", "DIRECT/TRANSFORMATION")]
    assert written(read("posexplode")).fields == (
        Field("name", "string"),
        Field("pos", "integer"),
        Field("col", "string"),
    )


def test_global_sort_and_take_ordered() -> None:
    """A global sort (ORDER BY) and TakeOrderedAndProject (ORDER BY ... LIMIT) are SORTs."""
    assert columns_of("sorted") == (
        {
            "name": [("people", "name", "DIRECT/IDENTITY")],
            "age": [("people", "age", "DIRECT/IDENTITY")],
        },
        [("people", "age", "INDIRECT/SORT")],
    )
    assert columns_of("sorted_top") == (
        {
            "name": [("people", "name", "DIRECT/IDENTITY")],
            "salary": [("people", "salary", "DIRECT/IDENTITY")],
        },
        [("people", "salary", "INDIRECT/SORT")],
    )


def test_limits_pass_rows_through() -> None:
    """GlobalLimit / LocalLimit keep columns as they are and add no dependency."""
    assert columns_of("limited") == ({"name": [("people", "name", "DIRECT/IDENTITY")]}, [])


@pytest.mark.parametrize(
    ("name", "root", "columns"),
    [
        ("collect_limit", "CollectLimit", ["id", "name", "age", "city", "salary", "tags"]),
        ("collect_top", "TakeOrderedAndProject", ["id", "name", "age", "city", "salary", "tags"]),
    ],
)
def test_queries_without_writes_resolve_their_root(
    name: str, root: str, columns: list[str]
) -> None:
    """CollectLimit and TakeOrderedAndProject at the root of a collect: every column of the
    result is the scanned one; ordering by age is a SORT only for the ordered one."""
    graph = PlanGraph(parse_plan(golden(name)["physicalPlanDescription"]))
    assert graph.root is not None and graph.root.name.startswith(root)
    attrs = graph.output(graph.root)
    lineage = graph.lineage([(a.name, a.expr_id) for a in attrs])
    assert [c.name for c in lineage.columns] == columns
    for column in lineage.columns:
        (only,) = column.inputs
        assert (only.field, only.transformations) == (column.name, (IDENTITY,))
    sorted_by = [(f.field, f.transformations) for f in lineage.dataset]
    assert sorted_by == ([("age", (indirect("SORT"),))] if root != "CollectLimit" else [])


def test_scalar_subqueries_in_select_and_where() -> None:
    """A subquery's value is its plan's output (an average: AGGREGATION through the outer
    TRANSFORMATION); a subquery in a filter filters on what it reads."""
    by_column, dataset = columns_of("scalar_subquery")
    assert by_column == {
        "name": [("people", "name", "DIRECT/IDENTITY")],
        "above": [
            ("people", "salary", "DIRECT/TRANSFORMATION"),
            ("orders", "amount", "DIRECT/AGGREGATION"),
        ],
    }
    assert dataset == [("people", "age", "INDIRECT/FILTER"), ("people_b", "age", "INDIRECT/FILTER")]
    assert written(read("scalar_subquery")).fields[1] == Field("above", "double")


def test_cached_relation_leads_to_the_cached_plan_scan() -> None:
    """InMemoryTableScan -> InMemoryRelation -> the plan that filled the cache."""
    assert columns_of("cached") == (
        {
            "name": [("people", "name", "DIRECT/IDENTITY")],
            "double_salary": [("people", "salary", "DIRECT/TRANSFORMATION")],
        },
        [],
    )


@pytest.mark.parametrize(
    ("name", "leaf"),
    [("local", "Scan ExistingRDD"), ("values", "LocalTableScan"), ("range", "Range")],
)
def test_local_data_and_ranges_read_no_dataset(name: str, leaf: str) -> None:
    """Python data (Scan ExistingRDD), VALUES (LocalTableScan) and ranges feed columns that
    read no input field: no lineage to report, and nothing incomplete either."""
    assert f"{leaf} (1)" in golden(name)["physicalPlanDescription"]
    summary = read(name)
    assert (written(summary).columns, summary.notes) == (None, ())


def test_jdbc_relation_scan() -> None:
    """Scan JDBCRelation names its table (the url is not in the plan)."""
    assert columns_of("jdbc_read") == (
        {"name": [("APP.PEOPLE", "name", "DIRECT/TRANSFORMATION")]},
        [],
    )


# -- write commands ----------------------------------------------------------------------


def test_ctas_from_a_join_of_two_tables() -> None:
    """The CTAS command names its table only; the insert it runs carries the lineage of the
    join: both tables' columns, keys and the filter dataset-level."""
    assert written(read("ctas_join")).columns is None
    by_column, dataset = columns_of("ctas_join-nested-1")
    assert by_column == {
        "name": [("customers", "name", "DIRECT/IDENTITY")],
        "city": [("customers", "city", "DIRECT/IDENTITY")],
        "amount": [("sales", "amount", "DIRECT/IDENTITY")],
        "gross": [("sales", "amount", "DIRECT/TRANSFORMATION")],
    }
    assert dataset == [
        ("customers", "id", "INDIRECT/FILTER", "INDIRECT/JOIN"),
        ("sales", "amount", "INDIRECT/FILTER"),
        ("sales", "customer_id", "INDIRECT/FILTER", "INDIRECT/JOIN"),
    ]


def test_insert_renames_columns_by_the_command() -> None:
    """`INSERT INTO t SELECT name, city, salary, salary`: the table's column names."""
    by_column, _ = columns_of("insert_select")
    assert by_column == {
        "name": [("customers", "name", "DIRECT/IDENTITY")],
        "city": [("customers", "city", "DIRECT/IDENTITY")],
        "amount": [("customers", "salary", "DIRECT/IDENTITY")],
        "gross": [("customers", "salary", "DIRECT/IDENTITY")],
    }


def test_v2_write_with_its_query_as_child() -> None:
    """OverwriteByExpression (the `noop` V2 source) writes its child's columns."""
    output = written(read("noop_v2"))
    assert output.node == "OverwriteByExpression noop-table"
    assert columns_of("noop_v2") == ({"a2": [("people", "age", "DIRECT/TRANSFORMATION")]}, [])


@pytest.mark.parametrize(
    ("write", "query", "jdbc", "expected"),
    [
        (
            "v2_append",
            "v2_append-nested-1",
            ("", "APP.PEOPLE"),
            {
                "id": [("people", "id", "DIRECT/TRANSFORMATION")],
                "name": [("people", "name", "DIRECT/TRANSFORMATION")],
            },
        ),
        (
            "v2_overwrite",
            "v2_overwrite-nested-1",
            ("", "APP.PEOPLE"),
            {
                "id": [("people", "id", "DIRECT/IDENTITY")],
                "name": [("people", "name", "DIRECT/IDENTITY")],
            },
        ),
        (
            "jdbc_seed",
            "jdbc_seed-nested-1",
            ("jdbc:derby:memory:columns;create=true", "APP.PEOPLE"),
            {
                "id": [("people", "id", "DIRECT/IDENTITY")],
                "name": [("people", "name", "DIRECT/IDENTITY")],
            },
        ),
    ],
)
def test_writes_whose_query_runs_nested(
    write: str, query: str, jdbc: tuple[str, str], expected: Lineage
) -> None:
    """V1-fallback V2 writes and JDBC saves run their query as a nested execution ending in
    DeserializeToObject: that query's lineage is a `feeds_write` reference, not a dataset."""
    target = written(read(write))
    assert (target.jdbc, target.columns) == (jdbc, None)
    summary = read(query)
    assert not summary.writes
    fed = written(summary)
    assert (fed.node, fed.feeds_write) == ("DeserializeToObject", True)
    assert fed.columns is not None
    by_column = {c.name: _fields(fed.columns, c.inputs) for c in fed.columns.lineage.columns}
    assert by_column == expected


def test_v2_ctas_through_the_v1_fallback() -> None:
    """CREATE TABLE AS SELECT into a JDBC catalog: CTAS, its AppendDataExecV1, its query."""
    assert written(read("v2_ctas")).unknown_reason == "write node 'CreateTableAsSelect'"
    assert written(read("v2_ctas-nested-1")).jdbc == ("", "APP.CITIES")
    fed = written(read("v2_ctas-nested-2"))
    assert fed.columns is not None and fed.feeds_write
    assert _fields(fed.columns, fed.columns.lineage.dataset) == [
        ("people", "city", "INDIRECT/GROUP_BY")
    ]


def test_filter_pushed_into_a_jdbc_scan_is_an_indirect_filter() -> None:
    """`where amount > 30` handled by the JDBC source (`*GreaterThan(amount,30)`) leaves no
    Filter node; the column it tests is an INDIRECT FILTER input all the same."""
    by_column, dataset = columns_of("jdbc_pushed_filter")
    assert by_column == {
        "order_id": [("public.orders", "order_id", "DIRECT/IDENTITY")],
        "amount": [("public.orders", "amount", "DIRECT/IDENTITY")],
    }
    assert dataset == [("public.orders", "amount", "INDIRECT/FILTER")]


def test_filter_pushed_on_a_column_the_scan_does_not_output() -> None:
    """A pushed filter on a column the query does not keep still names that column."""
    record = golden("jdbc_pushed_filter")
    text = record["physicalPlanDescription"]
    for old, new in (
        ("[2]: [order_id#644L, amount#645L]", "[1]: [order_id#644L]"),
        ("struct<order_id:bigint,amount:bigint>", "struct<order_id:bigint>"),
        ("[order_id, amount]", "[order_id]"),
    ):
        assert old in text
        text = text.replace(old, new)
    output = written(plans.read_plan(record["sparkPlanInfo"], text))
    assert output.columns is not None
    lineage = output.columns
    assert [(c.name, _fields(lineage, c.inputs)) for c in lineage.lineage.columns] == [
        ("order_id", [("public.orders", "order_id", "DIRECT/IDENTITY")])
    ]
    assert _fields(lineage, lineage.lineage.dataset) == [
        ("public.orders", "amount", "INDIRECT/FILTER")
    ]


def _hive(execution: int) -> PlanSummary:
    data = (GOLDEN.parent / "hive_jdbc.jsonl.zst").read_bytes()
    lines = zstandard.ZstdDecompressor().decompressobj().decompress(data).splitlines()
    (event,) = [
        e
        for e in map(json.loads, lines)
        if e["Event"] == SQL + "ExecutionStart" and e["executionId"] == execution
    ]
    return plans.read_plan(event["sparkPlanInfo"], event["physicalPlanDescription"])


def test_hive_table_insert_and_scan() -> None:
    """InsertIntoHiveTable types what it writes; a Hive table scan is a lineage source."""
    insert = written(_hive(1))  # from a range: typed, nothing read
    assert (insert.node, insert.fields, insert.columns) == (
        "InsertIntoHiveTable",
        (Field("id", "long"), Field("s", "string")),
        None,
    )
    copy = written(_hive(3))
    assert copy.columns is not None
    by_column = {c.name: _fields(copy.columns, c.inputs) for c in copy.columns.lineage.columns}
    assert by_column == {
        "id": [("Scan hive spark_catalog.default.events", "id", "DIRECT/IDENTITY")],
        "s": [("Scan hive spark_catalog.default.events", "s", "DIRECT/IDENTITY")],
    }


def test_hive_dynamic_partition_insert_reads_its_source() -> None:
    """A dynamic-partition INSERT ... SELECT into a Hive-format table: the source is read,
    and the partition column Spark's writer wraps in empty2null is still a copy."""
    summary = read("hive_dynamic_partition")
    (source,) = [d for d in summary.datasets if d.role == "input"]
    assert source.location == "file:/data/peer/data/inputs/people"
    insert = written(summary)
    assert insert.columns is not None
    by_column = {c.name: _fields(insert.columns, c.inputs) for c in insert.columns.lineage.columns}
    assert by_column == {
        "name": [("people", "name", "DIRECT/TRANSFORMATION")],
        "age": [("people", "age", "DIRECT/IDENTITY")],
        "city": [("people", "city", "DIRECT/IDENTITY")],
    }
    assert _fields(insert.columns, insert.columns.lineage.dataset) == [
        ("people", "age", "INDIRECT/FILTER")
    ]


def test_catalog_table_scan_pruned_to_no_file_still_reads_the_table() -> None:
    """A dynamic-partition INSERT whose filter prunes every partition of its source table:
    the scan lists no file, yet it reads that table, and the lineage goes to it."""
    summary = read("hive_pruned_to_no_file")
    (source,) = [d for d in summary.datasets if d.role == "input"]
    assert (source.location, source.table, source.format) == (
        None,
        TableIdent("visits", "default", "spark_catalog"),
        "parquet",
    )
    by_column, dataset = columns_of("hive_pruned_to_no_file")
    table = "Scan parquet spark_catalog.default.visits"
    assert by_column == {
        "name": [(table, "name", "DIRECT/IDENTITY")],
        "age": [(table, "age", "DIRECT/IDENTITY")],
        "city": [(table, "city", "DIRECT/IDENTITY")],
    }
    assert dataset == [(table, "city", "INDIRECT/FILTER")]


HIVE_PRUNED = """== Physical Plan ==
Execute InsertIntoHadoopFsRelationCommand (3)
+- * Project (2)
   +- Scan hive spark_catalog.default.trips (1)


(1) Scan hive spark_catalog.default.trips
Output [3]: [city#39, day#41, km#40]
Arguments: [city#39, day#41, km#40], HiveTableRelation [`spark_catalog`.`default`.`trips`, \
org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe, Data Cols: [city#39, km#40], \
Partition Cols: [day#41], Pruned Partitions: [(day=2026-01-02)]], \
[isnotnull(day#41), (day#41 >= 2026-01-02)]

(2) Project [codegen id : 1]
Output [3]: [city#39, (km#40 * 1000.0) AS km#48, empty2null(day#41) AS day#51]
Input [3]: [city#39, day#41, km#40]

(3) Execute InsertIntoHadoopFsRelationCommand
Input: []
Arguments: file:/data/trips_km, false, [day#51], Parquet, Append, [city, km, day]
"""


def test_hive_partition_pruning_filters_the_rows_read() -> None:
    """A WHERE on a Hive table's partition column prunes partitions in the scan (no Filter
    node is left): the column is an INDIRECT FILTER input of the dataset."""
    graph = PlanGraph(parse_plan(HIVE_PRUNED))
    lineage = graph.lineage([("city", 39), ("km", 48), ("day", 51)])
    assert [
        (c.name, [(i.field, *map(_how, i.transformations)) for i in c.inputs])
        for c in lineage.columns
    ] == [
        ("city", [("city", "DIRECT/IDENTITY")]),
        ("km", [("km", "DIRECT/TRANSFORMATION")]),
        ("day", [("day", "DIRECT/IDENTITY")]),
    ]
    assert [(i.field, *map(_how, i.transformations)) for i in lineage.dataset] == [
        ("day", "INDIRECT/FILTER")
    ]


def test_adaptive_plans_initial_and_final_agree() -> None:
    """The first (initial) and the last (final) adaptive plan of an execution give the same
    lineage, though their operators and ids differ."""
    events = [
        json.loads(line)
        for line in sample_bytes("success").decode().splitlines()
        if line.startswith('{"Event":"' + SQL)
    ]
    plans_of = [
        plans.read_plan(e["sparkPlanInfo"], e["physicalPlanDescription"])
        for e in events
        if e.get("executionId") == 2 and "sparkPlanInfo" in e
    ]
    assert len(plans_of) >= 2
    lineages = {written(p).columns.lineage for p in plans_of}  # type: ignore[union-attr]
    (only,) = lineages
    assert [(c.name, [(f.field, f.transformations) for f in c.inputs]) for c in only.columns] == [
        ("k", [("k", (IDENTITY,))]),
        ("c", []),
        ("total", [("id", (AGGREGATION,))]),
    ]
    assert [(f.field, f.transformations) for f in only.dataset] == [("k", (indirect("GROUP_BY"),))]


# -- what cannot be read -------------------------------------------------------------------


def test_expression_cut_by_spark_reads_every_column_of_its_operator() -> None:
    """Spark cuts a row hash over 500 columns at maxToStringFields (24 shown): its inputs are
    every column its Project reads, as the shown ones are read; the column stays reported
    incomplete, and a note says why."""
    summary = read("wide_hash")
    by_column, _ = columns_of("wide_hash")
    assert by_column["row_hash"] == [
        ("wide_source", f"c{n}", "DIRECT/TRANSFORMATION/masking") for n in range(500)
    ]
    output = written(summary)
    assert output.columns is not None
    assert output.columns.lineage.incomplete == ("row_hash",)
    assert summary.notes == (
        "column lineage of 'Execute InsertIntoHadoopFsRelationCommand' is incomplete: the plan "
        "cuts long expressions (spark.sql.debug.maxToStringFields); a cut expression is "
        "taken to read every column its operator reads",
    )


def test_unrecognized_operator_degrades_with_a_warning() -> None:
    """An operator this reader does not know (here a renamed Project of a real plan): the
    columns it creates have no lineage and are incomplete, the others keep theirs, and the
    note names the operator."""
    record = golden("projection")
    text = record["physicalPlanDescription"].replace("Project", "MysteryProject")
    summary = plans.read_plan(record["sparkPlanInfo"], text)
    assert summary.notes == ("column lineage stops at unrecognized plan node 'MysteryProject'",)
    output = written(summary)
    assert output.columns is not None
    lineage = output.columns.lineage
    assert lineage.incomplete == (
        "full_name",
        "name_upper",
        "age_next",
        "name_hash",
        "segment",
        "one",
    )
    assert [c.name for c in lineage.columns if c.inputs] == ["id"]
    assert _fields(output.columns, lineage.dataset) == [("people", "age", "INDIRECT/FILTER")]


def test_literal_with_a_bracket_stops_lineage_at_its_operator() -> None:
    """Spark prints string literals unquoted: `concat(name, ' (')` unbalances the list. The
    split disagrees with the count Spark printed, so the operator is not guessed at."""
    record = golden("projection")
    text = record["physicalPlanDescription"].replace("upper(name#", "concat( (, name#")
    summary = plans.read_plan(record["sparkPlanInfo"], text)
    assert summary.notes == (
        "column lineage stops at 'Project': its Output list does not split into the items "
        "Spark counted (a string literal with brackets or quotes?)",
    )
    output = written(summary)
    assert output.columns is not None
    assert output.columns.lineage.incomplete == (
        "full_name", "name_upper", "age_next", "name_hash", "segment", "one"
    )  # fmt: skip


def test_unrecognized_operator_reaches_the_translator_warnings() -> None:
    """The note lands in the translator's warnings, with the execution it came from."""
    record = golden("projection")
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    app = {"Event": "SparkListenerApplicationStart", "App Name": "columns", "App ID": "app-1"}
    translator.feed({**app, "Timestamp": 1_700_000_000_000, "User": "spark"})
    start = {
        "Event": SQL + "ExecutionStart",
        "executionId": 9,
        "rootExecutionId": 9,
        "time": 1_700_000_001_000,
        "sparkPlanInfo": record["sparkPlanInfo"],
        "physicalPlanDescription": record["physicalPlanDescription"].replace("Project", "Odd"),
    }
    (event,) = translator.feed(start)
    assert translator.warnings == [
        "column lineage stops at unrecognized plan node 'Odd' in execution 9"
    ]
    (output,) = event["outputs"]
    assert list(output["facets"]["columnLineage"]["fields"]) == ["id"]
    truncation = output["facets"]["lineageAgent_truncation"]
    assert truncation["incompleteFields"] == [
        "full_name", "name_upper", "age_next", "name_hash", "segment", "one"
    ]  # fmt: skip
    validate_run_event(event)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["window", "scalar_subquery", "reused_exchange", "rollup", "cached"]),
    cut=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    noise=st.text(alphabet="()[]#,: +-*=ASL0123456789abc\n", max_size=40),
)
def test_damaged_plan_text_never_raises(name: str, cut: tuple[float, float], noise: str) -> None:
    """Any slice of a real plan description replaced by noise reads without an exception."""
    record = golden(name)
    text = record["physicalPlanDescription"]
    start, end = sorted(int(f * len(text)) for f in cut)
    summary = plans.read_plan(record["sparkPlanInfo"], text[:start] + noise + text[end:])
    assert not [note for note in summary.notes if "internal error" in note]


def test_plan_text_without_operator_ids_says_so() -> None:
    """A plan printed in another explain mode has no operator ids: no lineage, a note."""
    record = golden("projection")
    summary = plans.read_plan(record["sparkPlanInfo"], "== Physical Plan ==\n*(1) Project [a#1]\n")
    assert written(summary).columns is None
    assert summary.notes == (
        "no column lineage: the plan description has no operator ids "
        "(spark.sql.ui.explainMode is not 'formatted')",
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "== Physical Plan ==\n",
        "== Physical Plan ==\nExecute InsertIntoHadoopFsRelationCommand (2)\n+- Project (1)\n\n"
        "(1) Project\nOutput [2]: [a#1, (b#2 +\n",
        "== Physical Plan ==\n+- :- ( (\n(x) y\n===== Subqueries =====\nSubquery:1 Hosting",
        "== Physical Plan ==\nUnion (3)\n:- Range (1)\n+- Range (2)\n\n(3) Union\n"
        "(1) Range\nOutput [1]: [id#1L]\n(2) Range\nOutput [2]: [id#2L, x#3]\n",
    ],
)
def test_odd_plan_text_never_raises(text: str) -> None:
    """Cut, garbled or inconsistent plan text yields what can be read, never an exception."""
    graph = PlanGraph(parse_plan(text))
    if graph.root is not None:
        attrs = graph.output(graph.root)
        graph.lineage([(a.name, a.expr_id) for a in attrs])


def test_cyclic_definitions_terminate() -> None:
    """Definitions that refer to each other (impossible in Spark, possible in garbage)
    resolve to nothing instead of looping."""
    text = (
        "== Physical Plan ==\nProject (2)\n+- Project (1)\n\n"
        "(1) Project\nOutput [1]: [(b#2 + 1) AS a#1]\n"
        "(2) Project\nOutput [1]: [(a#1 + 1) AS b#2]\n"
    )
    graph = PlanGraph(parse_plan(text))
    assert graph.resolve(2) == ({}, True)


# -- expressions and their transformations -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name#10", [(10, IDENTITY)]),
        ("sum(salary#13)#38", [(38, IDENTITY)]),
        ("upper(name#10)", [(10, TRANSFORMATION)]),
        (
            "CASE WHEN (age#11 > 65) THEN senior ELSE city#12 END",
            [(11, indirect("CONDITIONAL")), (12, TRANSFORMATION)],
        ),
        (
            "if ((a#1 > 0)) b#2 else c#3",
            [(1, indirect("CONDITIONAL")), (2, TRANSFORMATION), (3, TRANSFORMATION)],
        ),
        (
            "sha2(cast(name#10 as binary), 256)",
            [(10, Transformation("DIRECT", "TRANSFORMATION", True))],
        ),
        ("count(distinct age#11)", [(11, Transformation("DIRECT", "AGGREGATION", True))]),
        ("sum(x#1) FILTER (WHERE (y#2 > 0))", [(1, AGGREGATION), (2, indirect("CONDITIONAL"))]),
        (
            "sum(salary#13) windowspecdefinition(city#12, specifiedwindowframe(RowFrame, "
            "unboundedpreceding$(), unboundedfollowing$()))",
            [(13, AGGREGATION), (12, indirect("WINDOW"))],
        ),
        (
            "rank(salary#13) windowspecdefinition(city#12)",
            [(13, indirect("WINDOW")), (12, indirect("WINDOW"))],
        ),
        (
            "(salary#171 - Subquery subquery#164, [id=#1111])",
            [(171, TRANSFORMATION), (164, TRANSFORMATION)],
        ),
        ("MakeDecimal(sum(UnscaledValue(price#1))#20L,17,2)", [(20, TRANSFORMATION)]),
        (
            "transform(arr#1, lambdafunction((lambda x#30 + 1), lambda x#30, false))",
            [(1, TRANSFORMATION)],
        ),
        ("dynamicpruningexpression(k#1 IN dynamicpruning#50)", []),
        ("concat_ws(,, a#1, b#2)", [(1, TRANSFORMATION), (2, TRANSFORMATION)]),
        ("empty2null(day#41)", [(41, IDENTITY)]),  # a partition column, as the writer sees it
        ("empty2null(concat(a#1, b#2))", [(1, TRANSFORMATION), (2, TRANSFORMATION)]),
        (  # the pivot column picks the output column a value lands in
            "pivotfirst(metric#5, avg(reading)#13, temp, hum, 0, 0)",
            [(5, indirect("CONDITIONAL")), (13, TRANSFORMATION)],
        ),
        (
            "pivotfirst(lower(k#5), coalesce(v#6, w#7), x, 0, 0)",
            [(5, indirect("CONDITIONAL")), (6, TRANSFORMATION), (7, TRANSFORMATION)],
        ),
    ],
)
def test_references_and_their_roles(text: str, expected: list[tuple[int, Transformation]]) -> None:
    """Each attribute an expression reads, with the transformation its position implies."""
    scan = references(text)
    assert list(scan.references) == expected
    assert not scan.truncated


def test_references_notice_expressions_spark_cut() -> None:
    """`... 476 more fields` marks an expression Spark cut short."""
    assert references("concat_ws(,, c0#1L, ... 476 more fields)").truncated


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        (IDENTITY, IDENTITY, IDENTITY),
        (TRANSFORMATION, IDENTITY, TRANSFORMATION),
        (IDENTITY, AGGREGATION, AGGREGATION),
        (TRANSFORMATION, AGGREGATION, AGGREGATION),
        (indirect("FILTER"), TRANSFORMATION, indirect("FILTER")),
        (IDENTITY, indirect("WINDOW"), indirect("WINDOW")),
        (indirect("FILTER"), indirect("WINDOW"), indirect("WINDOW")),
        (
            IDENTITY,
            Transformation("DIRECT", "TRANSFORMATION", True),
            Transformation("DIRECT", "TRANSFORMATION", True),
        ),
    ],
)
def test_compose_two_steps(
    outer: Transformation, inner: Transformation, expected: Transformation
) -> None:
    """INDIRECT wins (the inner one first), else the stronger DIRECT subtype; masking sticks."""
    assert compose(outer, inner) == expected


# -- the facet: naming, merging, the cap -----------------------------------------------------


def _facets_of(output: Mapping[str, Any]) -> Mapping[str, Any]:
    facets: Mapping[str, Any] = output.get("facets", {})
    return facets


def test_facet_names_inputs_and_merges_scans_of_one_dataset() -> None:
    """Input fields are named like the input datasets; two scans of one dataset (original
    and reused) merge into one entry with their transformations unioned."""
    run = collect([(ref, {}) for ref in read("reused_exchange").datasets], Catalog())
    (output,) = run.outputs.values()
    facet = _facets_of(output)["columnLineage"]
    assert facet["_schemaURL"] == (
        "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
        "#/$defs/ColumnLineageDatasetFacet"
    )
    salary = {"namespace": "file", "name": PEOPLE, "field": "salary"}
    assert facet["fields"] == {
        "city": {
            "inputFields": [
                {
                    "namespace": "file",
                    "name": PEOPLE,
                    "field": "city",
                    "transformations": [
                        {"type": "DIRECT", "subtype": "IDENTITY", "masking": False}
                    ],
                }
            ],
            "transformationDescription": "DIRECT IDENTITY",
            "transformationType": "IDENTITY",
        },
        "twice": {
            "inputFields": [
                {
                    **salary,
                    "transformations": [
                        {"type": "DIRECT", "subtype": "AGGREGATION", "masking": False}
                    ],
                }
            ],
            "transformationDescription": "DIRECT AGGREGATION",
            "transformationType": "AGGREGATION",
        },
    }
    assert facet["dataset"] == [
        {
            "namespace": "file",
            "name": PEOPLE,
            "field": "city",
            "transformations": [
                {"type": "INDIRECT", "subtype": subtype, "masking": False}
                for subtype in ("FILTER", "GROUP_BY", "JOIN")
            ],
        }
    ]
    assert "lineageAgent_truncation" not in _facets_of(output)


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (
            "projection",
            {
                "id": ("IDENTITY", "DIRECT IDENTITY"),
                "full_name": ("IDENTITY", "DIRECT IDENTITY"),
                "name_upper": ("TRANSFORMATION", "DIRECT TRANSFORMATION"),
                "age_next": ("TRANSFORMATION", "DIRECT TRANSFORMATION"),
                "name_hash": ("MASKED", "DIRECT TRANSFORMATION masking"),
                "segment": ("TRANSFORMATION", "DIRECT TRANSFORMATION, INDIRECT CONDITIONAL"),
            },
        ),
        (
            "window",
            {
                "name": ("IDENTITY", "DIRECT IDENTITY"),
                "rank_in_city": ("INDIRECT", "INDIRECT WINDOW"),
                "city_payroll": ("AGGREGATION", "DIRECT AGGREGATION, INDIRECT WINDOW"),
                "previous_age": ("TRANSFORMATION", "DIRECT TRANSFORMATION, INDIRECT WINDOW"),
            },
        ),
    ],
)
def test_every_output_field_carries_the_type_marquez_reads(
    plan: str, expected: dict[str, tuple[str, str]]
) -> None:
    """Marquez 0.51 reads an output field's own transformationType / Description (its
    `ColumnLineageOutputColumn`), not the per-input list: both are filled, and survive the
    re-serialization of Marquez's model."""
    run = collect([(ref, {}) for ref in read(plan).datasets], Catalog())
    (output,) = run.outputs.values()
    event = {**example_run_event(), "outputs": [output]}
    validate_run_event(event)
    (served,) = marquez_form(event)["outputs"]
    fields = served["facets"]["columnLineage"]["fields"]
    assert {
        name: (field["transformationType"], field["transformationDescription"])
        for name, field in fields.items()
    } == expected


def test_ctas_lineage_lands_on_the_created_table() -> None:
    """The CTAS table and the insert's path are one dataset: lineage, schema and symlink."""
    refs = [*read("ctas_join").datasets, *read("ctas_join-nested-1").datasets]
    run = collect([(ref, {}) for ref in refs], Catalog("file:/data/columns/warehouse"))
    (name,) = run.outputs
    assert name.name == "/data/columns/warehouse/customer_sales"
    facets = _facets_of(run.outputs[name])
    assert facets["symlinks"]["identifiers"][0]["name"] == "default.customer_sales"
    assert sorted(facets["columnLineage"]["fields"]) == ["amount", "city", "gross", "name"]
    assert facets["schema"]["fields"][3] == {"name": "gross", "type": "double"}


def test_nested_query_lends_its_lineage_to_the_jdbc_save() -> None:
    """A JDBC save's dataset gets the lineage (and schema) of the query it ran nested."""
    refs = [*read("jdbc_seed").datasets, *read("jdbc_seed-nested-1").datasets]
    run = collect([(ref, {}) for ref in refs], Catalog())
    (name,) = run.outputs
    assert (name.namespace, name.name) == ("derby:memory:columns", "APP.PEOPLE")
    facets = _facets_of(run.outputs[name])
    assert facets["schema"]["fields"] == [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
    ]
    ids = facets["columnLineage"]["fields"]["id"]["inputFields"]
    assert [(f["name"], f["field"]) for f in ids] == [(PEOPLE, "id")]
    # without the nested query the save has no lineage, and the query alone names no output
    assert "columnLineage" not in _facets_of(
        next(
            iter(collect([(r, {}) for r in read("jdbc_seed").datasets], Catalog()).outputs.values())
        )
    )
    assert collect([(r, {}) for r in read("jdbc_seed-nested-1").datasets], Catalog()).outputs == {}


def _wide(columns: int, inputs: int) -> WrittenLineage:
    """A lineage of `columns` columns reading `inputs` fields each, plus one dataset field."""
    direct = (TRANSFORMATION,)
    lineage = ColumnLineage(
        tuple(
            OutputColumn(f"c{i}", tuple(InputField(1, f"f{i + k}", direct) for k in range(inputs)))
            for i in range(columns)
        ),
        (InputField(1, "key", (indirect("FILTER"),)),),
        ("c1",),
    )
    return WrittenLineage(lineage, {1: (DatasetRef("input", "Scan parquet", location="/in"),)})


def test_cap_keeps_whole_fields_in_order_and_records_the_cut() -> None:
    """With room for 10 entries: the dataset entry, then whole fields while they fit; the
    truncation facet counts what was kept and lists the fields the plan left incomplete."""
    facets = column_lineage_facets(_wide(columns=5, inputs=3), lambda ref: ("file", "/in"), 10)
    lineage = facets["columnLineage"]
    assert list(lineage["fields"]) == ["c0", "c1", "c2"]
    assert [f["field"] for f in lineage["dataset"]] == ["key"]
    assert {k: v for k, v in facets["lineageAgent_truncation"].items() if k[0] != "_"} == {
        "facet": "columnLineage",
        "maxInputFields": 10,
        "inputFields": 16,
        "keptInputFields": 10,
        "fields": 5,
        "keptFields": 3,
        "incompleteFields": ["c1"],
        "incompleteFieldCount": 1,
    }


def test_cap_zero_leaves_column_lineage_out() -> None:
    """`column_lineage_max_fields: 0` turns the facet off."""
    assert column_lineage_facets(_wide(columns=2, inputs=1), lambda ref: ("file", "/in"), 0) == {}


def test_truncated_facet_validates_against_its_schema() -> None:
    """columnLineage and lineageAgent_truncation validate (official and our schema); a
    truncation facet breaking ours is caught."""
    facets = column_lineage_facets(_wide(columns=50, inputs=4), lambda ref: ("file", "/in"), 100)
    event = example_run_event()
    event["outputs"][0]["facets"].update(facets)
    validate_run_event(event)
    facets["lineageAgent_truncation"]["keptInputFields"] = -1
    with pytest.raises(SchemaViolation) as raised:
        validate_run_event(event)
    assert str(raised.value) == (
        "$.outputs[0].facets.lineageAgent_truncation.keptInputFields: "
        "-1 is less than the minimum of 0"
    )


def test_every_recorded_plan_gives_schema_valid_facets() -> None:
    """Every recorded plan's datasets (with columnLineage) validate in a RunEvent."""
    for path in sorted(GOLDEN.glob("*.json")):
        run = collect([(ref, {}) for ref in read(path.stem).datasets], Catalog())
        event = example_run_event()
        event["inputs"], event["outputs"] = run.as_lists(statistics=True)
        validate_run_event(event)


def test_replace_keeps_references_comparable() -> None:
    """Plans read twice give equal references (lineage included): replays are identical."""
    first, second = (
        read("window"),
        plans.read_plan(
            golden("window")["sparkPlanInfo"], golden("window")["physicalPlanDescription"]
        ),
    )
    assert first == second
    assert dataclasses.replace(written(first), columns=None) != written(first)


# -- real PySpark jobs ---------------------------------------------------------------------

JOBS = Path(__file__).resolve().parent / "sparkjobs" / "columns_jobs.py"
JOBS_TIMEOUT = 900.0


@dataclasses.dataclass(frozen=True)
class ColumnRun:
    """The event log of one run of columns_jobs.py and its events, translated."""

    out: Path
    written: Mapping[str, str]  # query -> path it wrote
    log: Path

    def translate(self, **options: Any) -> list[dict[str, Any]]:
        translator = ApplicationTranslator(TranslateOptions(namespace="spark", **options))
        events: list[dict[str, Any]] = []
        with self.log.open("rb") as lines:
            for line in lines:
                events += translator.feed(json.loads(line))
        # of all the queries, only the row hash over 500 columns is cut, by Spark itself
        about_columns = [w for w in translator.warnings if "column lineage" in w]
        assert [w.rsplit(" in execution ", 1)[0] for w in about_columns] == [
            "column lineage of 'Execute InsertIntoHadoopFsRelationCommand' is incomplete: the "
            "plan cuts long expressions (spark.sql.debug.maxToStringFields); a cut expression "
            "is taken to read every column its operator reads"
        ]
        return events


@pytest.fixture(scope="session")
def column_run(tmp_path_factory: pytest.TempPathFactory) -> ColumnRun:
    """One application running every query of columns_jobs.py (one JVM), once a session."""
    out = tmp_path_factory.mktemp("columns") / "out"
    result = subprocess.run(
        [sys.executable, str(JOBS), str(out)],
        env=spark_env(),
        capture_output=True,
        timeout=JOBS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-4000:]
    manifest = json.loads((out / "manifest.json").read_text())
    (log,) = (out / "events").iterdir()
    return ColumnRun(out, manifest["written"], log)


@pytest.fixture(scope="session")
def column_events(column_run: ColumnRun) -> list[dict[str, Any]]:
    """The run's RunEvents with the default options."""
    return column_run.translate()


def completed(events: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """The COMPLETE event whose output is the dataset at `path`."""
    found = [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and any(o["name"] == path for o in e["outputs"])
    ]
    assert len(found) == 1, f"{len(found)} COMPLETE events write {path}"
    return found[0]


def facet(events: list[dict[str, Any]], path: str) -> dict[str, Any]:
    (output,) = [o for o in completed(events, path)["outputs"] if o["name"] == path]
    facets: dict[str, Any] = output["facets"]
    return facets


def simple(run: ColumnRun, entries: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """Input fields as (dataset relative to the run, field, TYPE/SUBTYPE...)."""
    root = str(run.out)
    return [
        (
            e["name"].removeprefix(root + "/"),
            e["field"],
            *(
                f"{t['type']}/{t['subtype']}" + ("/masking" if t["masking"] else "")
                for t in e["transformations"]
            ),
        )
        for e in entries
    ]


def lineage_at(
    run: ColumnRun, events: list[dict[str, Any]], path: str
) -> tuple[Lineage, list[tuple[str, ...]]]:
    found = facet(events, path)["columnLineage"]
    by_column = {name: simple(run, f["inputFields"]) for name, f in found["fields"].items()}
    return by_column, simple(run, found.get("dataset", []))


@pytest.mark.spark
def test_every_event_validates(column_events: list[dict[str, Any]]) -> None:
    """Every RunEvent of the run, column lineage included, validates against the spec."""
    assert sum("columnLineage" in o.get("facets", {}) for e in column_events for o in e["outputs"])
    for event in column_events:
        validate_run_event(event)


@pytest.mark.spark
def test_spark_projection(column_run: ColumnRun, column_events: list[dict[str, Any]]) -> None:
    """Projections with expressions, field by field, with their filter."""
    by_column, dataset = lineage_at(column_run, column_events, column_run.written["projection"])
    people = "data/people"
    assert by_column == {
        "id": [(people, "id", "DIRECT/IDENTITY")],
        "full_name": [(people, "name", "DIRECT/IDENTITY")],
        "name_upper": [(people, "name", "DIRECT/TRANSFORMATION")],
        "age_next": [(people, "age", "DIRECT/TRANSFORMATION")],
        "name_hash": [(people, "name", "DIRECT/TRANSFORMATION/masking")],
        "segment": [
            (people, "age", "INDIRECT/CONDITIONAL"),
            (people, "city", "DIRECT/TRANSFORMATION"),
        ],
    }
    assert dataset == [(people, "age", "INDIRECT/FILTER")]
    schema = facet(column_events, column_run.written["projection"])["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [
        ("id", "long"),
        ("full_name", "string"),
        ("name_upper", "string"),
        ("age_next", "integer"),
        ("name_hash", "string"),
        ("segment", "string"),
        ("one", "integer"),
    ]


@pytest.mark.spark
def test_spark_aggregation_with_group_by(
    column_run: ColumnRun, column_events: list[dict[str, Any]]
) -> None:
    """Group by city: aggregates are AGGREGATION (count masking), keys GROUP_BY."""
    by_column, dataset = lineage_at(column_run, column_events, column_run.written["aggregate"])
    people = "data/people"
    assert by_column == {
        "city": [(people, "city", "DIRECT/IDENTITY")],
        "payroll": [(people, "salary", "DIRECT/AGGREGATION")],
        "mean_age": [(people, "age", "DIRECT/AGGREGATION")],
        "last_name": [(people, "name", "DIRECT/AGGREGATION")],
        "names": [(people, "name", "DIRECT/AGGREGATION")],
        "ages": [(people, "age", "DIRECT/AGGREGATION/masking")],
    }
    assert dataset == [(people, "city", "INDIRECT/GROUP_BY")]


@pytest.mark.spark
@pytest.mark.parametrize(
    "query",
    ["join_broadcast", "join_sort_merge", "join_shuffled_hash", "join_nested_loop", "semi_join"],
)
def test_spark_joins_on_keys(
    column_run: ColumnRun, column_events: list[dict[str, Any]], query: str
) -> None:
    """Every join strategy: columns from both sides, the join keys dataset-level JOIN."""
    by_column, dataset = lineage_at(column_run, column_events, column_run.written[query])
    for inputs in by_column.values():
        assert [i[2:] for i in inputs] == [("DIRECT/IDENTITY",)]
    assert {(i[0], i[1]) for inputs in by_column.values() for i in inputs} <= {
        ("data/people", "name"),
        ("data/people", "city"),
        ("data/orders", "order_id"),
        ("data/orders", "amount"),
    }
    keys = (
        [("data/people", "salary"), ("data/orders", "amount")]
        if query == "join_nested_loop"
        else [("data/people", "id"), ("data/orders", "customer_id")]
    )
    assert dataset == [(*key, "INDIRECT/FILTER", "INDIRECT/JOIN") for key in keys]


@pytest.mark.spark
def test_spark_union_window_explode(
    column_run: ColumnRun, column_events: list[dict[str, Any]]
) -> None:
    """Union branches by position, window partition/order as WINDOW, explode's element."""
    written_to = column_run.written
    union, _ = lineage_at(column_run, column_events, written_to["union"])
    assert union["name"] == [
        ("data/people", "name", "DIRECT/IDENTITY"),
        ("data/people_b", "name", "DIRECT/TRANSFORMATION"),
    ]
    window, _ = lineage_at(column_run, column_events, written_to["window"])
    assert window["city_payroll"] == [
        ("data/people", "salary", "DIRECT/AGGREGATION"),
        ("data/people", "city", "INDIRECT/WINDOW"),
    ]
    assert window["rank_in_city"] == [
        ("data/people", "city", "INDIRECT/WINDOW"),
        ("data/people", "salary", "INDIRECT/WINDOW"),
    ]
    exploded, dataset = lineage_at(column_run, column_events, written_to["explode"])
    assert exploded["tag"] == [("data/people", "tags", "DIRECT/TRANSFORMATION")]
    assert dataset == [("data/people", "tags", "INDIRECT/FILTER")]


@pytest.mark.spark
@pytest.mark.parametrize(("query", "value"), [("pivot", "salary"), ("pivot_strings", "tags")])
def test_spark_pivot_values_come_from_the_aggregated_column(
    column_run: ColumnRun, column_events: list[dict[str, Any]], query: str, value: str
) -> None:
    """Each pivoted column is the aggregate of its value column; the pivot column only picks
    where a value lands (CONDITIONAL), whether Spark plans pivotfirst or `if`s."""
    by_column, dataset = lineage_at(column_run, column_events, column_run.written[query])
    people = "data/people"
    picked = [(people, "name", "INDIRECT/CONDITIONAL"), (people, value, "DIRECT/AGGREGATION")]
    assert by_column == {
        "city": [(people, "city", "DIRECT/IDENTITY")],
        "ada": picked,
        "alan": picked,
    }
    assert (people, "city", "INDIRECT/GROUP_BY") in dataset


@pytest.mark.spark
def test_spark_ctas_from_a_join_of_two_tables(
    column_run: ColumnRun, column_events: list[dict[str, Any]]
) -> None:
    """CTAS joining two catalog tables: the created table (by location, with its symlink)
    carries the lineage of both tables."""
    path = str(column_run.out / "warehouse" / "customer_sales")
    ctas = [
        e
        for e in column_events
        if e["eventType"] == "COMPLETE" and "create_data_source_table" in e["job"]["name"]
    ]
    (event,) = [e for e in ctas if e["outputs"][0]["name"] == path]
    facets = event["outputs"][0]["facets"]
    assert facets["symlinks"]["identifiers"][0]["name"] == "default.customer_sales"
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    by_column = {
        n: simple(column_run, f["inputFields"])
        for n, f in facets["columnLineage"]["fields"].items()
    }
    customers, sales = "warehouse/customers", "warehouse/sales"
    assert by_column == {
        "name": [(customers, "name", "DIRECT/IDENTITY")],
        "city": [(customers, "city", "DIRECT/IDENTITY")],
        "amount": [(sales, "amount", "DIRECT/IDENTITY")],
        "gross": [(sales, "amount", "DIRECT/TRANSFORMATION")],
    }
    assert simple(column_run, facets["columnLineage"]["dataset"]) == [
        (customers, "id", "INDIRECT/FILTER", "INDIRECT/JOIN"),
        (sales, "amount", "INDIRECT/FILTER"),
        (sales, "customer_id", "INDIRECT/FILTER", "INDIRECT/JOIN"),
    ]


@pytest.mark.spark
def test_spark_jdbc_save_gets_its_nested_query_lineage(
    column_run: ColumnRun, column_events: list[dict[str, Any]]
) -> None:
    """`df.write.jdbc`: the JDBC table's lineage comes from the query Spark ran nested."""
    saves = [
        o
        for e in column_events
        if e["eventType"] == "COMPLETE" and "save_into_data_source" in e["job"]["name"]
        for o in e["outputs"]
    ]
    (save,) = saves
    assert (save["namespace"], save["name"]) == ("derby:memory:columns", "APP.PEOPLE")
    by_column = {
        n: simple(column_run, f["inputFields"])
        for n, f in save["facets"]["columnLineage"]["fields"].items()
    }
    assert by_column == {
        "id": [("data/people", "id", "DIRECT/IDENTITY")],
        "name": [("data/people", "name", "DIRECT/IDENTITY")],
    }


def size(event: dict[str, Any]) -> int:
    """Bytes of an event as signed and shipped (RFC 8785 canonical form)."""
    return len(canonicalize(event))


@pytest.mark.spark
def test_spark_wide_table_of_500_columns(
    column_run: ColumnRun, column_events: list[dict[str, Any]]
) -> None:
    """A 500-column copy has complete lineage under the default cap; 500 columns reading
    three fields each (1500 entries) are cut to the cap, and the cut is recorded."""
    copy = facet(column_events, column_run.written["wide_copy"])
    fields = copy["columnLineage"]["fields"]
    assert len(fields) == 500
    assert simple(column_run, fields["c499"]["inputFields"]) == [
        ("data/wide_source", "c499", "DIRECT/IDENTITY")
    ]
    assert "lineageAgent_truncation" not in copy
    assert len(copy["schema"]["fields"]) == 500
    mixed = facet(column_events, column_run.written["wide_mix"])
    assert list(mixed["columnLineage"]["fields"]) == [f"c{i}" for i in range(333)]
    truncation = {k: v for k, v in mixed["lineageAgent_truncation"].items() if k[0] != "_"}
    assert truncation == {
        "facet": "columnLineage",
        "maxInputFields": 1000,
        "inputFields": 1500,
        "keptInputFields": 999,
        "fields": 500,
        "keptFields": 333,
    }
    assert simple(column_run, mixed["columnLineage"]["fields"]["c0"]["inputFields"]) == [
        ("data/wide_source", f"c{i}", "DIRECT/TRANSFORMATION") for i in range(3)
    ]


@pytest.mark.spark
def test_spark_cap_bounds_the_event_size(column_run: ColumnRun) -> None:
    """The cap bounds the event: the 500-column mix is several times smaller with the
    default cap than without one, and a small cap bounds it further."""
    path = column_run.written["wide_mix"]
    sizes = {
        cap: size(completed(column_run.translate(column_lineage_max_fields=cap), path))
        for cap in (0, 100, 1000, 1_000_000)
    }
    assert sizes[0] < sizes[100] < sizes[1000] < sizes[1_000_000]
    # each input-field entry costs bytes: a cut of 500 entries is visible, 900 more so
    assert sizes[1_000_000] - sizes[1000] > 500 * 100
    assert sizes[1000] < 300_000
