"""SparkListener events of real Spark 4.3 logs -> OpenLineage RunEvents, exactly."""

from __future__ import annotations

import copy
import itertools
import json
import uuid
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent import __version__
from agent.facets import FACET_URLS, OPENLINEAGE_SCHEMA_URL, PRODUCER
from agent.spark.translate.listener import wanted
from agent.spark.translate.model import Counters
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.required import REQUIRED
from agent.spark.translate.runs import runids
from agent.spark.translate.translator import ApplicationTranslator
from tests.fuzz import examples
from tests.olschema import SPEC, validate_run_event
from tests.samples import NAMES
from tests.test_lakehouse_logs import events as lakehouse_events
from tests.test_plans import load_events, load_lines
from tests.test_streaming import idle_event

Event = dict[str, Any]
SAMPLES = NAMES
LOGS = (*SAMPLES, "catalog", "hive_jdbc")
TERMINAL = ("COMPLETE", "FAIL", "ABORT")
INSERT = "execute_insert_into_hadoop_fs_relation_command"
SHUTDOWN = (
    "the application ended with jobs still running: Spark cancels them because SparkContext "
    "was shut down"
)
CHILD_SHUTDOWN = (
    "the application ended before this run finished: Spark cancels running jobs because "
    "SparkContext was shut down"
)


def translate(
    log: str, options: TranslateOptions | None = None, *, every_line: bool = False
) -> tuple[ApplicationTranslator, list[Event]]:
    """Feed a log as the pipeline does (raw lines through `wanted`, then orjson); the
    SIGKILL log never ends, so its driver is declared lost afterwards."""
    translator = ApplicationTranslator(options or TranslateOptions(namespace="spark"))
    events: list[Event] = []
    for line in load_lines(log):
        if every_line or wanted(line):
            events += translator.feed(orjson.loads(line))
    if log == "sigkill":
        events += translator.close(cause="driver_lost", time_ms=0, message="driver gone")
    return translator, events


def outline(events: list[Event]) -> list[tuple[str, str]]:
    """(eventType, job name) of each event, in emission order."""
    return [(e["eventType"], e["job"]["name"]) for e in events]


def by_name(events: list[Event], name: str, event_type: str) -> Event:
    (found,) = [e for e in events if e["job"]["name"] == name and e["eventType"] == event_type]
    return found


def counters(event: Event) -> list[int]:
    facet = event["run"]["facets"]["lineageAgent_run"]
    return [facet[k] for k in ("recordsIn", "recordsOut", "bytesIn", "bytesOut", "failedTasks")]


def datasets(event: Event, side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[side]]


def stats(event: Event, side: str) -> list[dict[str, int]]:
    key = "inputStatistics" if side == "inputs" else "outputStatistics"
    facet_key = "inputFacets" if side == "inputs" else "outputFacets"
    return [
        {k: v for k, v in d.get(facet_key, {}).get(key, {}).items() if not k.startswith("_")}
        for d in event[side]
    ]


def error(event: Event) -> str | None:
    facet = event["run"]["facets"].get("errorMessage")
    return None if facet is None else facet["message"]


# -- the sample logs, run by run ----------------------------------------------------------


def test_success_log() -> None:
    """Parquet write, AQE read+aggregate+JSON write, RDD job without files: two SQL runs."""
    translator, events = translate("success")
    parquet = f"exp_success.{INSERT}.data_success_parquet"
    agg = f"exp_success.{INSERT}.data_success_agg_json"
    assert outline(events) == [
        ("START", "exp_success"),
        ("START", parquet),
        ("COMPLETE", parquet),
        ("START", agg),
        ("COMPLETE", agg),
        ("COMPLETE", "exp_success"),
    ]
    assert [e["eventTime"] for e in events] == [
        "2026-11-24T04:39:25.597Z",
        "2026-11-24T04:39:45.22Z",
        "2026-11-24T04:39:52.561Z",
        "2026-11-24T04:39:54.89Z",
        "2026-11-24T04:39:58.425Z",
        "2026-11-24T04:40:01.25Z",
    ]
    start, done = by_name(events, agg, "START"), by_name(events, agg, "COMPLETE")
    assert datasets(done, "inputs") == [("file", "/data/spark-exp/data/success_parquet")]
    assert datasets(done, "outputs") == [("file", "/data/spark-exp/data/success_agg_json")]
    # the scan reads id and k; the dataset also has s, which the first run wrote
    assert done["inputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "long"},
        {"name": "k", "type": "long"},
        {"name": "s", "type": "string"},
    ]
    assert done["outputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "k", "type": "long"},
        {"name": "c", "type": "long"},
        {"name": "total", "type": "long"},
    ]
    assert done["outputs"][0]["facets"]["dataSource"]["uri"] == "file:///"
    assert stats(done, "inputs") == [{"rowCount": 20000, "size": 170225, "fileCount": 2}]
    assert stats(done, "outputs") == [{"rowCount": 10, "size": 340, "fileCount": 1}]
    assert stats(start, "inputs") == [{}]  # statistics only on terminal events
    assert counters(start) == [0, 0, 0, 0, 0]
    assert counters(done) == [20000, 10, 3894, 340, 0]
    assert counters(events[-1]) == [40000, 20010, 3894, 170565, 0]
    assert translator.warnings == []
    assert (translator.app_id, translator.attempt_id, translator.app_name) == (
        "local-1795495169157",
        None,
        "exp-success",
    )


