"""What the agent reports for a PySpark 4.3.0 application, replayed from the checked-in real
log tests/data/eventlogs/spark43/fidelity (see its NOTES.md): a read of 30 paths at Spark's
default `spark.sql.maxMetadataStringLength` and with it raised, a read of two, generators,
INSERT OVERWRITE DIRECTORY in its data source and Hive forms, and statements that fail. Then
over every checked-in Spark 4.3 log: no dataset named after a command or plan node, every
column-lineage field with its field-level transformation type, every event schema-valid.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard

from tests import logsets
from tests.data.make_spark43_logs import SPARK43
from tests.logsets import LogSet, lineage, named_after_a_node, replayed, spark_log

EVENTLOGS = Path(__file__).resolve().parent / "data" / "eventlogs"
P = "/data/spark43"
DATA = f"{P}/data"
LOGS = LogSet(SPARK43.out, SPARK43.app_prefix, P)
MANY = 30  # paths of the long read (tests/sparkjobs/fidelity_jobs.py)
CUT = 3  # of them the log names by default: what fit in 100 characters of the real paths
PARTS = [f"{DATA}/part_{i:02d}" for i in range(MANY)]
WRITE = "execute_insert_into_hadoop_fs_relation_command"


def file(path: str) -> tuple[str, str]:
    return ("file", path)


def spark_version(log: Path) -> str | None:
    """The Spark version of a checked-in log (its first line, `SparkListenerLogStart`)."""
    with zstandard.ZstdDecompressor().stream_reader(log.open("rb")) as body:
        first = body.read(256).split(b"\n", 1)[0]
    version: str | None = json.loads(first).get("Spark Version")
    return version


#: Every checked-in log of Spark 4.3: this set's and the older ones (samples, JDBC, Marquez,
#: side-by-side), each made by its own generator.
SPARK_43_LOGS = tuple(
    sorted(p for p in EVENTLOGS.rglob("*.jsonl.zst") if spark_version(p) == "4.3.0")
)
ALL_43 = pytest.mark.parametrize(
    "log", SPARK_43_LOGS, ids=[str(p.relative_to(EVENTLOGS)) for p in SPARK_43_LOGS]
)


def test_the_log_is_a_whole_scrubbed_spark_43_application() -> None:
    """One PySpark 4.3.0 application with the Hive catalog, its paths under /data/spark43."""
    LOGS.assert_whole_and_scrubbed("fidelity", "4.3.0")
    (environment,) = [
        e for e in LOGS.spark_events("fidelity") if e["Event"] == "SparkListenerEnvironmentUpdate"
    ]
    assert environment["Spark Properties"]["spark.sql.catalogImplementation"] == "hive"


def test_every_statement_names_its_datasets() -> None:
    """Each statement that writes is one run with its inputs and its one output; a temporary
    view, CREATE TABLE and the unresolved column's empty plan are no run of their own."""
    assert LOGS.statements("fidelity", "*") == [
        *[(f"{WRITE}.data_part_{i:02d}", [], [file(PARTS[i])]) for i in range(MANY)],
        (f"{WRITE}.data_many_paths", [file(p) for p in PARTS[:CUT]], [file(f"{DATA}/many_paths")]),
        (
            f"{WRITE}.data_many_paths_listed",
            [file(p) for p in PARTS],
            [file(f"{DATA}/many_paths_listed")],
        ),
        (f"{WRITE}.data_two_paths", [file(p) for p in PARTS[:2]], [file(f"{DATA}/two_paths")]),
        (f"{WRITE}.data_lines", [], [file(f"{DATA}/lines")]),
        *[
            (f"{WRITE}.data_{name}", [file(f"{DATA}/lines")], [file(f"{DATA}/{name}")])
            for name in ("words", "positions", "inlined", "stacked", "udtf_words")
        ],
        (
            "execute_insert_into_data_source_dir_command.data_dir_datasource",
            [file(f"{DATA}/lines")],
            [file(f"{DATA}/dir_datasource")],
        ),
        (
            "execute_insert_into_hive_dir_command.data_dir_hive",
            [file(f"{DATA}/lines")],
            [file(f"{DATA}/dir_hive")],
        ),
        (f"{WRITE}.default_nums", [], [file(f"{P}/warehouse/nums")]),
    ]


