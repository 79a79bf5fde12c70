"""Reading datasets and schemas out of real Spark 4.3 plans (sparkPlanInfo + description)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import zstandard

from agent.spark.plan.attributes.columns import PlanGraph
from agent.spark.plan.attributes.typeinfer import TypeOracle
from agent.spark.plan.datasets import DatasetRef, PlanSummary
from agent.spark.plan.syntax import schema
from agent.spark.plan.syntax import text as plantext
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.syntax.tables import TableIdent
from agent.spark.plan.syntax.text import Attribute, PlanNode, parse_plan
from agent.spark.plan.touched import rdds, scans
from agent.spark.plan.touched import read as plans
from tests.samples import sample_lines

GOLDEN = Path(__file__).resolve().parent / "golden"
MARQUEZ = Path(__file__).resolve().parent / "data" / "eventlogs" / "marquez"
SQL = "org.apache.spark.sql.execution.ui.SparkListenerSQL"


@cache
def load_lines(name: str) -> tuple[bytes, ...]:
    """The raw lines of a sample log (`success`, ...) or a golden log (`catalog`)."""
    golden = GOLDEN / f"{name}.jsonl.zst"
    if not golden.exists():
        return sample_lines(name)
    data = zstandard.ZstdDecompressor().decompressobj().decompress(golden.read_bytes())
    return tuple(line for line in data.splitlines() if line)


@cache
def load_events(name: str) -> tuple[Mapping[str, Any], ...]:
    """The parsed events of a sample or golden log."""
    return tuple(json.loads(line) for line in load_lines(name))


def marquez_events(shape: str) -> list[Mapping[str, Any]]:
    """The parsed events of a log of `tests/data/eventlogs/marquez`."""
    raw = (MARQUEZ / f"{shape}.jsonl.zst").read_bytes()
    data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return [json.loads(line) for line in data.splitlines() if line]


def walk(root: PlanNode) -> list[PlanNode]:
    """Every operator of a parsed plan description."""
    found, stack = [], [root]
    while stack:
        found.append(stack.pop())
        stack.extend(found[-1].children)
    return found


def plan_of(log: str, execution: int, kind: str = "ExecutionStart", nth: int = 0) -> PlanSummary:
    """read_plan over the nth SQL event of that kind for one execution of a log."""
    found = [
        e
        for e in load_events(log)
        if e["Event"] == SQL + kind and e.get("executionId") == execution
    ]
    event = found[nth]
    return plans.read_plan(event["sparkPlanInfo"], event["physicalPlanDescription"])


def test_parquet_write_of_a_range() -> None:
    """InsertIntoHadoopFsRelationCommand: path, format, typed columns, metric ids, OVERWRITE."""
    summary = plan_of("success", 0)
    assert summary.command == "Execute InsertIntoHadoopFsRelationCommand"
    assert summary.notes == ()
    assert summary.datasets == (
        DatasetRef(
            "output",
            "Execute InsertIntoHadoopFsRelationCommand",
            location="file:/data/spark-exp/data/success_parquet",
            format="parquet",
            fields=(Field("id", "long"), Field("k", "long"), Field("s", "string")),
            metrics={"rows": 40, "bytes": 39, "files": 38},
            lifecycle="OVERWRITE",
        ),
    )
    assert summary.writes


def test_adaptive_plan_reads_parquet_and_writes_json() -> None:
    """Under AdaptiveSparkPlan: the scan with its read schema and metrics, the JSON write."""
    summary = plan_of("success", 2)
    assert summary.command == "Execute InsertIntoHadoopFsRelationCommand"
    scan, write = sorted(summary.datasets, key=lambda d: d.role)
    assert scan == DatasetRef(
        "input",
        "Scan parquet",
        location="file:/data/spark-exp/data/success_parquet",
        format="parquet",
        fields=(Field("id", "long"), Field("k", "long")),
        metrics={"rows": 160, "bytes": 164, "files": 162},
    )
    assert (write.location, write.format) == ("file:/data/spark-exp/data/success_agg_json", "json")
    assert write.fields == (Field("k", "long"), Field("c", "long"), Field("total", "long"))
    assert write.metrics == {"rows": 122, "bytes": 121, "files": 120}


def test_final_adaptive_plan_renumbers_the_write_metrics() -> None:
    """The last SQLAdaptiveExecutionUpdate holds the accumulator ids the write really reports."""
    final = plan_of("success", 2, "AdaptiveExecutionUpdate", nth=-1)
    (write,) = [d for d in final.datasets if d.role == "output"]
    assert write.metrics == {"rows": 241, "bytes": 240, "files": 239}
    (scan,) = [d for d in final.datasets if d.role == "input"]
    assert scan.metrics == {"rows": 160, "bytes": 164, "files": 162}


def test_commands_without_datasets_contribute_nothing() -> None:
    """A temp view over a relation and an unresolvable query (empty plan) name no dataset."""
    view = plan_of("success", 1)
    assert (view.command, view.datasets, view.notes) == ("Execute CreateViewCommand", (), ())
    empty = plan_of("sql_failure", 4)
    assert (empty.command, empty.datasets, empty.notes) == (None, (), ())


def test_python_udf_column_keeps_its_name_and_long_type() -> None:
    """`bad(id)` written from `bad(id)#4L`: the command's name, the attribute's long type."""
    (write,) = plan_of("sql_failure", 1).datasets
    assert write.fields == (Field("bad(id)", "long"),)
    assert write.location == "file:/data/spark-exp/data/fail_out"


def test_ctas_names_only_its_table() -> None:
    """CreateDataSourceTableAsSelectCommand: the table, its columns, lifecycle CREATE."""
    summary = plan_of("catalog", 5)
    assert summary.command == "Execute CreateDataSourceTableAsSelectCommand"
    assert summary.datasets == (
        DatasetRef(
            "output",
            "CreateDataSourceTableAsSelectCommand",
            table=TableIdent("adults", "default", "spark_catalog"),
            fields=(Field("name"), Field("age")),
            lifecycle="CREATE",
        ),
    )


def test_save_as_table_wrapper_names_nothing() -> None:
    """Spark 4's SaveAsV1TableCommand wraps the CTAS that names the table: no dataset itself."""
    summary = plan_of("catalog", 2)
    assert (summary.command, summary.datasets) == ("Execute SaveAsV1TableCommand", ())