def test_application_and_child_facets() -> None:
    """Producer, schema URL, jobType, processing_engine and parent/root exactly as specified."""
    _, events = translate("success")
    app_start, child = events[0], events[1]
    app_run = app_start["run"]["runId"]
    assert app_start["producer"] == PRODUCER
    assert app_start["schemaURL"] == OPENLINEAGE_SCHEMA_URL
    assert app_start["job"] == {
        "namespace": "spark",
        "name": "exp_success",
        "facets": {
            "jobType": {
                "_producer": PRODUCER,
                "_schemaURL": FACET_URLS["jobType"],
                "processingType": "BATCH",
                "integration": "SPARK",
                "jobType": "APPLICATION",
            }
        },
    }
    assert app_start["run"]["facets"] == {
        "processing_engine": {
            "_producer": PRODUCER,
            "_schemaURL": FACET_URLS["processing_engine"],
            "version": "4.3.0",
            "name": "spark",
            "openlineageAdapterVersion": __version__,
        },
        "lineageAgent_run": {
            "_producer": PRODUCER,
            "_schemaURL": FACET_URLS["lineageAgent_run"],
            "recordsIn": 0,
            "recordsOut": 0,
            "bytesIn": 0,
            "bytesOut": 0,
            "failedTasks": 0,
        },
        "lineageAgent_application": {
            "_producer": PRODUCER,
            "_schemaURL": FACET_URLS["lineageAgent_application"],
            "applicationId": "local-1795495169157",
            "applicationName": "exp-success",
            "user": "root",
            "master": "local[2]",
            "deployMode": "client",
        },
    }
    assert child["job"]["facets"]["jobType"]["jobType"] == "SQL_JOB"
    link = {"runId": app_run}, {"namespace": "spark", "name": "exp_success"}
    parent = child["run"]["facets"]["parent"]
    assert (parent["run"], parent["job"]) == link
    assert (parent["root"]["run"], parent["root"]["job"]) == link
    assert parent["_schemaURL"] == FACET_URLS["parent"]


def test_sql_failure_log() -> None:
    """A failing UDF write and a path clash FAIL; so does the app, as its last job failed."""
    translator, events = translate("sql_failure")
    fail_out = f"exp_sql_failure.{INSERT}.data_fail_out"
    exists = f"exp_sql_failure.{INSERT}.data_exists"
    assert outline(events) == [
        ("START", "exp_sql_failure"),
        ("START", fail_out),
        ("FAIL", fail_out),
        ("START", exists),
        ("COMPLETE", exists),
        ("START", exists),
        ("FAIL", exists),
        ("FAIL", "exp_sql_failure"),
    ]
    udf = events[2]["run"]["facets"]["errorMessage"]
    assert udf["message"] == (
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most "
        'recent call last):\n  File "/data/spark-exp/scripts/make_sample_logs.py", line 328, in '
        'bad\n    raise ValueError(f"boom from udf {x}")\nValueError: boom from udf 2\n'
        " SQLSTATE: 38000"
    )
    assert udf["programmingLanguage"] == "JAVA"
    frames = udf["stackTrace"].removeprefix(udf["message"] + "\n").splitlines()
    assert frames[0] == (
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator"
        ".handlePythonException(PythonRunner.scala:1097)"
    )
    assert counters(events[2]) == [2, 0, 0, 0, 1]
    clash = events[6]["run"]["facets"]["errorMessage"]
    assert clash == {
        "_producer": PRODUCER,
        "_schemaURL": FACET_URLS["errorMessage"],
        "message": "[PATH_ALREADY_EXISTS] Path file:/data/spark-exp/data/exists already exists. "
        'Set mode as "overwrite" to overwrite the existing path. SQLSTATE: 42K04',
        "programmingLanguage": "JAVA",
    }
    assert events[3]["run"]["runId"] != events[5]["run"]["runId"]  # same job, two runs
    app_error = events[-1]["run"]["facets"]["errorMessage"]
    assert app_error["message"].startswith("[PYTHON_EXCEPTION] An exception was thrown")
    assert app_error["message"].endswith(
        "ZeroDivisionError: integer division or modulo by zero\n SQLSTATE: 38000"
    )
    assert "stackTrace" in app_error
    assert counters(events[-1]) == [5, 3, 0, 956, 5]  # the killed task is not a failure
    assert translator.warnings == []


