"""Only the user's steps become runs, under stable unique job names, with the facets users
expect: on the logs of real PySpark programs (tests/sparkjobs/user_steps.py run twice, and
the `spark-sql` CLI) and on every fixture log of the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyspark
import pytest
import zstandard

from agent.facets import FACET_URLS
from agent.spark.translate.facets.appfacets import REDACTION, redaction, spark_properties
from agent.spark.translate.listener import wanted
from agent.spark.translate.naming import MAX_VARIANTS, DatasetName, JobNames, Step
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.runs import steps
from agent.spark.translate.translator import ApplicationTranslator
from tests.olschema import schema_validator, validate_run_event
from tests.spark_logs import JOBS, spark_env
from tests.test_plans import load_lines
from tests.test_translate import LOGS

Event = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
LAKEHOUSE = ROOT / "tests" / "data" / "eventlogs" / "lakehouse"
INSERT = "execute_insert_into_hadoop_fs_relation_command"
CTAS = "execute_create_data_source_table_as_select_command"
APP = "user_steps"
TIMEOUT = 600.0
CLI_STATEMENTS = (
    "CREATE TABLE cli_people USING parquet AS SELECT 1 AS id, 'ann' AS name",
    "INSERT INTO cli_people SELECT id + 1, name FROM cli_people",
)
RDD_SAVE = f"{APP}.map_partitions_python_parallel_collection"
#: The real steps of user_steps.py, in order (read-only actions not emitted).
WRITES = [
    f"{APP}.{INSERT}.out_people_inferred",
    f"{APP}.{INSERT}.out_people_headed",
    f"{APP}.{INSERT}.out_plain",
    f"{APP}.{INSERT}.out_plain_inferred",
    f"{APP}.{INSERT}.out_events_inferred",
    f"{APP}.{INSERT}.out_events_typed",
    f"{APP}.{INSERT}.out_people_merged",
    f"{APP}.drop_table.default_people_table",  # DDL is a step: lifecycleStateChange DROP
    f"{APP}.{CTAS}.default_people_table",
    f"{APP}.{INSERT}.default_people_table",
    f"{APP}.{INSERT}.default_people_table_2",  # another source: another step
    f"{APP}.{INSERT}.default_people_table",  # the first INSERT again: the same step
    RDD_SAVE,  # named by its RDD lineage, its output by spark.lineageAgent.output
]
READS = [
    f"{APP}.count.out_events_typed",
    f"{APP}.collect.out_events_typed",
    f"{APP}.show.out_events_typed",
    f"{APP}.collect.out_events_typed_2",  # take(1): collect of a limit, another plan
]


@dataclass(frozen=True)
class Logs:
    """The raw lines of the real applications this module translates."""

    runs: tuple[tuple[bytes, ...], ...]  # user_steps.py, first and second run
    app_ids: tuple[str, ...]
    cli: tuple[bytes, ...]  # the spark-sql CLI application
    seconds: float


def _single_log(directory: Path, app_id: str) -> tuple[bytes, ...]:
    return tuple(line for line in (directory / app_id).read_bytes().splitlines() if line)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Logs:
    """user_steps.py run twice in one JVM, then two statements through the spark-sql CLI."""
    began = time.monotonic()
    work = tmp_path_factory.mktemp("user-steps")
    output = (work / "spark.log").open("wb")
    with output:
        subprocess.run(
            [sys.executable, str(JOBS / "user_steps.py"), str(work / "program")],
            env=spark_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT,
            check=True,
        )
        cli_events = work / "cli-events"
        cli_events.mkdir()
        spark_home = Path(pyspark.__file__).parent  # PySpark ships the spark-sql CLI
        conf = {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": cli_events.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
            "spark.sql.warehouse.dir": (work / "cli-warehouse").as_uri(),
            "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        }
        command = [str(spark_home / "bin" / "spark-sql"), "--master", "local[1]"]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        env = {**spark_env(), "SPARK_HOME": str(spark_home)}
        subprocess.run(
            [*command, "-e", "; ".join(CLI_STATEMENTS) + ";"],
            cwd=work,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT,
            check=True,
        )
    manifest = json.loads((work / "program" / "manifest.json").read_text())
    events_dir = work / "program" / "events"
    (cli_log,) = os.listdir(cli_events)
    return Logs(
        runs=tuple(_single_log(events_dir, app_id) for app_id in manifest["app_ids"]),
        app_ids=tuple(manifest["app_ids"]),
        cli=_single_log(cli_events, cli_log),
        seconds=round(time.monotonic() - began, 1),
    )


def translate(lines: Iterable[bytes], **options: Any) -> list[Event]:
    """Feed raw log lines as the pipeline does (through `wanted`, then orjson)."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark", **options))
    events: list[Event] = []
    for line in lines:
        if wanted(line):
            events += translator.feed(orjson.loads(line))
    assert translator.warnings == []
    return events


