"""Real PySpark 4.3 pipelines, end to end: the exact runs, event types, datasets and schemas
the agent emits for each application of tests/sparkjobs/scenarios.py, and a live application
watched by the real daemon until its driver is killed."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from agent.spark.eventlog.discovery import scan
from agent.spark.plan.syntax.tables import TableIdent, default_table_location
from agent.spark.translate.options import TranslateOptions
from tests.applog import read_through
from tests.independent import public_key, verify
from tests.olschema import validate_run_event
from tests.pg import Postgres, postgres_skip_reason, running_postgres
from tests.spark_scenarios import (
    TERMINAL,
    Event,
    Scenarios,
    assert_run_shapes,
    daemon_config,
    datasets,
    events_in,
    fields,
    live_apps,
    outline,
    runs_of,
    session_scenarios,
    spark_daemon,
    wait_events,
)
from tests.test_steps import assert_one_step_per_name

pytestmark = pytest.mark.spark

INSERT = "execute_insert_into_hadoop_fs_relation_command"
CTAS = "execute_create_data_source_table_as_select_command"
SAVE = "execute_save_into_data_source_command"
BATCH_APPS = (
    "parquet",
    "csv",
    "json",
    "join",
    "union",
    "tables",
    "jdbc",
    "jdbc_redacted",
    "divide_by_zero",
    "cancelled",
    "spaces_literal",
    "single_file",
    "exit_code",
)


@pytest.fixture(scope="session")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    """Every batch scenario run once in one JVM, then read once by the agent."""
    return session_scenarios(tmp_path_factory)


def app_events(scenarios: Scenarios, key: str) -> tuple[str, list[Event]]:
    """The application's events, after the checks every application must pass."""
    app_id, events = scenarios.app(key)
    assert events, f"no events for {key} ({app_id})"
    for event in events:
        validate_run_event(event)
    assert_run_shapes(events)
    return app_id, events


def terminal(events: list[Event], job_suffix: str) -> Event:
    [event] = [
        e for e in events if e["job"]["name"].endswith(job_suffix) and e["eventType"] in TERMINAL
    ]
    return event


def file(scenarios: Scenarios, name: str) -> tuple[str, str]:
    return ("file", scenarios.path(name))


def warnings(scenarios: Scenarios, app_id: str) -> list[str]:
    """The translator's warnings logged for one application's log."""
    return [
        line["detail"]
        for line in scenarios.logs
        if line.get("event") == "translate_warning" and app_id in str(line.get("log"))
    ]


def raw_events(scenarios: Scenarios, app_id: str) -> list[dict[str, Any]]:
    """The application's Spark listener events as Spark wrote them (rolling, zstd)."""
    directory = scenarios.events_dir / f"eventlog_v2_{app_id}"
    lines: list[dict[str, Any]] = []
    for path in sorted(directory.glob("events_*"), key=lambda p: int(p.name.split("_")[1])):
        reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        text = reader.decompress(path.read_bytes()).decode()
        lines.extend(json.loads(line) for line in text.splitlines() if line)
    return lines


def test_every_application_uses_spark4_defaults(scenarios: Scenarios) -> None:
    """Every scenario logs with Spark 4's defaults (rolling, zstd, completed), except the one
    that turns rolling off and gets a single zstd file."""
    for key in BATCH_APPS:
        record = scenarios.manifest["apps"][key]
        if "skipped" in record:
            continue
        app_id = record["app_id"]
        if key == "single_file":
            assert (scenarios.events_dir / f"{app_id}.zstd").is_file()
            continue
        directory = scenarios.events_dir / f"eventlog_v2_{app_id}"
        assert sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) == [
            f"appstatus_{app_id}",
            f"events_1_{app_id}.zstd",
        ]