def test_sql_failure_log_with_empty_executions() -> None:
    """emit_empty_executions adds the dataset-less runs, STARTed and ended at their end."""
    _, events = translate(
        "sql_failure", TranslateOptions(namespace="spark", emit_empty_executions=True)
    )
    project = "exp_sql_failure.project"
    assert outline(events)[:3] == [
        ("START", "exp_sql_failure"),
        ("START", project),
        ("FAIL", project),
    ]
    assert events[1]["eventTime"] == "2026-11-24T04:40:32.383Z"  # the execution's start
    assert (error(events[2]) or "").startswith("[DIVIDE_BY_ZERO] Division by zero.")
    assert outline(events)[-3:] == [
        ("START", "exp_sql_failure.sql_execution"),  # the unresolved column: an empty plan
        ("FAIL", "exp_sql_failure.sql_execution"),
        ("FAIL", "exp_sql_failure"),
    ]
    assert (error(events[-2]) or "").startswith("[UNRESOLVED_COLUMN.WITH_SUGGESTION]")


def test_cancelled_log() -> None:
    """No datasets anywhere: only the application, ABORTed by spark.stop() under a query."""
    translator, events = translate("cancelled")
    assert outline(events) == [("START", "exp_cancelled"), ("ABORT", "exp_cancelled")]
    assert error(events[1]) == SHUTDOWN
    assert events[1]["eventTime"] == "2026-11-24T04:42:39.036Z"
    assert translator.warnings == []


def test_cancelled_log_classifies_every_cancellation() -> None:
    """Cancelled queries ABORT with Spark's message; a finished one COMPLETEs."""
    _, events = translate(
        "cancelled", TranslateOptions(namespace="spark", emit_empty_executions=True)
    )
    project = "exp_cancelled.project"
    assert outline(events) == [
        ("START", "exp_cancelled"),
        ("START", project),
        ("ABORT", project),
        ("START", project),
        ("COMPLETE", project),
        ("START", project),
        ("ABORT", project),
        ("START", project),
        ("ABORT", project),
        ("ABORT", "exp_cancelled"),
    ]
    assert error(events[2]) == (
        "[SPARK_JOB_CANCELLED] Job 1 cancelled custom reason from operator SQLSTATE: XXKDA"
    )
    assert error(events[6]) == (
        "[SPARK_JOB_CANCELLED] Job 3 cancelled as part of cancellation of all jobs SQLSTATE: XXKDA"
    )
    assert error(events[8]) == CHILD_SHUTDOWN


@pytest.mark.parametrize(
    ("log", "app", "out"),
    [
        ("sigterm", "exp_sigterm", "sigterm"),
        ("sigterm_python_parent", "exp_sigterm_py", "sigterm_py"),
        ("sigterm_spark_submit", "exp_sigterm_submit", "sigterm_submit"),
    ],
)
def test_sigterm_logs(log: str, app: str, out: str) -> None:
    """SIGTERM mid-write: the done write COMPLETEs, the running one and the app ABORT."""
    translator, events = translate(log)
    quick = f"{app}.{INSERT}.data_{out}_out"
    long = f"{app}.{INSERT}.data_{out}_long"
    assert outline(events) == [
        ("START", app),
        ("START", quick),
        ("COMPLETE", quick),
        ("START", long),
        ("ABORT", long),
        ("ABORT", app),
    ]
    assert events[4]["eventTime"] == events[5]["eventTime"]
    assert error(events[4]) == CHILD_SHUTDOWN
    assert error(events[5]) == SHUTDOWN
    assert counters(events[2]) == [1000, 1000, 0, 4977, 0]
    assert stats(events[2], "outputs") == [{"rowCount": 1000, "size": 4977, "fileCount": 2}]
    assert datasets(events[4], "outputs") == [("file", f"/data/spark-exp/data/{out}_long")]
    assert translator.warnings == []