def started(events: list[Event]) -> list[str]:
    """The job names of the runs, in the order they STARTed (the application first)."""
    return [e["job"]["name"] for e in events if e["eventType"] == "START"]


def sql_starts(lines: Iterable[bytes]) -> list[dict[str, Any]]:
    parsed = (orjson.loads(line) for line in lines if b"SQLExecutionStart" in line[:80])
    return [e for e in parsed if e["Event"].endswith("SQLExecutionStart")]


def assert_one_step_per_name(events: list[Event]) -> None:
    """No job name stands for two different sets of datasets within one application."""
    steps_of: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    for event in events:
        if event["eventType"] != "START":
            continue
        inputs = frozenset((d["namespace"], d["name"]) for d in event["inputs"])
        outputs = frozenset((d["namespace"], d["name"]) for d in event["outputs"])
        steps_of[event["job"]["name"]].add((inputs, outputs))
    shared = {name: found for name, found in steps_of.items() if len(found) > 1}
    assert shared == {}


# --- only real steps ----------------------------------------------------------------------


def test_reader_executions_are_the_schema_inference_reads(logs: Logs) -> None:
    """Per CSV read (header + inferSchema, header only, neither, inferSchema only) Spark runs
    two executions at the reader's call site, over `Scan text`; JSON inference and parquet
    footer / mergeSchema reads run Spark jobs outside any execution, and none is a run."""
    for lines in logs.runs:
        internal = [e for e in sql_starts(lines) if steps.internal(e)]
        assert [e["details"].split("(")[0].rsplit(".", 2)[-2:] for e in internal] == [
            ["DataFrameReader", "csv"]
        ] * 8
        roots = [e["sparkPlanInfo"]["nodeName"] for e in internal]
        assert roots == ["CollectLimit", "DeserializeToObject"] * 4
        assert all(e["executionId"] == e["rootExecutionId"] for e in internal)
        assert all("Scan text" in e["physicalPlanDescription"] for e in internal)
        outside = [
            e
            for e in map(orjson.loads, (x for x in lines if b'"SparkListenerJobStart"' in x[:40]))
            if "spark.sql.execution.id" not in e["Properties"]
        ]
        sites = {
            r["Callsite"].split(" ")[0]
            for e in outside
            for s in e["Stage Infos"]
            for r in s["RDD Info"]
        }
        assert {"csv", "json", "parquet"} <= sites
        events = translate(lines, emit_read_only_runs=True)
        rdd_jobs = {e["job"]["name"] for e in events if e["job"]["name"].startswith(RDD_SAVE)}
        jobs = {e["job"]["facets"]["jobType"]["jobType"] for e in events}
        assert rdd_jobs == {RDD_SAVE}  # the one named save: its own RDD_JOB run
        assert jobs == {"APPLICATION", "SQL_JOB", "RDD_JOB"}


def test_spark_internal_reads_never_become_runs(logs: Logs) -> None:
    """Schema inference, header and footer reads are no runs; every real step is one."""
    for lines in logs.runs:
        for read_only in (False, True):
            names = started(translate(lines, emit_read_only_runs=read_only))
            assert names[0] == APP
            assert not any(
                part in name
                for name in names
                for part in ("collect_limit", "deserialize_to_object", "python_")
                if name != RDD_SAVE
            )
            assert [n for n in names[1:] if n not in READS] == WRITES


