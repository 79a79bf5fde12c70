"""The verdict of `lineage-agent exec` in translation (pure) and in the state database: the
application of a run of exec waits at ApplicationEnd for it, and it decides the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from agent.service.control.client import request
from agent.spark.eventlog.discovery import scan
from agent.spark.follow.application import LOG_ENDED, ApplicationLog
from agent.spark.translate.facets.verdict import Verdict
from agent.spark.translate.listener import wanted
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from agent.state.db import StateDB
from tests.agentproc import cli
from tests.olschema import validate_run_event
from tests.spark_scenarios import daemon_config, spark_daemon, wait_events
from tests.test_plans import load_lines

Event = dict[str, Any]
EXEC_ID = "0123456789abcdef0123456789abcdef"
INSERT = "execute_insert_into_hadoop_fs_relation_command"
PARENT_RUN = "019a5f3e-1c2d-7e4f-8a9b-0c1d2e3f4a5b"
TAIL = 'Traceback (most recent call last):\n  File "job.py", line 9\nValueError: boom'


def with_properties(log: str, props: dict[str, str]) -> list[bytes]:
    """A sample log's lines with `props` added to its Spark properties."""
    lines = []
    for line in load_lines(log):
        if b'"Event":"SparkListenerEnvironmentUpdate"' in line[:64]:
            event = json.loads(line)
            event["Spark Properties"].update(props)
            line = json.dumps(event, separators=(",", ":")).encode()
        lines.append(line)
    return lines


def feed(lines: list[bytes], *, await_verdict: bool) -> tuple[ApplicationTranslator, list[Event]]:
    options = TranslateOptions(namespace="spark", await_verdict=await_verdict)
    translator = ApplicationTranslator(options)
    events: list[Event] = []
    for line in lines:
        if wanted(line):
            events += translator.feed(orjson.loads(line))
    return translator, events


def outline(events: list[Event]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["job"]["name"]) for e in events]


def test_application_of_exec_waits_at_its_end_for_the_verdict() -> None:
    """Every event but the application's terminal one comes, and waits."""
    translator, events = feed(
        with_properties("success", {"spark.lineageAgent.exec": EXEC_ID}), await_verdict=True
    )
    assert translator.exec_id == EXEC_ID
    assert translator.awaiting_verdict
    assert ("COMPLETE", "exp_success") not in outline(events)
    assert len(events) == 5
    # Closed while it waits (the log can give no more): it ends as Spark logged it.
    closed = translator.close(cause="driver_lost", time_ms=0, message="driver gone")
    assert outline(closed) == [("COMPLETE", "exp_success")]
    assert not translator.awaiting_verdict


def test_non_zero_verdict_fails_the_application() -> None:
    """Exit status 3 and the stderr tail make the application FAIL, whatever Spark logged."""
    translator, events = feed(
        with_properties("success", {"spark.lineageAgent.exec": EXEC_ID}), await_verdict=True
    )
    end = translator.settle(Verdict(3, None, TAIL, "uid 1000 (etl)"))
    assert outline(end) == [("FAIL", "exp_success")]
    error = end[0]["run"]["facets"]["errorMessage"]
    assert error["message"] == (
        "the command run by lineage-agent exec exited with status 3; the last lines of its "
        f"stderr:\n{TAIL}"
    )
    assert end[0]["eventTime"] == "2026-11-24T04:40:01.25Z"  # ApplicationEnd's time
    for event in events + end:
        validate_run_event(event)
    assert translator.settle(None) == []  # one terminal event only


def test_signal_verdict_names_the_signal() -> None:
    """A command killed by SIGKILL: FAIL that says so, with the shell's status 137."""
    translator, _ = feed(
        with_properties("success", {"spark.lineageAgent.exec": EXEC_ID}), await_verdict=True
    )
    (end,) = translator.settle(Verdict(137, "SIGKILL", "", "uid 0 (root)"))
    assert end["run"]["facets"]["errorMessage"]["message"] == (
        "the command run by lineage-agent exec was killed by SIGKILL (exit status 137)"
    )


def test_zero_verdict_outranks_a_failed_last_job() -> None:
    """The program exited 0, so the failed last job it dealt with does not fail it."""
    translator, _ = feed(
        with_properties("sql_failure", {"spark.lineageAgent.exec": EXEC_ID}), await_verdict=True
    )
    assert outline(translator.settle(Verdict(0, None, "", "uid 0 (root)"))) == [
        ("COMPLETE", "exp_sql_failure")
    ]