def test_insert_into_a_catalog_table_reads_a_catalog_table() -> None:
    """INSERT INTO: the written path with its table, the scanned table by node name."""
    summary = plan_of("catalog", 7)
    scan, write = sorted(summary.datasets, key=lambda d: d.role)
    assert scan.location == "file:/data/golden/warehouse/people"
    assert scan.table == TableIdent("people", "default", "spark_catalog")
    assert scan.fields == (Field("name", "string"), Field("age", "integer"))
    assert write.location == "file:/data/golden/warehouse/adults"
    assert write.table == TableIdent("adults", "default", "spark_catalog")
    assert write.lifecycle is None  # Append
    assert write.fields == (Field("name", "string"), Field("age", "integer"))  # age + 1


def test_partitioned_orc_write() -> None:
    """partitionBy: the root path is the dataset; the column list skips the partition attrs."""
    (write,) = [d for d in plan_of("catalog", 8).datasets if d.role == "output"]
    assert (write.location, write.format) == ("file:/data/golden/data/adults_orc", "orc")
    assert write.fields == (Field("name", "string"), Field("age", "integer"))


def test_nested_json_schema_on_both_sides() -> None:
    """Struct and array columns become nested fields, on the scan and on the written columns."""
    info = Field(
        "info",
        "struct",
        (Field("score", "double"), Field("tags", "array", (Field("_element", "string"),))),
    )
    scan, write = sorted(plan_of("catalog", 9).datasets, key=lambda d: d.role)
    assert scan.fields == (Field("id", "long"), info)
    assert write.fields == (Field("id", "long"), info)
    assert scan.format == "json"