def test_read_only_actions_follow_the_switch(logs: Logs) -> None:
    """count, collect, show and take are runs only with emit_read_only_runs, named by the
    action and what they read; off, none of them is."""
    off = started(translate(logs.runs[0]))
    assert off == [APP, *WRITES]
    events = translate(logs.runs[0], emit_read_only_runs=True)
    on = started(events)
    assert [n for n in on if n not in WRITES] == [APP, *READS]
    typed = str(Path(logs_data_path(events)) / "out" / "events_typed")
    for name in READS:
        (start,) = [e for e in events if e["job"]["name"] == name and e["eventType"] == "START"]
        assert [(d["namespace"], d["name"]) for d in start["inputs"]] == [("file", typed)]
        assert start["outputs"] == []
        ends = [e for e in events if e["job"]["name"] == name and e["eventType"] != "START"]
        assert [e["eventType"] for e in ends] == ["COMPLETE"]


def test_rdd_save_output_comes_from_the_job_property(logs: Logs) -> None:
    """An RDD save's path is not logged: the save run's output is the path the program set
    in spark.lineageAgent.output, with the rows written; a count under the same property
    and a save without it are no runs."""
    events = translate(logs.runs[0])
    saves = [e for e in events if e["job"]["name"] == RDD_SAVE]
    assert [e["eventType"] for e in saves] == ["START", "COMPLETE"]
    written = str(Path(logs_data_path(events)) / "out" / "rdd_lines")
    for event in saves:
        assert event["inputs"] == []
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [("file", written)]
    stats = saves[-1]["outputs"][0]["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 2
    assert stats["size"] > 0
    assert not any("rdd_unnamed" in json.dumps(e["outputs"]) for e in events)


def logs_data_path(events: list[Event]) -> str:
    """The program's work directory, from its first write's input."""
    first = next(e for e in events if e["eventType"] == "START" and e["inputs"])
    return str(Path(first["inputs"][0]["name"]).parents[1])


# --- stable, unique job names -------------------------------------------------------------


def test_job_names_are_unique_within_an_application(logs: Logs) -> None:
    """Two different steps never share a job name; the same step keeps its name."""
    for lines in (*logs.runs, logs.cli):
        for read_only in (False, True):
            assert_one_step_per_name(translate(lines, emit_read_only_runs=read_only))


def test_job_names_are_stable_across_two_runs(logs: Logs) -> None:
    """The same program run twice names its steps the same, run ids aside."""
    first, second = (translate(lines, emit_read_only_runs=True) for lines in logs.runs)
    assert started(first) == started(second)
    assert {e["run"]["runId"] for e in first}.isdisjoint(e["run"]["runId"] for e in second)


@pytest.mark.parametrize("log", LOGS)
def test_job_names_are_unique_in_every_fixture_log(log: str) -> None:
    """Each sample and golden log names each step once, whatever the read-only switch."""
    for read_only in (False, True):
        events = translate_fixture(load_lines(log), read_only)
        assert_one_step_per_name(events)


@pytest.mark.parametrize("log", sorted(p.name for p in LAKEHOUSE.glob("*.jsonl.zst")))
def test_job_names_are_unique_in_every_lakehouse_log(log: str) -> None:
    """The Delta, Iceberg, Kafka and streaming logs name each step once too."""
    data = zstandard.ZstdDecompressor().decompressobj().decompress((LAKEHOUSE / log).read_bytes())
    lines = tuple(line for line in data.splitlines() if line)
    for read_only in (False, True):
        assert_one_step_per_name(translate_fixture(lines, read_only))


def translate_fixture(lines: Iterable[bytes], read_only: bool) -> list[Event]:
    """Like `translate`, keeping the translator's warnings out of the question."""
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", emit_read_only_runs=read_only)
    )
    events: list[Event] = []
    for line in lines:
        if wanted(line):
            events += translator.feed(orjson.loads(line))
    return events


def test_a_repeated_name_gets_the_next_ordinal_and_stops_at_the_cap() -> None:
    """A different step (datasets, or the API call that ran it) under a taken name gets _2,
    _3, ...; the same step keeps its name; past MAX_VARIANTS every new step shares the last
    variant."""
    names = JobNames()

    def step(path: str, site: str = "SparkSession.sql") -> Step:
        return ("Insert", site, frozenset({DatasetName("file", path)}), frozenset())

    assert names.assign("app.write.t", step("/a")) == "app.write.t"
    assert names.assign("app.write.t", step("/b")) == "app.write.t_2"
    assert names.assign("app.write.t", step("/a")) == "app.write.t"
    assert names.assign("app.write.t", step("/b")) == "app.write.t_2"
    assert names.assign("app.write.t", step("/a", "DataFrameWriterV2.append")) == "app.write.t_3"
    for n in range(3, MAX_VARIANTS + 5):
        names.assign("app.write.t", step(f"/{n}"))
    assert names.assign("app.write.t", step("/new")) == f"app.write.t_{MAX_VARIANTS}"