def test_read_of_30_paths_with_the_list_logged_names_all_30() -> None:
    """With `spark.sql.maxMetadataStringLength` raised for the query (its execution's
    modified configs say so), the scan's metadata lists all 30 paths: 30 inputs, none
    marked cut, each a source of both output columns."""
    (start,) = [
        e for e in LOGS.spark_events("fidelity") if e.get("description") == "many_paths_listed"
    ]
    assert start["modifiedConfigs"] == {"spark.sql.maxMetadataStringLength": "100000"}
    event = LOGS.terminal("fidelity", f"{WRITE}.data_many_paths_listed")
    assert [i["name"] for i in event["inputs"]] == PARTS
    assert not [i for i in event["inputs"] if "lineageAgent_pathList" in i["facets"]]
    assert lineage(event) == {
        "id": {(p, "id", "IDENTITY") for p in PARTS},
        "n": {(p, "name", "TRANSFORMATION") for p in PARTS},
        "*": set(),
    }


def test_read_of_30_paths_at_the_default_says_the_list_was_cut() -> None:
    """At Spark's default the log names the first 3 paths and the count 30, the others
    nowhere: the agent names those 3, each carrying `lineageAgent_pathList` (30 read, 3
    named), takes lineage from all 3, and warns."""
    (start,) = [e for e in LOGS.spark_events("fidelity") if e.get("description") == "many_paths"]
    assert start["modifiedConfigs"] == {}
    described = start["physicalPlanDescription"]
    assert f"InMemoryFileIndex [file:{PARTS[0]}, ... 29 entries]" in described
    event = LOGS.terminal("fidelity", f"{WRITE}.data_many_paths")
    assert [i["name"] for i in event["inputs"]] == PARTS[:CUT]
    for read in event["inputs"]:
        cut = read["facets"]["lineageAgent_pathList"]
        assert (cut["pathsRead"], cut["pathsNamed"]) == (MANY, CUT)
    assert lineage(event) == {
        "id": {(p, "id", "IDENTITY") for p in PARTS[:CUT]},
        "n": {(p, "name", "TRANSFORMATION") for p in PARTS[:CUT]},
        "*": set(),
    }
    assert f"'Scan parquet' reads 30 paths but the plan lists {CUT} in execution 30" in (
        LOGS.warnings("fidelity")
    )


def test_read_of_two_paths_takes_lineage_from_both() -> None:
    """The plan description prints the first of two paths; each column comes from both."""
    event = LOGS.terminal("fidelity", f"{WRITE}.data_two_paths")
    one, two = PARTS[:2]
    assert lineage(event) == {
        "name": {(one, "name", "IDENTITY"), (two, "name", "IDENTITY")},
        "city": {(one, "city", "IDENTITY"), (two, "city", "IDENTITY")},
        "*": set(),
    }


def test_generated_columns_come_from_the_generator_input() -> None:
    """`explode(split(text, " "))` as `word` comes from `text` (a TRANSFORMATION, also at
    field level); posexplode, inline, stack and a Python UDTF likewise from the columns they
    read, kept columns as they are."""
    lines = f"{DATA}/lines"

    def source(*fields: str, subtype: str = "TRANSFORMATION") -> set[tuple[str, str, str]]:
        return {(lines, f, subtype) for f in fields}

    found = {
        name: lineage(LOGS.terminal("fidelity", f"{WRITE}.data_{name}"))
        for name in ("words", "positions", "inlined", "stacked", "udtf_words")
    }
    kept = source("id", subtype="IDENTITY")
    assert found == {
        "words": {"word": source("text"), "*": set()},
        "positions": {"id": kept, "at": source("text"), "word": source("text"), "*": set()},
        "inlined": {
            "id": kept,
            "k": source("pairs"),
            "v": source("pairs"),
            "*": source("pairs", subtype="FILTER"),
        },
        "stacked": {"id": kept, "k": source("text", "id"), "v": source("text", "id"), "*": set()},
        "udtf_words": {"id": kept, "word": source("text"), "size": source("text"), "*": set()},
    }
    words = LOGS.terminal("fidelity", f"{WRITE}.data_words")["outputs"][0]
    word = words["facets"]["columnLineage"]["fields"]["word"]
    assert (word["transformationType"], word["transformationDescription"]) == (
        "TRANSFORMATION",
        "DIRECT TRANSFORMATION",
    )