def test_text_and_csv_scans() -> None:
    """Text and CSV file scans are named by their Location with their read schemas."""
    scan, write = sorted(plan_of("catalog", 10).datasets, key=lambda d: d.role)
    assert (scan.location, scan.format, scan.fields) == (
        "file:/data/golden/data/words.txt",
        "text",
        (Field("value", "string"),),
    )
    assert (write.location, write.format) == ("file:/data/golden/data/words_csv", "csv")
    (csv,) = [d for d in plan_of("catalog", 4).datasets if d.role == "input"]
    assert csv.fields == (Field("name", "string"), Field("age", "integer"), Field("city", "string"))


def test_hive_ctas_and_insert_into_hive_table() -> None:
    """Hive CTAS names its table; the nested InsertIntoHiveTable adds the table's location."""
    (ctas,) = plan_of("hive_jdbc", 0).datasets
    assert (ctas.table, ctas.lifecycle) == (TableIdent("events", "default"), "CREATE")
    assert ctas.fields == ()  # `[Database: default, TableName: events]` lists no column
    (insert,) = plan_of("hive_jdbc", 1).datasets
    assert insert.table == TableIdent("events", "default", "spark_catalog")
    assert insert.location == "file:/data/golden/warehouse/events"
    assert insert.fields == (Field("id", "long"), Field("s", "string"))


def test_hive_insert_of_a_string_literal_is_typed() -> None:
    """`INSERT INTO events SELECT id + 10, 'x'`: the bare literal `x AS s#8` types s string."""
    (insert,) = plan_of("hive_jdbc", 2).datasets
    assert (insert.table, insert.fields) == (
        TableIdent("events", "default", "spark_catalog"),
        (Field("id", "long"), Field("s", "string")),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x", "string"),
        ("two words", "string"),
        ("10", "integer"),
        ("1.5", None),
        ("-3.0E-4", None),
        ("NaN", None),
        ("null", None),
        ("true", "boolean"),
        ("2026-01-31", None),
        ("2026-01-31 10:00:00", None),
        ("INTERVAL '1' DAY", None),
        ("0x0A", None),
        ("x#3", None),
        ("upper(name#3)", "string"),
    ],
)
def test_literal_types(text: str, expected: str | None) -> None:
    """Spark prints literals bare: a word is a string; numbers, dates, intervals stay open."""
    oracle = TypeOracle(PlanGraph(parse_plan("")), {})
    found = oracle.expression(text)
    assert (found.type if found is not None else None) == expected


def test_hive_table_scan() -> None:
    """`Scan hive db.t` has no Location: the table names it; the output attributes its fields."""
    (scan,) = [d for d in plan_of("hive_jdbc", 3).datasets if d.role == "input"]
    assert scan == DatasetRef(
        "input",
        "Scan hive spark_catalog.default.events",
        table=TableIdent("events", "default", "spark_catalog"),
        format="hive",
        fields=(Field("id", "long"), Field("s")),
        metrics={"rows": scan.metrics["rows"]},
    )


def test_jdbc_without_url_degrades_to_an_unknown_dataset() -> None:
    """JDBC reads never show the url, writes show it redacted: unknown datasets plus a note."""
    read = plan_of("hive_jdbc", 6)
    (scan,) = [d for d in read.datasets if d.role == "input"]
    assert (scan.jdbc, scan.unknown_reason) == (("", "APP.ORDERS"), "JDBC url not in the event log")
    assert scan.fields == (Field("id", "long"),)
    assert read.notes == ("JDBC table APP.ORDERS is read, but its url is not in the event log",)
    write = plan_of("hive_jdbc", 4)
    assert write.notes == (
        "JDBC table APP.ORDERS is written, but its url is redacted in the event log "
        "(spark.sql.redaction.options.regex)",
    )
    assert write.datasets[0].unknown_reason == "JDBC url redacted"


def test_jdbc_write_with_its_url_shown() -> None:
    """With url redaction turned off the JDBC write is named from url and table."""
    (write,) = plan_of("hive_jdbc", 7).datasets
    assert write.jdbc == ("jdbc:derby:memory:shop;create=true", "APP.ITEMS")
    assert (write.unknown_reason, write.lifecycle) == (None, "OVERWRITE")