def test_sigkill_log_closed_as_driver_lost() -> None:
    """close(driver_lost) FAILs the running write, then the app, at the last Spark time."""
    _, events = translate("sigkill")
    long = f"exp_sigkill.{INSERT}.data_sigkill_long"
    assert outline(events)[-3:] == [("START", long), ("FAIL", long), ("FAIL", "exp_sigkill")]
    assert error(events[-2]) == error(events[-1]) == "driver gone"
    assert events[-1]["eventTime"] == "2026-11-24T04:46:55.407Z"
    assert "stackTrace" not in events[-1]["run"]["facets"]["errorMessage"]


def test_sigkill_log_closed_as_stopped() -> None:
    """close(stopped) ABORTs what is open, with the caller's message and time."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    for event in load_events("sigkill"):
        translator.feed(event)
    ended = translator.close(cause="stopped", time_ms=1795495639000, message="stopped by ops")
    assert [e["eventType"] for e in ended] == ["ABORT", "ABORT"]
    assert [error(e) for e in ended] == ["stopped by ops", "stopped by ops"]
    assert ended[-1]["eventTime"] == "2026-11-24T04:47:19Z"
    assert translator.close(cause="stopped", time_ms=0, message="again") == []
    assert translator.feed({"Event": "SparkListenerApplicationEnd", "Timestamp": 1}) == []


# -- the golden logs ----------------------------------------------------------------------


def test_catalog_log_runs() -> None:
    """saveAsTable and CTAS are one run each, named by table; other writes are runs too; the
    CSV header and schema-inference executions are none."""
    translator, events = translate("catalog")
    app = "golden_catalog_app"
    ctas = f"{app}.execute_create_data_source_table_as_select_command"
    names = [n for t, n in outline(events) if t == "START"]
    assert names == [
        app,
        f"{ctas}.default_people",
        f"{ctas}.default_adults",
        f"{app}.{INSERT}.default_adults",
        f"{app}.{INSERT}.data_adults_orc",
        f"{app}.{INSERT}.data_nested_out",
        f"{app}.{INSERT}.data_words_csv",
        f"{app}.python_map_partitions_hadoop",
    ]
    assert [t for t, _ in outline(events)].count("COMPLETE") == len(names)
    assert translator.warnings == []


def test_catalog_ctas_output_is_the_table_location_with_its_symlink() -> None:
    """The CTAS run STARTs at its nested insert with the path, the table as symlink, CREATE."""
    _, events = translate("catalog")
    start = by_name(
        events,
        "golden_catalog_app.execute_create_data_source_table_as_select_command.default_adults",
        "START",
    )
    assert start["eventTime"] == "2026-11-22T06:16:22.4Z"  # the CTAS execution's start
    assert datasets(start, "inputs") == [("file", "/data/golden/warehouse/people")]
    (output,) = start["outputs"]
    assert (output["namespace"], output["name"]) == ("file", "/data/golden/warehouse/adults")
    assert output["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "file:/data/golden/warehouse", "name": "default.adults", "type": "TABLE"}
    ]
    assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert output["facets"]["schema"]["fields"] == [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "integer"},
    ]
    assert start["inputs"][0]["facets"]["symlinks"]["identifiers"][0]["name"] == "default.people"


def test_catalog_rdd_text_file_run() -> None:
    """An RDD job reading a text file is an RDD_JOB run whose input carries its counters."""
    _, events = translate("catalog")
    done = by_name(events, "golden_catalog_app.python_map_partitions_hadoop", "COMPLETE")
    assert done["job"]["facets"]["jobType"]["jobType"] == "RDD_JOB"
    assert datasets(done, "inputs") == [("file", "/data/golden/data/words.txt")]
    assert done["outputs"] == []
    assert stats(done, "inputs") == [{"rowCount": 2, "size": 17}]
    assert counters(done) == [2, 0, 17, 0, 0]


def test_catalog_nested_json_schema() -> None:
    """Nested struct and array columns reach the schema facet as nested fields."""
    _, events = translate("catalog")
    done = by_name(events, f"golden_catalog_app.{INSERT}.data_nested_out", "COMPLETE")
    info = {
        "name": "info",
        "type": "struct",
        "fields": [
            {"name": "score", "type": "double"},
            {"name": "tags", "type": "array", "fields": [{"name": "_element", "type": "string"}]},
        ],
    }
    expected = [{"name": "id", "type": "long"}, info]
    assert done["inputs"][0]["facets"]["schema"]["fields"] == expected
    assert done["outputs"][0]["facets"]["schema"]["fields"] == expected


def test_hive_and_jdbc_log() -> None:
    """Hive tables are named by location with symlinks; JDBC without url is `unknown`."""
    translator, events = translate("hive_jdbc")
    app = "golden_hive_jdbc"
    assert [n for t, n in outline(events) if t == "START"] == [
        app,
        f"{app}.execute_create_hive_table_as_select_command.default_events",
        f"{app}.execute_insert_into_hive_table.default_events",
        f"{app}.{INSERT}.data_events_pq",
        f"{app}.execute_save_into_data_source_command.APP_ORDERS",
        f"{app}.{INSERT}.data_orders",
        f"{app}.execute_save_into_data_source_command.APP_ITEMS",
    ]
    read = by_name(events, f"{app}.{INSERT}.data_orders", "COMPLETE")
    assert read["inputs"] == [
        {
            "namespace": "unknown",
            "name": "APP.ORDERS",
            "facets": {"schema": read["inputs"][0]["facets"]["schema"]},
        }
    ]
    written = by_name(events, f"{app}.execute_save_into_data_source_command.APP_ITEMS", "START")
    assert datasets(written, "outputs") == [("derby:memory:shop", "APP.ITEMS")]
    done = by_name(events, f"{app}.execute_save_into_data_source_command.APP_ITEMS", "COMPLETE")
    (items,) = done["outputs"]
    assert items["facets"]["schema"]["fields"] == [{"name": "id", "type": "long"}]
    assert items["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert translator.warnings == [
        "JDBC table APP.ORDERS is written, but its url is redacted in the event log "
        "(spark.sql.redaction.options.regex) in execution 4",
        "JDBC table APP.ORDERS is read, but its url is not in the event log in execution 6",
    ]


# -- properties every translation has ------------------------------------------------------


@pytest.mark.parametrize("log", LOGS)
@pytest.mark.parametrize("interval", [0, 700])
def test_every_run_has_one_start_then_one_terminal(log: str, interval: int) -> None:
    """Per run: START, RUNNING between, one terminal last, one job name; app ends last."""
    options = TranslateOptions(
        namespace="spark", emit_empty_executions=True, running_interval_ms=interval
    )
    _, events = translate(log, options)
    runs: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event)
    for run_events in runs.values():
        types = [e["eventType"] for e in run_events]
        assert types[0] == "START"
        assert types[-1] in TERMINAL
        assert set(types[1:-1]) <= {"RUNNING"}
        assert len({e["job"]["name"] for e in run_events}) == 1
        times = [e["eventTime"] for e in run_events]
        assert times == sorted(times)
    assert events[-1]["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"
    assert events[-1]["eventType"] in TERMINAL
    assert sum(e["eventType"] in TERMINAL for e in events) == len(runs)


@pytest.mark.parametrize("log", LOGS)
def test_every_event_validates_against_the_openlineage_schemas(log: str) -> None:
    """Core 2-0-2 schema and every facet's schema, with uuid/date-time/uri format checks."""
    options = TranslateOptions(
        namespace="spark", emit_empty_executions=True, running_interval_ms=500
    )
    _, events = translate(log, options)
    assert events
    for event in events:
        validate_run_event(event)