@pytest.mark.parametrize(
    ("job", "columns"),
    [
        (
            "execute_insert_into_data_source_dir_command.data_dir_datasource",
            {"id": ("integer", "id", "IDENTITY"), "loud": ("string", "text", "TRANSFORMATION")},
        ),
        (
            "execute_insert_into_hive_dir_command.data_dir_hive",
            {"id": ("integer", "id", "IDENTITY"), "text": ("string", "text", "IDENTITY")},
        ),
    ],
)
def test_insert_overwrite_directory_outputs_its_directory_only(
    job: str, columns: dict[str, tuple[str, str, str]]
) -> None:
    """Every event of the statement's run has exactly one output: the directory, overwritten,
    with its typed columns and their lineage from `lines`."""
    directory = f"{DATA}/{job.rsplit('.data_', 1)[1]}"
    end = LOGS.terminal("fidelity", job)
    run = [e for e in LOGS.events("fidelity") if e["run"]["runId"] == end["run"]["runId"]]
    assert [e["eventType"] for e in run] == ["START", "COMPLETE"]
    assert {tuple((o["namespace"], o["name"]) for o in e["outputs"]) for e in run} == {
        (file(directory),)
    }
    facets = end["outputs"][0]["facets"]
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert [(f["name"], f["type"]) for f in facets["schema"]["fields"]] == [
        (name, kind) for name, (kind, _, _) in columns.items()
    ]
    assert lineage(end) == {
        name: {(f"{DATA}/lines", field, subtype)} for name, (_, field, subtype) in columns.items()
    } | {"*": set()}


def test_failed_statements() -> None:
    """An INSERT whose tasks fail on an ANSI cast ends FAIL with Spark's error and its
    output; the SELECT of a missing column (an execution with an empty plan) is no run, but
    as the application's last execution it makes the application end FAIL with its error
    (docs/how-it-works/runs.md, rule 5), though the program caught it and exited 0."""
    ends = [e for e in LOGS.events("fidelity") if e["eventType"] in logsets.TERMINAL]
    assert [e["eventType"] for e in ends[-3:]] == ["COMPLETE", "FAIL", "FAIL"]
    insert, application = ends[-2:]
    assert insert["job"]["name"] == f"spark43_fidelity.{WRITE}.default_nums"
    error = insert["run"]["facets"]["errorMessage"]
    assert error["message"].startswith(
        '[CAST_INVALID_INPUT] The value \'n1\' of the type "STRING" cannot be cast to "INT"'
    )
    assert "SQLSTATE: 22018" in error["message"] and "\tat " not in error["message"]
    assert error["stackTrace"].startswith(error["message"].rstrip("\n"))
    assert application["job"]["name"] == "spark43_fidelity"
    assert application["run"]["facets"]["errorMessage"]["message"].startswith(
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `no_such_col` cannot be resolved."
    )
    (end,) = [
        e for e in LOGS.spark_events("fidelity") if e["Event"] == "SparkListenerApplicationEnd"
    ]
    assert end["ExitCode"] == 0


#: The datasets of 4.3 logs in namespace `unknown`, by log: a JDBC table whose url Spark's
#: redaction hid (tests/data/eventlogs/jdbc/NOTES.md). Nothing else is placeless.
UNPLACED = {"jdbc/jdbc_redacted.jsonl.zst": {("unknown", "public.hidden")}}