def test_jdbc_save_query_types_the_rows_it_hands_over() -> None:
    """The query a JDBC save runs reads nothing (a range) but gives the written schema."""
    (query,) = plan_of("hive_jdbc", 8).datasets
    assert query == DatasetRef(
        "output", "DeserializeToObject", fields=(Field("id", "long"),), feeds_write=True
    )


def test_jdbc_save_query_rows_are_typed_from_their_struct_fields() -> None:
    """`createexternalrow(..., StructField(s,StringType,true))` types what no scan typed."""
    description = (
        "== Physical Plan ==\nDeserializeToObject (2)\n+- * Project (1)\n\n\n"
        "(1) Project [codegen id : 1]\nOutput [2]: [id#3L, s#4]\nInput [1]: [id#3L]\n\n"
        "(2) DeserializeToObject\nInput [2]: [id#3L, s#4]\nArguments: createexternalrow("
        "static_invoke(java.lang.Long.valueOf(id#3L)), invoke(s#4.toString()), "
        "StructField(id,LongType,false), StructField(s,StringType,true)), "
        "obj#9: org.apache.spark.sql.Row\n"
    )
    (query,) = plans.read_plan({"nodeName": "DeserializeToObject"}, description).datasets
    assert query.fields == (Field("id", "long"), Field("s", "string"))