def test_no_verdict_ends_as_spark_logged_it() -> None:
    """Without a verdict (the wait ran out, or replay without waiting) the events are those
    of the log alone, byte for byte."""
    plain = feed(list(load_lines("sql_failure")), await_verdict=False)[1]
    lines = with_properties("sql_failure", {"spark.lineageAgent.exec": EXEC_ID})
    translator, held = feed(lines, await_verdict=True)
    assert held + translator.settle(None) == plain
    assert feed(lines, await_verdict=False)[1] == plain


def test_lost_driver_says_how_its_command_ended(tmp_path: Path) -> None:
    """A log that ends without ApplicationEnd (the driver was killed) ends the application FAIL;
    its command's verdict, when the state database has it, adds the exit status and stderr
    tail to the message, and its child runs fail with the plain message."""
    lines = with_properties("success", {"spark.lineageAgent.exec": EXEC_ID})
    cut = [line for line in lines if b'"Event":"SparkListenerApplicationEnd"' not in line[:64]]
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "local-1.inprogress").write_bytes(b"\n".join(cut) + b"\n")
    (ref,) = scan(logs)
    verdicts = {EXEC_ID: Verdict(137, "SIGKILL", TAIL, "uid 0 (root)")}
    for lookup, told in ((verdicts.get, True), (lambda _: None, False)):
        app_log = ApplicationLog(
            ref,
            TranslateOptions(namespace="spark", await_verdict=True),
            max_line_bytes=1 << 20,
            verdict_lookup=lookup,
        )
        app_log.feed(app_log.read())
        ended = app_log.end(cause="driver_lost", message=LOG_ENDED)
        app_log.close()
        (end,) = [e for e in ended if e["job"]["name"] == "exp_success"]
        assert end["eventType"] == "FAIL"
        message = end["run"]["facets"]["errorMessage"]["message"]
        if told:
            assert message == (
                f"{LOG_ENDED}; the command run by lineage-agent exec was killed by SIGKILL "
                f"(exit status 137); the last lines of its stderr:\n{TAIL}"
            )
        else:
            assert message == LOG_ENDED
        for event in ended:
            validate_run_event(event)
            if event is not end:
                assert event["run"]["facets"]["errorMessage"]["message"] == LOG_ENDED


def test_parent_from_the_schedulers_environment() -> None:
    """`spark.lineageAgent.parent` (Airflow's namespace/job/runId) is the application's
    parent and the root of every run; `spark.openlineage.parent*` outranks it."""
    props = {"spark.lineageAgent.parent": f"airflow/dag.task/{PARENT_RUN}"}
    _, events = feed(with_properties("success", props), await_verdict=False)
    parent = events[0]["run"]["facets"]["parent"]
    assert {k: v for k, v in parent.items() if not k.startswith("_")} == {
        "job": {"namespace": "airflow", "name": "dag.task"},
        "run": {"runId": PARENT_RUN},
        "root": {"job": {"namespace": "airflow", "name": "dag.task"}, "run": {"runId": PARENT_RUN}},
    }
    assert events[1]["run"]["facets"]["parent"]["root"] == parent["root"]
    theirs = {
        "spark.openlineage.parentJobNamespace": "sched",
        "spark.openlineage.parentJobName": "job",
        "spark.openlineage.parentRunId": "019a5f3e-0000-7000-8000-000000000002",
    }
    _, events = feed(with_properties("success", {**props, **theirs}), await_verdict=False)
    assert events[0]["run"]["facets"]["parent"]["job"] == {"namespace": "sched", "name": "job"}
    bad = {"spark.lineageAgent.parent": "airflow/dag.task"}  # not namespace/job/runId
    _, events = feed(with_properties("success", bad), await_verdict=False)
    assert "parent" not in events[0]["run"]["facets"]


def test_state_keeps_the_first_verdict_across_reopen(tmp_path: Path) -> None:
    """A verdict waits in the state database, across a restart; a repeat does not replace it."""
    state = StateDB(tmp_path)
    assert state.verdict(EXEC_ID) is None
    assert state.record_verdict(EXEC_ID, 3, None, TAIL, "uid 1000 (etl)")
    assert not state.record_verdict(EXEC_ID, 0, None, "", "uid 1000 (etl)")
    state.close()
    state = StateDB(tmp_path)
    assert state.verdict(EXEC_ID) == (3, None, TAIL, "uid 1000 (etl)")
    state.close()