@pytest.mark.parametrize("log", LOGS)
def test_replaying_a_log_gives_byte_identical_events(log: str) -> None:
    """Pure: a second translation of the same log serializes to the same bytes."""
    options = TranslateOptions(namespace="spark", running_interval_ms=250)
    first = [orjson.dumps(e) for e in translate(log, options)[1]]
    second = [orjson.dumps(e) for e in translate(log, options)[1]]
    assert first == second


@pytest.mark.parametrize("log", LOGS)
def test_skipped_lines_change_nothing(log: str) -> None:
    """Lines `wanted` rejects are irrelevant: feeding every line gives the same events."""
    options = TranslateOptions(namespace="spark", running_interval_ms=500)
    assert translate(log, options)[1] == translate(log, options, every_line=True)[1]


def test_wanted_skips_the_bulk_of_a_log() -> None:
    """Task starts, successful task ends, executor lines are skipped; the rest is kept."""
    kept: dict[str, set[bool]] = defaultdict(set)
    for log in SAMPLES:
        for line in load_lines(log):
            kind = json.loads(line)["Event"].rsplit(".", 1)[-1]
            if kind == "SparkListenerTaskEnd":
                kind += " Success" if b'"Reason":"Success"' in line else " failed"
            kept[kind].add(wanted(line))
    assert {k for k, v in kept.items() if v == {False}} == {
        "SparkListenerTaskStart",
        "SparkListenerTaskEnd Success",
        "SparkListenerStageSubmitted",
        "SparkListenerExecutorAdded",
        "SparkListenerBlockManagerAdded",
        "SparkListenerResourceProfileAdded",
    }
    assert {k for k, v in kept.items() if v == {True}} == {
        "SparkListenerLogStart",
        "SparkListenerEnvironmentUpdate",
        "SparkListenerApplicationStart",
        "SparkListenerApplicationEnd",
        "SparkListenerJobStart",
        "SparkListenerJobEnd",
        "SparkListenerStageCompleted",
        "SparkListenerTaskEnd failed",
        "SparkListenerSQLExecutionStart",
        "SparkListenerSQLExecutionEnd",
        "SparkListenerSQLAdaptiveExecutionUpdate",
        "SparkListenerDriverAccumUpdates",
    }
    assert wanted(b'{ "Event" : "SparkListenerTaskStart" }')  # not Spark's form: parse it
    assert not wanted(b'{"Event":"SparkListenerTaskStartX"}')