def node(name: str, simple: str = "", metadata: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A sparkPlanInfo node of the shape Spark writes (for shapes the samples lack)."""
    return {
        "nodeName": name,
        "simpleString": simple or name,
        "metadata": metadata or {},
        "metrics": [],
        "children": [],
    }


def test_unknown_scan_and_write_nodes_degrade_with_a_note() -> None:
    """Scans and writes this module does not know become unknown datasets, with a note each."""
    tree = node("AppendData", "AppendData org.apache.iceberg.spark.source.SparkWrite@1")
    tree["children"] = [node("BatchScan mongo.db.coll", "BatchScan mongo.db.coll[a#1]")]
    summary = plans.read_plan(tree, "")
    assert summary.datasets == (
        DatasetRef("output", "AppendData", unknown_reason="write node 'AppendData'"),
        DatasetRef(
            "input", "BatchScan mongo.db.coll", unknown_reason="scan node 'BatchScan mongo.db.coll'"
        ),
    )
    assert summary.notes == (
        "unrecognized write node 'AppendData'",
        "unrecognized plan node 'BatchScan mongo.db.coll'",
    )


def test_scans_of_in_memory_data_name_nothing() -> None:
    """Local relations, RDD scans, ranges and cache scans read no external dataset."""
    for name in ("Scan ExistingRDD", "Scan OneRowRelation", "LocalTableScan", "Range"):
        assert plans.read_plan(node(name, f"{name} [a#1]"), "") == PlanSummary(name, (), ())


def test_scan_listing_fewer_paths_than_it_reads_says_so() -> None:
    """Spark stops listing paths after ~100 characters; the count says how many there were."""
    location = "InMemoryFileIndex(3 paths)[s3a://b/x/part1, s3a://b/x/part2]"
    summary = plans.read_plan(
        node("Scan parquet ", metadata={"Location": location, "ReadSchema": "struct<a:int>"}), ""
    )
    assert [d.location for d in summary.datasets] == ["s3a://b/x/part1", "s3a://b/x/part2"]
    assert summary.notes == ("'Scan parquet' reads 3 paths but the plan lists 2",)


def test_cut_location_lists_name_no_dataset() -> None:
    """A long metadata Location ends in `...` and the description keeps only its first path
    (`[file:<f0>, ... 2 entries]`, as a micro-batch reading three files prints it): the
    paths listed are read, no mark of those left out is one, the count says they exist."""
    location = "InMemoryFileIndex(5 paths)[file:/in/f0.json, file:/in/f1.json, ...]"
    summary = plans.read_plan(
        node("Scan json ", metadata={"Location": location, "ReadSchema": "struct<a:int>"}), ""
    )
    assert [d.location for d in summary.datasets] == ["file:/in/f0.json", "file:/in/f1.json"]
    assert summary.notes == ("'Scan json' reads 5 paths but the plan lists 2",)
    (batch,) = [
        e
        for e in marquez_events("stream_files")
        if e["Event"] == SQL + "ExecutionStart" and e["executionId"] == 1
    ]
    root = parse_plan(batch["physicalPlanDescription"]).root
    assert root is not None
    (scan,) = walk(root)
    assert scan.details["Location"].endswith("f0.json, ... 2 entries]")
    assert [d.location for d in scans.scan_datasets(scan, {})] == [
        "file:/data/marquez/data/in/f0.json"
    ]


def test_a_hostile_tree_is_bounded() -> None:
    """Deep or wide garbage cannot exhaust the walk: it stops after a fixed number of nodes."""
    tree: dict[str, Any] = node("Project")
    tree["children"] = [node("Filter") for _ in range(100_001)]
    summary = plans.read_plan(tree, "")
    assert summary.notes == ("plan has more than 100000 nodes; the rest is ignored",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("struct<a:int,b:bigint>", (Field("a", "integer"), Field("b", "long"))),
        (
            "struct<d:decimal(10,2),t:timestamp_ntz>",
            (Field("d", "decimal(10,2)"), Field("t", "timestamp_ntz")),
        ),
        (
            "struct<m:map<string,array<smallint>>>",
            (
                Field(
                    "m",
                    "map",
                    (
                        Field("key", "string"),
                        Field("value", "array", (Field("_element", "short"),)),
                    ),
                ),
            ),
        ),
        ("struct<`a b`:tinyint,`x``y`:string>", (Field("a b", "byte"), Field("x`y", "string"))),
        (
            "struct<s:struct<inner:struct<z:boolean>>>",
            (Field("s", "struct", (Field("inner", "struct", (Field("z", "boolean"),)),)),),
        ),
        ("struct<>", ()),
    ],
)
def test_parse_struct(text: str, expected: tuple[Field, ...]) -> None:
    """catalogString read schemas parse into fields typed as Spark's typeName."""
    assert schema.parse_struct(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("int", "not a struct type: 'int'"),
        ("struct<a>", "field without a type: 'a'"),
        ("struct<a:map<int>>", "map type without key and value: 'map<int>'"),
        ("struct<`a:int>", "unterminated quoted field name: '`a:int'"),
        ("struct<a:int<x>>", "unreadable type 'int<x>' of field 'a'"),
    ],
)
def test_parse_struct_errors_name_the_problem(text: str, message: str) -> None:
    """Unreadable schemas raise ValueError saying what could not be read."""
    with pytest.raises(ValueError) as raised:
        schema.parse_struct(text)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k#4L", Attribute("k", 4, True)),
        ("s#2", Attribute("s", 2, False)),
        ("sum(id#3L)#9L", Attribute("sum(id#3L)", 9, True)),
        ("count(1)#8L AS c#6L", Attribute("c", 6, True)),
        ("<lambda>(id)#3L", Attribute("<lambda>(id)", 3, True)),
        ("no attribute", None),
    ],
)
def test_parse_attribute(text: str, expected: Attribute | None) -> None:
    """Attributes keep name, expression id and the long marker (for column lineage later)."""
    assert plantext.parse_attribute(text) == expected


def test_parse_description_splits_operator_blocks() -> None:
    """`explain formatted` text splits into (N) blocks with their detail lines."""
    start = next(e for e in load_events("success") if e.get("executionId") == 0)
    blocks = plantext.parse_description(start["physicalPlanDescription"])
    assert [b.name for b in blocks] == [
        "Range",
        "Project",
        "WriteFiles",
        "Execute InsertIntoHadoopFsRelationCommand",
    ]
    assert blocks[1].details["Output"] == (
        "[id#0L, (id#0L % 10) AS k#1L, cast(id#0L as string) AS s#2]"
    )