# --- the facets users expect ----------------------------------------------------------------


def test_every_event_validates_with_the_new_facets(logs: Logs) -> None:
    """Every event of both settings, with tags and a History Server, validates against the
    official schema, and each new facet against its own schema (jsonschema)."""
    options = {
        "tags": (("team", "payments"), ("env", "prod")),
        "history_server_url": "http://history.example.com:18080",
        "properties_facet": ("spark.master", "spark.executor.memory", "spark.test.password"),
    }
    seen: set[str] = set()
    for lines in (*logs.runs, logs.cli):
        for read_only in (False, True):
            for event in translate(lines, emit_read_only_runs=read_only, **options):
                validate_run_event(event)
                facets = {**event["run"]["facets"], **event["job"]["facets"]}
                for key in (
                    "lineageAgent_application",
                    "lineageAgent_sparkProperties",
                    "sql",
                    "tags",
                ):
                    if key in facets:
                        schema_validator(FACET_URLS[key]).validate(facets[key])
                        seen.add(key)
    assert seen == {"lineageAgent_application", "lineageAgent_sparkProperties", "sql", "tags"}


def test_application_details_facet(logs: Logs) -> None:
    """The application run carries its id, name, user, master, deploy mode and its page in
    the History Server; child runs do not."""
    events = translate(logs.runs[0], history_server_url="http://history.example.com:18080/")
    app_events = [e for e in events if e["job"]["name"] == APP]
    assert [e["eventType"] for e in app_events] == ["START", "COMPLETE"]
    for event in app_events:
        details = event["run"]["facets"]["lineageAgent_application"]
        assert {k: v for k, v in details.items() if not k.startswith("_")} == {
            "applicationId": logs.app_ids[0],
            "applicationName": "User Steps",
            "user": details["user"],
            "master": "local[1]",
            "deployMode": "client",
            "historyUrl": f"http://history.example.com:18080/history/{logs.app_ids[0]}/",
        }
        assert details["user"]  # the driver's OS user
    children = [e for e in events if e["job"]["name"] != APP]
    assert not any("lineageAgent_application" in e["run"]["facets"] for e in children)


def test_spark_properties_facet_shows_only_allowed_non_secret_properties(logs: Logs) -> None:
    """Only allow-listed properties are shown, and never one matching the redaction pattern
    even when allow-listed (spark.test.password); none allowed, no facet."""
    allowed = ("spark.master", "spark.executor.memory", "spark.test.password", "spark.unset")
    events = translate(logs.runs[0], properties_facet=allowed)
    shown = events[0]["run"]["facets"]["lineageAgent_sparkProperties"]["properties"]
    assert shown == {"spark.executor.memory": "512m", "spark.master": "local[1]"}
    assert b"hunter2" not in orjson.dumps(events)
    assert "lineageAgent_sparkProperties" not in translate(logs.runs[0])[0]["run"]["facets"]


def test_redaction_pattern_of_the_application_and_spark_default() -> None:
    """Names or values matching Spark's default pattern or the application's own
    spark.redaction.regex, and values Spark already redacted, never reach the facet."""
    props = {
        "spark.redaction.regex": "(?i)internal",
        "spark.a": "ok",
        "spark.hadoop.fs.s3a.access.key": "AKIA",
        "spark.b": "jdbc:postgresql://h/db?password=x",
        "spark.internal.host": "h1",
        "spark.c": "*********(redacted)",
        "spark.d": "my-token-value",
    }
    facet = spark_properties(props, props, redaction(props["spark.redaction.regex"]))
    assert facet is not None
    assert facet["properties"] == {"spark.a": "ok"}
    assert REDACTION == r"(?i)secret|password|token|access[.]?key"
    assert spark_properties(props, ("spark.c",), redaction(None)) is None