# -- RUNNING, stop, exit codes, snapshot ----------------------------------------------------


def test_running_events_carry_live_counters() -> None:
    """RUNNING events carry the counters so far, never decreasing, without statistics."""
    _, events = translate("success", TranslateOptions(namespace="spark", running_interval_ms=1000))
    app = [e for e in events if e["job"]["name"] == "exp_success"]
    assert [e["eventType"] for e in app] == ["START"] + ["RUNNING"] * 9 + ["COMPLETE"]
    seen = [counters(e) for e in app]
    assert all(all(x <= y for x, y in zip(a, b, strict=True)) for a, b in itertools.pairwise(seen))
    assert seen[-2] == [40000, 20010, 3894, 170565, 0]
    running = [e for e in events if e["eventType"] == "RUNNING"]
    assert all("inputStatistics" not in json.dumps(e) for e in running)


def test_request_stop_aborts_the_application_and_what_fails_after() -> None:
    """After request_stop the app and runs ending badly ABORT; successes COMPLETE."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    events: list[Event] = []
    for event in load_events("sql_failure"):
        if event["Event"].endswith("SQLExecutionStart") and event["executionId"] == 1:
            translator.request_stop(reason="maintenance", requested_by="alice")
        events += translator.feed(event)
    assert [t for t, _ in outline(events)] == [
        "START",
        "START",
        "ABORT",
        "START",
        "COMPLETE",
        "START",
        "ABORT",
        "ABORT",
    ]
    assert error(events[-1]) == "stopped by alice: maintenance"
    assert (error(events[2]) or "").startswith(
        "stopped by alice: maintenance; it failed first: [PYTHON_EXCEPTION]"
    )
    assert translator.snapshot().stop_requested


def test_non_zero_exit_code_fails_the_application() -> None:
    """An ApplicationEnd with ExitCode 1 FAILs the application even after clean work."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    events: list[Event] = []
    for event in load_events("success"):
        if event["Event"] == "SparkListenerApplicationEnd":
            event = {**event, "ExitCode": 1}
        events += translator.feed(event)
    assert events[-1]["eventType"] == "FAIL"
    assert error(events[-1]) == "Spark application exited with code 1"


def test_snapshot_lists_runs_with_datasets_and_counters() -> None:
    """snapshot() lists the app and its runs with states, datasets and counters."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    assert translator.snapshot().application is None
    for event in load_events("sigkill"):
        translator.feed(event)
    live = translator.snapshot()
    assert live.application is not None
    assert (live.app_id, live.app_name, live.application.state) == (
        "local-1795495584857",
        "exp-sigkill",
        "RUNNING",
    )
    assert [(r.job_type, r.state) for r in live.runs] == [
        ("SQL_JOB", "COMPLETE"),
        ("SQL_JOB", "RUNNING"),
    ]
    done, running = live.runs
    assert [(d.namespace, d.name) for d in done.outputs] == [
        ("file", "/data/spark-exp/data/sigkill_out")
    ]
    assert done.counters == Counters(1000, 1000, 0, 4977, 0)
    assert done.end_ms == 1795495613083
    assert running.end_ms is None
    translator.close(cause="driver_lost", time_ms=0, message="gone")
    final = translator.snapshot()
    assert final.application is not None
    assert (final.application.state, final.application.error) == ("FAIL", "gone")
    assert [r.state for r in final.runs] == ["COMPLETE", "FAIL"]


# -- run ids -------------------------------------------------------------------------------


def test_run_ids_are_deterministic_v7_layout() -> None:
    """Start ms in the first 48 bits, version 7, RFC variant, the rest from the key's hash."""
    first = runids.run_id(1795324430969, "local-1", None, "sql", 3)
    assert first == runids.run_id(1795324430969, "local-1", None, "sql", 3)
    parsed = uuid.UUID(first)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert runids.start_ms_of(first) == 1795324430969
    others = {
        runids.run_id(1795324430969, "local-1", None, "sql", 4),
        runids.run_id(1795324430969, "local-1", "1", "sql", 3),
        runids.run_id(1795324430969, "local-2", None, "sql", 3),
        runids.run_id(1795324430969, "local-1", None, "rdd", 3),
    }
    assert first not in others and len(others) == 4
    assert runids.start_ms_of(runids.run_id(-5, "a", None, "application")) == 0
    assert runids.start_ms_of(runids.run_id(1 << 60, "a", None, "application")) == (1 << 48) - 1