def test_daemon_applies_a_verdict_that_came_before_the_log(tmp_path: Path) -> None:
    """The real daemon: a verdict reported before its application's log appears waits in the
    state database, across a restart, and ends that application FAIL; an application whose
    verdict never comes ends as Spark logged it after `spark.exec_verdict_wait`, and says so
    in the log."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    config = daemon_config(tmp_path / "agent", events_dir, exec_verdict_wait="1s")
    out = tmp_path / "agent" / "lineage.jsonl"
    socket = str(tmp_path / "agent" / "control.sock")
    late = "fedcba9876543210fedcba9876543210"
    with spark_daemon(config) as agent:
        bad = request(socket, {"command": "exec_end", "exec_id": "x", "status": 1})
        assert bad == {
            "ok": False,
            "error": "exec_id: expected the 32 hex digits `lineage-agent exec` made",
        }
        bad = request(socket, {"command": "exec_end", "exec_id": EXEC_ID, "status": 256})
        assert bad == {
            "ok": False,
            "error": "status: expected an exit status from 0 to 255, got 256",
        }
        answer = request(
            socket,
            {"command": "exec_end", "exec_id": EXEC_ID, "status": 3, "stderr_tail": TAIL},
        )
        assert answer == {"ok": True, "exec_id": EXEC_ID, "recorded": True, "applications": []}
    # The agent restarts before the log appears: the verdict waits in the state database.
    with spark_daemon(config) as agent:
        for log, exec_id in (("success", EXEC_ID), ("sql_failure", late)):
            lines = with_properties(log, {"spark.lineageAgent.exec": exec_id})
            staged = tmp_path / log
            staged.write_bytes(b"\n".join(lines) + b"\n")
            app_id = json.loads(next(x for x in lines if b"ApplicationStart" in x[:64]))["App ID"]
            staged.rename(events_dir / app_id)
        events = wait_events(
            out,
            lambda ev: {("FAIL", "exp_success"), ("FAIL", "exp_sql_failure")} <= set(outline(ev)),
        )
        agent.wait_log("exec_verdict_missing", exec_id=late)
    success = next(
        e for e in events if e["job"]["name"] == "exp_success" and e["eventType"] == "FAIL"
    )
    assert success["run"]["facets"]["errorMessage"]["message"] == (
        "the command run by lineage-agent exec exited with status 3; the last lines of its "
        f"stderr:\n{TAIL}"
    )
    failed = next(
        e for e in events if e["job"]["name"] == "exp_sql_failure" and e["eventType"] == "FAIL"
    )
    assert failed["run"]["facets"]["errorMessage"]["message"].startswith("[PYTHON_EXCEPTION]")
    for event in events:
        validate_run_event(event)


def test_status_and_describe_show_the_exec_run_and_its_wait(tmp_path: Path) -> None:
    """The real daemon holds an application of `exec` at its end; `status` and `describe`
    name the exec id and say the end waits for the verdict, which then ends it."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    config = daemon_config(tmp_path / "agent", events_dir, exec_verdict_wait="120s")
    out = tmp_path / "agent" / "lineage.jsonl"
    socket = str(tmp_path / "agent" / "control.sock")
    with spark_daemon(config) as agent:
        lines = with_properties("success", {"spark.lineageAgent.exec": EXEC_ID})
        app_id = json.loads(next(x for x in lines if b"ApplicationStart" in x[:64]))["App ID"]
        (tmp_path / "staged").write_bytes(b"\n".join(lines) + b"\n")
        (tmp_path / "staged").rename(events_dir / app_id)
        agent.wait_log("eventlog_followed")
        wait_events(out, lambda ev: len(ev) == 5)  # all but the application's end
        status = cli("status", "--config", str(config), check=True).stdout
        (row,) = [line for line in status.splitlines() if line.startswith(app_id)]
        assert row.split()[-1] == EXEC_ID
        described = cli("describe", app_id, "--config", str(config), check=True).stdout
        assert (
            f"run by lineage-agent exec {EXEC_ID}; its end waits for the command's verdict"
            in described.splitlines()
        )
        request(socket, {"command": "exec_end", "exec_id": EXEC_ID, "status": 0})
        events = wait_events(out, lambda ev: ("COMPLETE", "exp_success") in outline(ev))
    assert len(events) == 6