def test_sql_facet_carries_the_statement_a_sql_shell_ran(logs: Logs) -> None:
    """Runs of the spark-sql CLI carry the standard sql facet with their statement; the
    program's spark.sql(...) runs carry none (their text is not in the log)."""
    events = translate(logs.cli)
    queries = {
        e["job"]["name"].split(".", 1)[1]: e["job"]["facets"]["sql"]["query"]
        for e in events
        if e["eventType"] == "START" and "sql" in e["job"]["facets"]
    }
    assert queries == {
        f"{CTAS}.default_cli_people": CLI_STATEMENTS[0],
        f"{INSERT}.default_cli_people": CLI_STATEMENTS[1],
    }
    assert all(
        e["job"]["facets"]["sql"]["dialect"] == "spark"
        for e in events
        if "sql" in e["job"]["facets"]
    )
    assert not any("sql" in e["job"]["facets"] for e in translate(logs.runs[0]))


def test_tags_facet_on_every_job(logs: Logs) -> None:
    """Configured tags are the standard tags job facet of every event, in order."""
    events = translate(logs.runs[0], tags=(("team", "payments"), ("link", "http://wiki/x")))
    expected = [
        {"key": "team", "value": "payments", "source": "CONFIG"},
        {"key": "link", "value": "http://wiki/x", "source": "CONFIG"},
    ]
    assert all(e["job"]["facets"]["tags"]["tags"] == expected for e in events)
    assert not any("tags" in e["job"]["facets"] for e in translate(logs.runs[0]))


# --- call sites, as each Spark version writes them ------------------------------------------


@pytest.mark.parametrize(
    ("details", "internal", "action"),
    [
        ("org.apache.spark.sql.classic.DataFrameReader.csv(DataFrameReader.scala:266)", True, None),
        ("org.apache.spark.sql.DataFrameReader.json(DataFrameReader.scala:361)", True, None),
        ("org.apache.spark.sql.DataFrameReader.load(DataFrameReader.scala:211)", True, None),
        (
            "org.apache.spark.sql.classic.DataStreamReader.load(DataStreamReader.scala:60)",
            True,
            None,
        ),
        ("org.apache.spark.sql.classic.Dataset.count(Dataset.scala:1580)", False, "count"),
        (
            "org.apache.spark.sql.classic.Dataset.collectToPython(Dataset.scala:2139)",
            False,
            "collect",
        ),
        ("org.apache.spark.sql.Dataset.showString(Dataset.scala:323)", False, "show"),
        (
            "org.apache.spark.sql.Dataset.collectAsArrowToPython(Dataset.scala:4150)",
            False,
            "to_pandas",
        ),
        ("org.apache.spark.sql.Dataset.createOrReplaceTempView(Dataset.scala:3248)", False, None),
        ("org.apache.spark.sql.DataFrameWriter.parquet(DataFrameWriter.scala:383)", False, None),
        ("io.delta.tables.DeltaTable.update(DeltaTable.scala:300)", False, None),
        ("", False, None),
    ],
)
def test_call_sites(details: str, internal: bool, action: str | None) -> None:
    """Spark 3.5 and 4.x call sites: readers are Spark's own work, Dataset actions are named
    by the action users know, anything else is neither."""
    event = {"details": details + "\njava.base/jdk.internal.reflect.Method.invoke(Method.java:580)"}
    assert steps.internal(event) is internal
    assert steps.action(event) == action


def test_sql_text_only_from_sql_shells() -> None:
    """The description is the statement only under the spark-sql CLI or the Thrift server."""
    thrift = (
        "org.apache.spark.sql.hive.thriftserver.SparkExecuteStatementOperation"
        ".org$apache$spark$sql$hive$thriftserver$SparkExecuteStatementOperation$$execute"
        "(SparkExecuteStatementOperation.scala:252)"
    )
    assert steps.sql_text({"details": thrift, "description": " SELECT 1 "}) == "SELECT 1"
    program = "org.apache.spark.sql.classic.SparkSession.sql(SparkSession.scala:567)"
    assert steps.sql_text({"details": program, "description": "sql at job.py:12"}) is None
    assert steps.sql_text({"details": thrift, "description": ""}) is None
    assert steps.sql_text({"description": "SELECT 1"}) is None