def test_application_run_id_comes_from_its_start() -> None:
    """The application's run id is the v7 id of its ApplicationStart time and App ID."""
    _, events = translate("success")
    assert events[0]["run"]["runId"] == runids.run_id(
        1795495165597, "local-1795495169157", None, "application"
    )


# -- robustness ----------------------------------------------------------------------------


def test_facet_schema_urls_name_the_spec_files() -> None:
    """Every standard facet URL we emit is the `$id` of a spec file plus its `$defs` entry."""
    specs = [json.loads(path.read_text()) for path in (SPEC / "facets").glob("*.json")]
    ids = {spec["$id"]: spec["$defs"] for spec in specs}
    for url in (u for k, u in FACET_URLS.items() if not k.startswith("lineageAgent_")):
        base, _, fragment = url.partition("#/$defs/")
        assert fragment in ids[base]


def test_events_before_application_start_and_unknown_events_emit_nothing() -> None:
    """SQL and job events without an application, and unknown event types, are ignored."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    for event in load_events("success"):
        if event["Event"] != "SparkListenerApplicationStart":
            assert translator.feed(event) == []
    assert translator.feed({"Event": "SparkListenerFutureThing", "x": 1}) == []
    assert translator.close(cause="driver_lost", time_ms=1, message="m") == []
    assert translator.warnings == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
EVENT_NAMES = sorted({e["Event"] for log in SAMPLES for e in load_events(log)})
FIELDS = sorted({k for log in SAMPLES for e in load_events(log) for k in e if k != "Event"})
RANDOM_EVENTS = st.one_of(
    st.dictionaries(st.text(max_size=12), JSON, max_size=6),
    st.builds(
        lambda name, fields: {"Event": name, **fields},
        st.sampled_from([*EVENT_NAMES, "SparkListenerFutureThing", ""]),
        st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=6),
    ),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(RANDOM_EVENTS, max_size=8))
def test_feed_never_raises_on_random_dicts(batch: list[dict[str, Any]]) -> None:
    """Random dicts with real event and field names never raise; what they emit validates."""
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", emit_empty_executions=True, running_interval_ms=1)
    )
    start = [e for e in load_events("success") if e["Event"] == "SparkListenerApplicationStart"]
    events = translator.feed(start[0])
    for event in batch:
        events += translator.feed(event)
    events += translator.close(cause="driver_lost", time_ms=0, message="gone")
    assert not [w for w in translator.warnings if w.startswith("internal error")]
    for event in events:
        validate_run_event(event)


ODD_VALUES: tuple[Any, ...] = (None, "x", -1, [], {"x": 1})
NESTED = (
    "Stage Info",
    "Task End Reason",
    "Task Info",
    "Job Result",
    "Exception",
    "Properties",
    "sparkPlanInfo",
    "Spark Properties",
)


def _variants(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Copies of an event with one field deleted or set to an odd value, at the top level
    and inside the nested objects the translator reads."""
    out: list[dict[str, Any]] = []
    for key in event:
        if key == "Event":
            continue
        out.append({k: v for k, v in event.items() if k != key})
        out += [{**event, key: odd} for odd in ODD_VALUES]
        if key in NESTED and isinstance(event[key], Mapping):
            out += [{**event, key: inner} for inner in _variants(event[key])]
    return out