def plan_nodes(log: Path) -> set[str]:
    """The names of every plan node of a log and the operators only descriptions print."""
    nodes = set(logsets.DESCRIBED_ONLY)
    for event in spark_log(log):
        nodes.update(logsets.node_names(event.get("sparkPlanInfo")))
    return nodes


def test_the_node_check_knows_a_command_from_a_place() -> None:
    """What the check below flags: the text of this log's commands and plan nodes, with or
    without their arguments; not its paths nor a table's name."""
    nodes = plan_nodes(LOGS.log("fidelity"))
    assert {"Execute InsertIntoHiveDirCommand", "Generate", "BatchEvalPythonUDTF"} <= nodes
    for text in (
        "Execute InsertIntoHadoopFsRelationCommand",
        "Execute InsertIntoDataSourceDirCommand",
        "LogicalRelation parquet, [id#1L, text#2], false",
        "Scan parquet",
        "Generate explode(split(text#5,  , -1)), false, [word#9]",
    ):
        assert named_after_a_node(text, nodes), text
    for place in (f"{DATA}/words", f"{DATA}/dir_hive", "default.nums", "public.hidden"):
        assert not named_after_a_node(place, nodes), place


@ALL_43
def test_no_dataset_is_named_after_a_command(log: Path) -> None:
    """Over every event of every Spark 4.3 log: no dataset is named after a command or plan
    node of the log, and none is in namespace `unknown` but a JDBC table whose url the log
    redacted (tests/test_fixture_names.py checks the names of every log, less strictly)."""
    events = replayed(log)[0]
    assert events
    datasets = {(d["namespace"], d["name"]) for e in events for d in e["inputs"] + e["outputs"]}
    nodes = plan_nodes(log)
    assert not [name for name in datasets if named_after_a_node(name[1], nodes)]
    unplaced = {d for d in datasets if d[0] == "unknown"}
    assert unplaced == UNPLACED.get(str(log.relative_to(EVENTLOGS)), set())


@ALL_43
def test_every_column_lineage_field_has_its_field_level_type(log: Path) -> None:
    """Over every Spark 4.3 log: each column-lineage output field carries a field-level
    `transformationType` (the strongest DIRECT subtype, `MASKED`, or `INDIRECT` when no
    input reaches it directly) and the `transformationDescription` of its inputs'
    `transformations`, each input with at least one."""
    fields = [
        field
        for event in replayed(log)[0]
        for output in event["outputs"]
        for field in output.get("facets", {}).get("columnLineage", {}).get("fields", {}).values()
    ]
    for field in fields:
        kinds = [t for i in field["inputFields"] for t in i["transformations"]]
        assert all(i["transformations"] for i in field["inputFields"]), field
        described = {
            f"{t['type']} {t['subtype']}" + (" masking" if t["masking"] else "") for t in kinds
        }
        assert field["transformationDescription"] == ", ".join(sorted(described))
        direct = {t["subtype"] for t in kinds if t["type"] == "DIRECT"}
        assert field["transformationType"] in (direct | {"MASKED"} if direct else {"INDIRECT"})
    if log == LOGS.log("fidelity"):
        assert len(fields) > MANY


@ALL_43
def test_every_event_is_schema_valid_and_every_run_ends_once(log: Path) -> None:
    """Over every Spark 4.3 log: every event validates against the official schemas; each
    run starts once and ends once, but where the driver was SIGKILLed (no ApplicationEnd):
    the runs still open there stay open until the daemon finds the driver gone."""
    events = replayed(log)[0]
    if log.name != "sigkill.jsonl.zst":
        logsets.assert_runs_end_once(events)
        return
    runs = logsets.runs_of(events)
    assert sorted(types[-1] for types in runs.values()) == ["COMPLETE", "START", "START"]
    assert all(types[0] == "START" for types in runs.values())