def test_every_run_has_the_application_as_parent(scenarios: Scenarios) -> None:
    """Each child run names its application's run as parent and root; the application's
    terminal event comes last and the agent emitted nothing for unknown applications."""
    app_ids = {r["app_id"] for r in scenarios.manifest["apps"].values() if "app_id" in r}
    assert set(scenarios.events) == app_ids
    for app_id, events in scenarios.events.items():
        app_run = events[0]["run"]["runId"]
        assert events[0]["job"]["facets"]["jobType"]["jobType"] == "APPLICATION"
        assert events[-1]["run"]["runId"] == app_run, app_id
        for event in events:
            if event["run"]["runId"] == app_run:
                assert "parent" not in event["run"]["facets"]
                continue
            parent = event["run"]["facets"]["parent"]
            assert parent["run"]["runId"] == app_run
            assert parent["job"] == {"namespace": "spark", "name": events[0]["job"]["name"]}
            assert parent["root"]["run"]["runId"] == app_run


def test_parquet_write_then_read(scenarios: Scenarios) -> None:
    """A parquet write, then a filtered read of it written as parquet: two SQL runs with
    the paths and the full schemas."""
    _, events = app_events(scenarios, "parquet")
    assert outline(events, "scenario_parquet") == [
        ("START", ""),
        ("START", f"{INSERT}.data_parquet_in"),
        ("COMPLETE", f"{INSERT}.data_parquet_in"),
        ("START", f"{INSERT}.data_parquet_out"),
        ("COMPLETE", f"{INSERT}.data_parquet_out"),
        ("COMPLETE", ""),
    ]
    schema = [("id", "long"), ("bucket", "long"), ("label", "string")]
    write = terminal(events, "data_parquet_in")
    assert datasets(write, "inputs") == []
    assert datasets(write, "outputs") == [file(scenarios, "parquet_in")]
    assert fields(write["outputs"][0]) == schema
    stats = write["outputs"][0]["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 100
    read = terminal(events, "data_parquet_out")
    assert datasets(read, "inputs") == [file(scenarios, "parquet_in")]
    assert datasets(read, "outputs") == [file(scenarios, "parquet_out")]
    assert fields(read["inputs"][0]) == schema
    assert fields(read["outputs"][0]) == schema
    assert read["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 20
    counters = read["run"]["facets"]["lineageAgent_run"]
    assert counters["recordsOut"] == 20
    assert counters["failedTasks"] == 0


def test_csv_read_and_write(scenarios: Scenarios) -> None:
    """A CSV read with header and schema inference, two columns written as CSV: one run.
    Spark reads the file as text first (header line, then inference), at the reader's call
    site: those executions are Spark's own, no runs."""
    _, events = app_events(scenarios, "csv")
    assert outline(events, "scenario_csv") == [
        ("START", ""),
        ("START", f"{INSERT}.data_csv_out"),
        ("COMPLETE", f"{INSERT}.data_csv_out"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, "data_csv_out")
    assert datasets(write, "inputs") == [file(scenarios, "people.csv")]
    assert datasets(write, "outputs") == [file(scenarios, "csv_out")]
    assert fields(write["inputs"][0]) == [("name", "string"), ("age", "integer")]
    assert fields(write["outputs"][0]) == [("name", "string"), ("age", "integer")]


def test_json_read_and_write(scenarios: Scenarios) -> None:
    """A JSON read (inferred schema), filtered and projected, written as JSON: one run."""
    _, events = app_events(scenarios, "json")
    assert outline(events, "scenario_json") == [
        ("START", ""),
        ("START", f"{INSERT}.data_json_out"),
        ("COMPLETE", f"{INSERT}.data_json_out"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, "data_json_out")
    assert datasets(write, "inputs") == [file(scenarios, "events.json")]
    assert datasets(write, "outputs") == [file(scenarios, "json_out")]
    assert fields(write["inputs"][0]) == [("id", "long"), ("kind", "string"), ("score", "double")]
    assert fields(write["outputs"][0]) == [("id", "long"), ("kind", "string")]


def test_join_of_two_inputs(scenarios: Scenarios) -> None:
    """A join of a JSON and a CSV input written as parquet: one run with both inputs."""
    _, events = app_events(scenarios, "join")
    assert outline(events, "scenario_join") == [
        ("START", ""),
        ("START", f"{INSERT}.data_join_out"),
        ("COMPLETE", f"{INSERT}.data_join_out"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, "data_join_out")
    assert datasets(write, "inputs") == [
        file(scenarios, "orders.json"),
        file(scenarios, "customers.csv"),
    ]
    assert fields(write["inputs"][0]) == [
        ("amount", "double"),
        ("customer_id", "string"),
        ("order_id", "long"),
    ]
    assert fields(write["inputs"][1]) == [("customer_id", "string"), ("name", "string")]
    assert datasets(write, "outputs") == [file(scenarios, "join_out")]
    assert fields(write["outputs"][0]) == [
        ("order_id", "long"),
        ("name", "string"),
        ("amount", "double"),
    ]


def test_union_of_two_inputs(scenarios: Scenarios) -> None:
    """A union by name of a CSV and a JSON input written as JSON: both are inputs."""
    _, events = app_events(scenarios, "union")
    assert outline(events, "scenario_union") == [
        ("START", ""),
        ("START", f"{INSERT}.data_union_out"),
        ("COMPLETE", f"{INSERT}.data_union_out"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, "data_union_out")
    assert datasets(write, "inputs") == [
        file(scenarios, "people.csv"),
        file(scenarios, "people_new.json"),
    ]
    assert fields(write["inputs"][0]) == [("name", "string"), ("city", "string")]
    assert fields(write["inputs"][1]) == [("city", "string"), ("name", "string")]
    assert datasets(write, "outputs") == [file(scenarios, "union_out")]
    assert fields(write["outputs"][0]) == [("name", "string"), ("city", "string")]


def test_catalog_tables_ctas_insert_and_save_as_table(scenarios: Scenarios) -> None:
    """CTAS, INSERT INTO and saveAsTable: outputs at the tables' locations with the table as
    a symlink; the creating runs say CREATE; the insert does not."""
    _, events = app_events(scenarios, "tables")
    assert outline(events, "scenario_tables") == [
        ("START", ""),
        ("START", f"{CTAS}.default_sales"),
        ("COMPLETE", f"{CTAS}.default_sales"),
        ("START", f"{INSERT}.default_sales"),
        ("COMPLETE", f"{INSERT}.default_sales"),
        ("START", f"{CTAS}.default_big_sales"),
        ("COMPLETE", f"{CTAS}.default_big_sales"),
        ("COMPLETE", ""),
    ]
    warehouse = str(scenarios.warehouse)
    sales = ("file", default_table_location(warehouse, TableIdent("sales", "default")))
    big = ("file", default_table_location(warehouse, TableIdent("big_sales", "default")))
    schema = [("id", "long"), ("amount", "long")]

    def symlink(dataset: dict[str, Any]) -> list[dict[str, str]]:
        return list(dataset["facets"]["symlinks"]["identifiers"])

    def lifecycle(dataset: dict[str, Any]) -> str | None:
        facet = dataset["facets"].get("lifecycleStateChange")
        return facet["lifecycleStateChange"] if facet else None

    link = {"namespace": f"file:{warehouse}", "type": "TABLE"}
    ctas = terminal(events, f"{CTAS}.default_sales")
    assert datasets(ctas, "inputs") == []
    assert datasets(ctas, "outputs") == [sales]
    assert fields(ctas["outputs"][0]) == schema
    assert symlink(ctas["outputs"][0]) == [{**link, "name": "default.sales"}]
    assert lifecycle(ctas["outputs"][0]) == "CREATE"
    insert = terminal(events, f"{INSERT}.default_sales")
    assert datasets(insert, "outputs") == [sales]
    assert symlink(insert["outputs"][0]) == [{**link, "name": "default.sales"}]
    assert lifecycle(insert["outputs"][0]) is None
    assert insert["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    saved = terminal(events, f"{CTAS}.default_big_sales")
    assert datasets(saved, "inputs") == [sales]
    assert symlink(saved["inputs"][0]) == [{**link, "name": "default.sales"}]
    assert datasets(saved, "outputs") == [big]
    assert fields(saved["outputs"][0]) == schema
    assert symlink(saved["outputs"][0]) == [{**link, "name": "default.big_sales"}]
    assert lifecycle(saved["outputs"][0]) == "CREATE"


def test_jdbc_write_with_url_shown_and_read(scenarios: Scenarios) -> None:
    """With redaction of password keys only, a JDBC write names `postgres://host:port` and
    `database.schema.table`; the read of the same table after it (Spark logs only
    `JDBCRelation(table)`) takes the url the write showed, with its read schema and no
    warning."""
    app_id, events = app_events(scenarios, "jdbc")
    assert scenarios.postgres["orders_rows"] == 20  # the write really reached PostgreSQL
    assert outline(events, "scenario_jdbc") == [
        ("START", ""),
        ("START", f"{SAVE}.lineage_public_orders"),
        ("COMPLETE", f"{SAVE}.lineage_public_orders"),
        ("START", f"{INSERT}.data_jdbc_out"),
        ("COMPLETE", f"{INSERT}.data_jdbc_out"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, f"{SAVE}.lineage_public_orders")
    namespace = scenarios.postgres["namespace"]
    assert datasets(write, "outputs") == [(namespace, "lineage.public.orders")]
    source = write["outputs"][0]["facets"]["dataSource"]
    assert (source["name"], source["uri"]) == (namespace, namespace)
    assert "password" not in str(write) and "spark-secret-pw" not in str(write)
    read = terminal(events, f"{INSERT}.data_jdbc_out")
    assert datasets(read, "inputs") == [(namespace, "lineage.public.orders")]
    assert fields(read["inputs"][0]) == [("order_id", "long"), ("amount", "long")]
    assert datasets(read, "outputs") == [file(scenarios, "jdbc_out")]
    assert "spark-secret-pw" not in str(read)
    assert warnings(scenarios, app_id) == []


def test_jdbc_write_with_url_redacted(scenarios: Scenarios) -> None:
    """Under Spark's default redaction the JDBC url is `*********(redacted)`: the output is a
    dataset in namespace `unknown` named by the table, with the schema of the rows the save
    wrote, and a warning says why."""
    app_id, events = app_events(scenarios, "jdbc_redacted")
    assert scenarios.postgres["hidden_rows"] == 3
    assert outline(events, "scenario_jdbc_redacted") == [
        ("START", ""),
        ("START", f"{SAVE}.public_hidden"),
        ("COMPLETE", f"{SAVE}.public_hidden"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, f"{SAVE}.public_hidden")
    [output] = write["outputs"]
    assert (output["namespace"], output["name"]) == ("unknown", "public.hidden")
    assert output["facets"]["schema"]["fields"] == [{"name": "id", "type": "long"}]
    assert sorted(output["facets"]) == ["schema"]
    [warning] = warnings(scenarios, app_id)
    assert re.fullmatch(
        r"JDBC table public\.hidden is written, but its url is redacted in the event log "
        r"\(spark\.sql\.redaction\.options\.regex\) in execution \d+",
        warning,
    ), warning


def test_divide_by_zero_fails_the_run_and_the_application(scenarios: Scenarios) -> None:
    """A division by zero under ANSI fails the write's run with Spark's message and the
    stack trace; the application ends FAIL because its last execution failed."""
    record = scenarios.manifest["apps"]["divide_by_zero"]
    assert record["error"].startswith("ArithmeticException: [DIVIDE_BY_ZERO]")
    _, events = app_events(scenarios, "divide_by_zero")
    assert outline(events, "scenario_divide_by_zero") == [
        ("START", ""),
        ("START", f"{INSERT}.data_ratios"),
        ("FAIL", f"{INSERT}.data_ratios"),
        ("FAIL", ""),
    ]
    run = terminal(events, "data_ratios")
    assert datasets(run, "inputs") == [file(scenarios, "parquet_in")]
    assert datasets(run, "outputs") == [file(scenarios, "ratios")]
    error = run["run"]["facets"]["errorMessage"]
    assert error["message"].startswith(
        "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and "
        "return NULL instead."
    )
    assert error["programmingLanguage"] == "JAVA"
    assert "\tat org.apache.spark" in error["stackTrace"]
    app = events[-1]["run"]["facets"]["errorMessage"]
    assert app["message"] == error["message"]


def test_cancelled_job_group_aborts_the_run_only(scenarios: Scenarios) -> None:
    """A job group cancelled by the driver ends its SQL run ABORT with Spark's message; a
    user's cancellation is no failure, so the application COMPLETEs."""
    _, events = app_events(scenarios, "cancelled")
    assert outline(events, "scenario_cancelled") == [
        ("START", ""),
        ("START", f"{INSERT}.data_cancelled_out"),
        ("ABORT", f"{INSERT}.data_cancelled_out"),
        ("COMPLETE", ""),
    ]
    run = terminal(events, "data_cancelled_out")
    assert re.fullmatch(
        r"\[SPARK_JOB_CANCELLED\] Job \d+ cancelled part of cancelled job group scenario-group "
        r"SQLSTATE: XXKDA",
        run["run"]["facets"]["errorMessage"]["message"],
    )
    assert "errorMessage" not in events[-1]["run"]["facets"]


def test_a_literal_of_spaces_in_the_plan_replays_within_the_budget(scenarios: Scenarios) -> None:
    """A filter on a literal that holds a newline, a capital and 3,000 spaces: the plan
    description carries them as a line of their own. The log replays in well under two
    seconds of CPU time (Python's `re` took half a minute over that line) and names the
    parquet read and written, with their schemas."""
    app_id, events = app_events(scenarios, "spaces_literal")
    plans = [e for e in raw_events(scenarios, app_id) if "physicalPlanDescription" in e]
    assert any("\nA" + " " * 3000 + "x" in e["physicalPlanDescription"] for e in plans)
    [ref] = [r for r in scan(scenarios.events_dir) if app_id in r.key]
    began = time.thread_time()  # CPU time: a busy machine does not lengthen it
    replayed, _ = read_through(ref, TranslateOptions(namespace="spark"))
    seconds = time.thread_time() - began
    assert seconds < 2.0
    schema = [("id", "long"), ("bucket", "long"), ("label", "string")]
    for found in (events, replayed):
        assert outline(found, "scenario_spaces_literal") == [
            ("START", ""),
            ("START", f"{INSERT}.data_spaces_out"),
            ("COMPLETE", f"{INSERT}.data_spaces_out"),
            ("COMPLETE", ""),
        ]
        write = terminal(found, "data_spaces_out")
        assert datasets(write, "inputs") == [file(scenarios, "parquet_in")]
        assert datasets(write, "outputs") == [file(scenarios, "spaces_out")]
        assert fields(write["inputs"][0]) == schema
        assert fields(write["outputs"][0]) == schema


def test_single_file_layout(scenarios: Scenarios) -> None:
    """With rolling off, the single zstd file is followed like the rolling layout."""
    _, events = app_events(scenarios, "single_file")
    assert outline(events, "scenario_single_file") == [
        ("START", ""),
        ("START", f"{INSERT}.data_single_out"),
        ("COMPLETE", f"{INSERT}.data_single_out"),
        ("COMPLETE", ""),
    ]
    write = terminal(events, "data_single_out")
    assert fields(write["outputs"][0]) == [("id", "long"), ("square", "long")]


def test_job_names_are_unique_in_every_scenario(scenarios: Scenarios) -> None:
    """No two different steps of one scenario application share a job name, and no run is
    one of Spark's CSV or JSON schema-inference reads."""
    assert scenarios.events
    for events in scenarios.events.values():
        assert_one_step_per_name(events)
        names = {e["job"]["name"] for e in events}
        assert not any(n.endswith((".collect_limit", ".deserialize_to_object")) for n in names)


def test_python_exit_code_is_not_in_the_log(scenarios: Scenarios) -> None:
    """`sys.exit(3)` after work: the process exits 3 but Spark's shutdown hook writes
    ApplicationEnd with ExitCode 0, so the log cannot show it and the application COMPLETEs."""
    assert scenarios.exit_code == 3
    app_id, events = app_events(scenarios, "exit_code")
    [end] = [e for e in raw_events(scenarios, app_id) if e["Event"].endswith("ApplicationEnd")]
    assert end["ExitCode"] == 0
    assert outline(events, "scenario_exit_code") == [
        ("START", ""),
        ("START", f"{INSERT}.data_exit_out"),
        ("COMPLETE", f"{INSERT}.data_exit_out"),
        ("COMPLETE", ""),
    ]


def test_live_application_is_seen_while_it_runs_and_sigkill_fails_it(tmp_path: Path) -> None:
    """The real daemon emits the application's START and a SQL run's START while both run;
    after SIGKILL of the driver mid-SQL (no ApplicationEnd) and `stale_after` without a
    process holding the log, both runs end FAIL, signed and schema-valid, and the agent counts
    one application ended as driver_lost."""
    config = daemon_config(tmp_path / "agent", tmp_path / "events", stale_after="3s")
    out = tmp_path / "agent" / "lineage.jsonl"
    with live_apps(tmp_path, "scenario live") as apps:
        started = apps.started(1)
        # The daemon starts once the first event file exists. SparkSource._check_stale looks
        # for a process holding the files listed when the log was first found (`app.ref`):
        # found before Spark created events_1, an idle live driver is declared lost.
        with spark_daemon(config) as agent:
            wait_events(out, lambda ev: [e["eventType"] for e in ev] == ["START"])
            apps.send("hold held")
            apps.wait_file("holding-held")
            seen = wait_events(out, lambda ev: len(ev) == 2)
            assert apps.process.poll() is None  # still running, its tasks held
            assert [e["eventType"] for e in seen] == ["START", "START"]
            assert seen[1]["job"]["name"] == f"scenario_live.{INSERT}.data_held"
            apps.kill_driver(started["jvm_pid"])
            events = wait_events(out, lambda ev: len(ev) == 4)
            lost = agent.wait_log("driver_lost", app_id=started["app_id"])
            assert lost["runs_ended"] == 2
            ended = agent.scrape()  # what the LineageDriverLost alert reads
            assert ended["lineage_applications_ended_total{cause=driver_lost}"] == 1
            assert ended["lineage_applications_ended_total{cause=log_ended}"] == 0
        assert events_in(out) == events  # nothing more after the stop
    message = (
        "the driver is gone: the event log has not grown for 3s, no process holds it open, "
        "nothing listens on its driver port and its UI is off"
    )
    assert [(e["eventType"], e["job"]["name"]) for e in events[2:]] == [
        ("FAIL", f"scenario_live.{INSERT}.data_held"),
        ("FAIL", "scenario_live"),
    ]
    for event in events[2:]:
        assert event["run"]["facets"]["errorMessage"]["message"] == message
    assert list(runs_of(events)) == [events[0]["run"]["runId"], events[1]["run"]["runId"]]
    key = public_key(tmp_path / "agent" / "ed25519.key")
    for event in events:
        validate_run_event(event)
        verify(event, key)
    assert_run_shapes(events)


def test_postgres_server_is_loopback_only_and_leaves_nothing(tmp_path: Path) -> None:
    """The throwaway PostgreSQL listens on 127.0.0.1 only, takes the JDBC user's password
    (and refuses a wrong one) over TCP, and is gone with its directory after stop."""
    reason = postgres_skip_reason()
    if reason is not None:
        pytest.skip(reason)

    def login(server: Postgres, password: str) -> subprocess.CompletedProcess[str]:
        where = ["-h", "127.0.0.1", "-p", str(server.port), "-d", server.database, "-U"]
        return subprocess.run(
            [str(server.bindir / "psql"), *where, server.user, "-XAtc", "SELECT current_user"],
            env={**os.environ, "PGPASSWORD": password},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    with running_postgres() as server:
        assert server.psql("SHOW listen_addresses") == "127.0.0.1"
        assert login(server, server.password).stdout.strip() == server.user
        refused = login(server, "wrong")
        assert refused.returncode == 2
        assert f'password authentication failed for user "{server.user}"' in refused.stderr
        root, port = server.root, server.port
    assert not root.exists()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