@pytest.mark.parametrize("log", LOGS)
def test_feed_survives_every_field_deleted_or_odd(log: str) -> None:
    """Every field of every real event deleted or made odd: no error, output validates."""
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", emit_empty_executions=True)
    )
    validated: set[bytes] = set()
    for line in load_lines(log):
        if not wanted(line):
            continue
        event = orjson.loads(line)
        for variant in _variants(event):
            clone = copy.deepcopy(translator)
            emitted = clone.feed(variant)
            assert not [w for w in clone.warnings if w.startswith("internal error")], variant
            for out in emitted:
                serialized = orjson.dumps(out)
                if serialized not in validated:  # most variants emit what others did
                    validate_run_event(out)
                    validated.add(serialized)
        translator.feed(event)


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Delete or replace one field somewhere in a copy of a real event."""
    if isinstance(value, dict) and value:
        key = data.draw(st.sampled_from(sorted(value)))
        action = data.draw(st.sampled_from(["delete", "replace", "descend"]))
        if action == "delete":
            del value[key]
        elif action == "replace" or depth > 6:
            value[key] = data.draw(JSON)
        else:
            value[key] = _mutate(value[key], data, depth + 1)
    elif isinstance(value, list) and value:
        index = data.draw(st.integers(0, len(value) - 1))
        value[index] = _mutate(value[index], data, depth + 1)
    else:
        value = data.draw(JSON)
    return value


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.data())
def test_feed_never_raises_on_mutated_real_events(log: str, data: st.DataObject) -> None:
    """Randomly mutated real logs: no error; run invariants and schema still hold."""
    wanted_events = [orjson.loads(line) for line in load_lines(log) if wanted(line)]
    chosen = data.draw(st.sets(st.integers(0, len(wanted_events) - 1), max_size=8))
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", emit_empty_executions=True, running_interval_ms=900)
    )
    events: list[Event] = []
    for index, event in enumerate(wanted_events):
        if index in chosen:
            event = _mutate(copy.deepcopy(event), data)
        events += translator.feed(event) if isinstance(event, Mapping) else []
    events += translator.close(cause="driver_lost", time_ms=0, message="gone")
    assert not [w for w in translator.warnings if w.startswith("internal error")]
    starts: set[str] = set()
    ended: set[str] = set()
    last_time: dict[str, str] = {}
    for event in events:
        run = event["run"]["runId"]
        assert run not in ended
        assert event["eventTime"] >= last_time.get(run, "")
        last_time[run] = event["eventTime"]
        if event["eventType"] == "START":
            assert run not in starts
            starts.add(run)
        else:
            assert run in starts
        if event["eventType"] in TERMINAL:
            ended.add(run)
        validate_run_event(event)
    assert starts == ended


def without(event: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """A deep copy of `event` with the field at `path` removed."""
    copied: dict[str, Any] = copy.deepcopy(dict(event))
    parent: Any = copied
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return copied


MALFORMED_CASES = [
    pytest.param(kind, path, id=f"{kind}-{'.'.join(path)}")
    for kind, fields in REQUIRED.items()
    for path, _ in fields
]


@pytest.mark.parametrize(("kind", "path"), MALFORMED_CASES)
def test_event_without_a_required_field_is_skipped_and_reported(
    kind: str, path: tuple[str, ...]
) -> None:
    """A real event of each kind the translator acts on, without one of its required fields,
    spliced into the success log mid-application: listed in `malformed`, nothing changes."""
    lines = load_lines("success")
    streaming = kind.startswith("StreamingQueryListener$")
    donors = lakehouse_events("stream_file_parquet") if streaming else map(orjson.loads, lines)
    if kind.endswith("QueryIdleEvent"):  # in no checked-in log; as PySpark 4.1.1 writes it
        donors = [idle_event("1ffa548f-f524-4580-9c17-075f22a48009", "2026-11-24T04:48:30.000Z")]
    real = next(e for e in donors if e["Event"].rsplit(".", 1)[-1] == kind)
    broken = without(real, path)
    _, clean = translate("success")
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    events: list[Event] = []
    for at, line in enumerate(lines):
        if at == 17:  # after the first SQL execution ended, before the other two started
            assert translator.feed(broken) == []
            assert translator.malformed == [(kind, ".".join(path))]
        if wanted(line):
            events += translator.feed(orjson.loads(line))
    assert events == clean
    assert translator.warnings == []
    assert translator.malformed == [(kind, ".".join(path))]


def test_wrong_types_of_required_fields_are_malformed_too() -> None:
    """A required field of another type than Spark writes counts as missing."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    for event in (
        {"Event": "SparkListenerJobEnd", "Job ID": "zero", "Job Result": 7},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": "1795495180000"},
        {"Event": "SparkListenerApplicationStart", "App ID": "", "Timestamp": 1},
        {"Event": "SparkListenerStageCompleted", "Stage Info": [1]},
        {"Event": "SparkListenerEnvironmentUpdate", "Spark Properties": "x"},
    ):
        assert translator.feed(event) == []
    assert translator.malformed == [
        ("SparkListenerJobEnd", "Job ID"),
        ("SparkListenerApplicationEnd", "Timestamp"),
        ("SparkListenerApplicationStart", "App ID"),
        ("SparkListenerStageCompleted", "Stage Info.Stage ID"),
        ("SparkListenerEnvironmentUpdate", "Spark Properties"),
    ]