def test_rdd_text_file_job_reads_its_path() -> None:
    """An RDD job over `sc.textFile` reads the path its RDDs are named after."""
    job = next(
        e
        for e in load_events("catalog")
        if e["Event"] == "SparkListenerJobStart" and e["Job ID"] == 9
    )
    assert rdds.rdd_inputs(job["Stage Infos"]) == ("/data/golden/data/words.txt",)
    assert rdds.rdd_job_suffix(job["Stage Infos"]) == "python_map_partitions_hadoop"


def test_rdd_jobs_without_file_inputs_read_nothing() -> None:
    """parallelize / saveAsTextFile jobs name no input (an RDD save's path is not logged)."""
    jobs = [e for e in load_events("catalog") if e["Event"] == "SparkListenerJobStart"]
    save = next(j for j in jobs if j["Job ID"] == 10)
    assert rdds.rdd_inputs(save["Stage Infos"]) == ()
    success_sum = next(
        e
        for e in load_events("success")
        if e["Event"] == "SparkListenerJobStart" and e["Job ID"] == 4
    )
    assert rdds.rdd_job_suffix(success_sum["Stage Infos"]) == "python_parallel_collection"


def test_command_name_is_the_normalized_node() -> None:
    """The command part of SQL job names is the normalized node name, None for no node."""
    assert plans.command_name("Execute InsertIntoHadoopFsRelationCommand") == (
        "execute_insert_into_hadoop_fs_relation_command"
    )
    assert plans.command_name(None) is None


def _tree(node: PlanNode | None, depth: int = 0) -> list[str]:
    """An operator tree as indented `name (id)` lines."""
    if node is None:
        return []
    lines = [f"{'  ' * depth}{node.name} ({node.op_id})"]
    for child in node.children:
        lines += _tree(child, depth + 1)
    return lines


def test_parse_plan_keeps_the_final_adaptive_plan() -> None:
    """Under AdaptiveSparkPlan the final plan is the tree; the initial one is kept apart;
    blocks attach to their operators, codegen stars and `, coalesced` suffixes dropped."""
    final = [
        e
        for e in load_events("success")
        if e["Event"] == SQL + "AdaptiveExecutionUpdate" and e["executionId"] == 2
    ][-1]
    plan = parse_plan(final["physicalPlanDescription"])
    assert _tree(plan.root) == [
        "AdaptiveSparkPlan (16)",
        "  ResultQueryStage (10)",
        "    Execute InsertIntoHadoopFsRelationCommand (9)",
        "      WriteFiles (8)",
        "        HashAggregate (7)",
        "          AQEShuffleRead (6)",
        "            ShuffleQueryStage (5)",
        "              Exchange (4)",
        "                HashAggregate (3)",
        "                  ColumnarToRow (2)",
        "                    Scan parquet (1)",
    ]
    assert [_tree(tree)[0] for tree in plan.initial] == [
        "Execute InsertIntoHadoopFsRelationCommand (15)"
    ]
    assert plan.root is not None
    aggregate = plan.root.children[0].children[0].children[0].children[0]
    assert aggregate.detail_list("Keys") == ["k#4L"]
    assert aggregate.details["Results"] == (
        "[k#4L, count(1)#8L AS c#6L, sum(id#3L)#9L AS total#7L]"
    )


def test_parse_plan_reads_inner_children_and_subqueries() -> None:
    """A cached relation's plan nests under InMemoryRelation (deeper indentation); each
    subquery is its own tree with the operator and expression hosting it."""
    plan = parse_plan(
        "== Physical Plan ==\n"
        "Execute InsertIntoHadoopFsRelationCommand (5)\n"
        "+- * Project (4)\n"
        "   :- InMemoryTableScan (1)\n"
        "   :     +- InMemoryRelation (2)\n"
        "   :           +- Scan parquet  (3)\n"
        "   +- Range (6)\n"
        "\n\n"
        "(4) Project [codegen id : 1]\n"
        "Output [1]: [(a#1 + Subquery subquery#9, [id=#20]) AS b#2]\n"
        "\n===== Subqueries =====\n\n"
        "Subquery:1 Hosting operator id = 4 Hosting Expression = Subquery subquery#9, [id=#20]\n"
        "* HashAggregate (8)\n"
        "+- Scan parquet  (7)\n"
        "\n\n"
        "(8) HashAggregate [codegen id : 1]\n"
        "Results [1]: [max(x#3)#4 AS max(x)#5]\n"
        "Subquery:2 Hosting operator id = 1 Hosting Expression = ReusedSubquery Subquery "
        "subquery#9, [id=#20]\n"
    )
    assert _tree(plan.root) == [
        "Execute InsertIntoHadoopFsRelationCommand (5)",
        "  Project (4)",
        "    InMemoryTableScan (1)",
        "      InMemoryRelation (2)",
        "        Scan parquet (3)",
        "    Range (6)",
    ]
    first, reused = plan.subqueries
    assert (first.host, first.expression) == (4, "Subquery subquery#9, [id=#20]")
    assert _tree(first.root) == ["HashAggregate (8)", "  Scan parquet (7)"]
    assert first.root is not None and first.root.detail_list("Results") == [
        "max(x#3)#4 AS max(x)#5"
    ]
    assert (reused.host, reused.root) == (1, None)


def test_scans_only_in_the_description_are_named_from_it() -> None:
    """Column lineage names its scans from their description blocks: Location lists every
    path, the table comes from the operator's name, the schema from ReadSchema."""
    node = PlanNode(
        7,
        "Scan parquet spark_catalog.default.people",
        {
            "Output": "[name#1, age#2]",
            "Location": "InMemoryFileIndex [file:/wh/people/p=1, file:/wh/people/p=2]",
            "ReadSchema": "struct<name:string,age:int>",
        },
    )
    first, second = scans.scan_datasets(node, {})
    assert first == DatasetRef(
        "input",
        "Scan parquet spark_catalog.default.people",
        location="file:/wh/people/p=1",
        table=TableIdent("people", "default", "spark_catalog"),
        format="parquet",
        fields=(Field("name", "string"), Field("age", "integer")),
    )
    assert second.location == "file:/wh/people/p=2"
    assert scans.scan_datasets(PlanNode(3, "Project", {}), {}) == []


def test_v2_jdbc_writes_are_named_by_table() -> None:
    """AppendDataExecV1 / OverwriteByExpressionExecV1 into a JDBC catalog table: the table
    (the url stays in the catalog's configuration), with a note; other V2 writes unknown."""
    simple = (
        "AppendDataExecV1 JDBCTable(APP.PEOPLE,StructType(StructField(id,LongType,true)),"
        "org.apache.spark.sql.execution.datasources.jdbc.JDBCOptions@5cd39675,Map()), Project"
    )
    summary = plans.read_plan(node("AppendDataExecV1", simple), "")
    assert summary.datasets == (
        DatasetRef(
            "output",
            "AppendDataExecV1",
            jdbc=("", "APP.PEOPLE"),
            format="jdbc",
            unknown_reason="JDBC url not in the event log",
        ),
    )
    assert summary.notes == (
        "JDBC table APP.PEOPLE is written, but its url is not in the event log",
    )
    overwrite = plans.read_plan(node("OverwriteByExpressionExecV1", simple), "").datasets[0]
    assert overwrite.lifecycle == "OVERWRITE"
    noop = plans.read_plan(node("OverwriteByExpression noop-table", "NoopWrite"), "")
    assert noop.datasets[0].unknown_reason == "write node 'OverwriteByExpression noop-table'"


def test_from_json_with_a_nested_field_is_not_typed_in_part() -> None:
    """`from_json` whose schema holds a nested field is left untyped, not typed by the plain
    fields before it; a schema of plain fields is a struct of them."""
    oracle = TypeOracle(PlanGraph(parse_plan("")), {})
    nested = (
        "from_json(StructField(a,LongType,true), "
        "StructField(b,StructType(StructField(c,LongType,true)),true), value#1, Some(UTC))"
    )
    assert oracle.expression(nested) is None
    plain = "from_json(StructField(a,LongType,true), StructField(d,StringType,true), value#1)"
    assert oracle.expression(plain) == Field(
        "", "struct", (Field("a", "long"), Field("d", "string"))
    )
