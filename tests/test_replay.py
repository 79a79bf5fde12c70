"""`lineage-agent replay` over real event logs: files, summary, JSON, exit codes, sending."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pty
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from prometheus_client import CollectorRegistry

from agent.commands.replay import replay
from agent.commands.replay_report import AppResult
from agent.config.model import SparkConfig
from agent.errors import ReplayError
from agent.spark.follow.application import LOG_ENDED
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.agentproc import keygen
from tests.collector import Collector
from tests.independent import public_key, verify
from tests.olschema import validate_run_event
from tests.samples import sample_bytes, write_sample
from tests.spark_logs import LAYOUTS, SparkLogs, codec_params
from tests.spark_scenarios import source_running

ROOT = Path(__file__).resolve().parents[1]
SUCCESS = "local-1795495169157"
SQL_FAILURE = "local-1795495213908"
CANCELLED = "local-1795495273829"
SIGKILL = "local-1795495584857"
TIMEOUT = 120


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signing key made with `lineage-agent keygen`."""
    return keygen(tmp_path_factory.mktemp("key"))


@pytest.fixture(scope="module")
def public(key: Path) -> Ed25519PublicKey:
    return public_key(key)


def sample(directory: Path, name: str, spark_name: str) -> Path:
    """Write a sample log (`success.jsonl`, ...) into `directory` under a name Spark would
    give it."""
    directory.mkdir(parents=True, exist_ok=True)
    return write_sample(name.removesuffix(".jsonl"), directory / spark_name)


def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`lineage-agent replay ARGS` as a child process."""
    return subprocess.run(
        [sys.executable, "-m", "agent", "replay", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=cwd,
    )


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def config_file(directory: Path, key: Path, lineage: dict[str, Any]) -> Path:
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump({"lineage": lineage, "signing": {"key_path": str(key)}}))
    return path


# -- output files ----------------------------------------------------------------------------------


def test_output_file_holds_signed_valid_events(
    tmp_path: Path, key: Path, public: Ed25519PublicKey
) -> None:
    """One `<app_id>.jsonl` per application; every line verifies and validates."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    result = run(log, "--key", key, "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == [f"{SUCCESS}.jsonl"]
    events = [json.loads(line) for line in lines(tmp_path / "out" / f"{SUCCESS}.jsonl")]
    assert [(e["eventType"], e["job"]["name"].split(".")[-1]) for e in events] == [
        ("START", "exp_success"),
        ("START", "data_success_parquet"),
        ("COMPLETE", "data_success_parquet"),
        ("START", "data_success_agg_json"),
        ("COMPLETE", "data_success_agg_json"),
        ("COMPLETE", "exp_success"),
    ]
    for event in events:
        verify(event, public)
        validate_run_event(event)
        assert event["job"]["namespace"] == "spark"


def test_reruns_are_byte_identical(tmp_path: Path, key: Path) -> None:
    """Replaying the same logs twice writes byte-identical files."""
    logs = tmp_path / "logs"
    sample(logs, "sql_failure.jsonl", "local-2")
    sample(logs, "sigkill.jsonl", "local-3")  # ended at the log's mtime: still identical
    for out in ("a", "b"):
        assert run(logs, "--key", key, "--output-dir", tmp_path / out).returncode == 1
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == [f"{SQL_FAILURE}.jsonl", f"{SIGKILL}.jsonl"]
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_existing_output_file_is_not_overwritten(tmp_path: Path, key: Path) -> None:
    """An output file that exists is left alone, named in the report, and exits 2."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    existing = tmp_path / "out" / f"{SUCCESS}.jsonl"
    existing.parent.mkdir()
    existing.write_bytes(b"keep me\n")
    result = run(log, "--key", key, "--output-dir", tmp_path / "out")
    assert result.returncode == 2
    assert existing.read_bytes() == b"keep me\n"
    assert f"error: {log}: refusing to overwrite existing file {existing}\n" in result.stdout
    assert result.stdout.endswith(
        "1 application(s), 3 run(s), 6 event(s): incomplete: 1 error(s)\n"
    )


# -- summary, JSON, exit codes ---------------------------------------------------------------------


def test_summary_table(tmp_path: Path, key: Path) -> None:
    """A finished successful application: the table and the verdict, exit 0."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    result = run(log, "--key", key)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "app id               name         runs  state     events  failed/aborted  log\n"
        "-------------------  -----------  ----  --------  ------  --------------  --------\n"
        f"{SUCCESS}  exp-success  3     COMPLETE  6       0               complete\n"
        "\n"
        "1 application(s), 3 run(s), 6 event(s): passed\n"
    )


def test_failed_runs_exit_1_and_are_listed(tmp_path: Path, key: Path) -> None:
    """FAIL runs exit 1 and are listed with the line of their error that names it."""
    log = sample(tmp_path / "logs", "sql_failure.jsonl", "local-2")
    result = run(log, "--key", key)
    assert result.returncode == 1
    write = "exp_sql_failure.execute_insert_into_hadoop_fs_relation_command"
    python = "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: "
    assert result.stdout.splitlines()[2:] == [
        f"{SQL_FAILURE}  exp-sql_failure  4     FAIL   8       3               complete",
        "",
        f"FAIL   {SQL_FAILURE}  exp_sql_failure: {python}"
        "ZeroDivisionError: integer division or modulo by zero",
        f"FAIL   {SQL_FAILURE}  {write}.data_fail_out: {python}ValueError: boom from udf 2",
        f"FAIL   {SQL_FAILURE}  {write}.data_exists: [PATH_ALREADY_EXISTS] Path "
        'file:/data/spark-exp/data/exists already exists. Set mode as "overwrite" to '
        "overwrite the existing path. SQLSTATE: 42K04",
        "",
        "1 application(s), 4 run(s), 8 event(s): failed: 3 run(s) ended FAIL or ABORT",
    ]


def test_aborted_application_exits_1(tmp_path: Path, key: Path) -> None:
    """An application the translator ends ABORT (work cancelled at shutdown) exits 1."""
    log = sample(tmp_path / "logs", "cancelled.jsonl", "local-4")
    result = run(log, "--key", key)
    assert result.returncode == 1
    assert (
        f"ABORT  {CANCELLED}  exp_cancelled: the application ended with jobs still running: "
        "Spark cancels them because SparkContext was shut down\n"
    ) in result.stdout


def test_json_report(tmp_path: Path, key: Path) -> None:
    """`--json` gives runs, states and the SHA-256 of every signed line written."""
    logs = tmp_path / "logs"
    sample(logs, "success.jsonl", "local-1")
    sample(logs, "cancelled.jsonl", "local-4")
    result = run(logs, "--key", key, "--json", "--output-dir", tmp_path / "out")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert (report["passed"], report["exit_code"], report["errors"]) == (False, 1, [])
    assert report["deliveries"] == []
    success, cancelled = report["applications"]
    assert (success["app_id"], success["name"], success["state"]) == (
        SUCCESS,
        "exp-success",
        "COMPLETE",
    )
    assert (success["complete"], success["events"], success["failed_runs"]) == (True, 6, 0)
    assert success["output"] == str(tmp_path / "out" / f"{SUCCESS}.jsonl")
    assert [r["state"] for r in success["runs"]] == ["COMPLETE"] * 3
    assert [r["job_type"] for r in success["runs"]] == ["APPLICATION", "SQL_JOB", "SQL_JOB"]
    written = lines(tmp_path / "out" / f"{SUCCESS}.jsonl")
    assert success["digests"] == [hashlib.sha256(line).hexdigest() for line in written]
    assert {r["run_id"] for r in success["runs"]} == {
        json.loads(line)["run"]["runId"] for line in written
    }
    assert cancelled["runs"] == [
        {
            "job_name": "exp_cancelled",
            "run_id": cancelled["runs"][0]["run_id"],
            "job_type": "APPLICATION",
            "state": "ABORT",
            "error": "the application ended with jobs still running: Spark cancels them "
            "because SparkContext was shut down",
        }
    ]


def test_in_progress_log_reports_running_runs(tmp_path: Path, key: Path) -> None:
    """An in-progress log is read as far as it goes; its open runs stay RUNNING, exit 0."""
    log = sample(tmp_path / "logs", "sigkill.jsonl", "local-3.inprogress")
    result = run(log, "--key", key, "--json", "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stdout
    [app] = json.loads(result.stdout)["applications"]
    assert (app["complete"], app["state"]) == (False, "RUNNING")
    assert [(r["job_name"].split(".")[-1], r["state"]) for r in app["runs"]] == [
        ("exp_sigkill", "RUNNING"),
        ("data_sigkill_out", "COMPLETE"),
        ("data_sigkill_long", "RUNNING"),
    ]
    events = [json.loads(line) for line in lines(tmp_path / "out" / f"{SIGKILL}.jsonl")]
    assert [e["eventType"] for e in events] == ["START", "START", "COMPLETE", "START"]
    text = run(log, "--key", key).stdout
    assert text.endswith(
        "1 application(s), 3 run(s), 4 event(s): passed (2 run(s) still running)\n"
    )
    assert f"{SIGKILL}  exp-sigkill  3     RUNNING  4       0               in progress" in text


def test_finished_log_without_application_end_fails(tmp_path: Path, key: Path) -> None:
    """The same log, finished: its open runs end FAIL as the daemon ends them, exit 1."""
    log = sample(tmp_path / "logs", "sigkill.jsonl", "local-3")
    result = run(log, "--key", key, "--json")
    assert result.returncode == 1
    [app] = json.loads(result.stdout)["applications"]
    assert [(r["state"], r["error"]) for r in app["runs"]] == [
        ("FAIL", LOG_ENDED),
        ("COMPLETE", None),
        ("FAIL", LOG_ENDED),
    ]


def test_directory_of_applications_each_once(tmp_path: Path, key: Path) -> None:
    """An event-log directory gives all its applications; one also named alone counts once."""
    logs = tmp_path / "logs"
    one = sample(logs, "success.jsonl", "local-1")
    sample(logs, "sql_failure.jsonl", "local-2")
    sample(logs, "sigkill.jsonl", "local-3.inprogress")
    result = run(logs, one, "--key", key, "--json")
    apps = json.loads(result.stdout)["applications"]
    assert [(a["app_id"], a["log"]) for a in apps] == [
        (SUCCESS, str(one)),
        (SQL_FAILURE, str(logs / "local-2")),
        (SIGKILL, str(logs / "local-3.inprogress")),
    ]


def test_namespace_option(tmp_path: Path, key: Path) -> None:
    """`--namespace` sets the job namespace of every run."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    run(log, "--key", key, "--namespace", "nightly", "--output-dir", tmp_path / "out")
    events = [json.loads(line) for line in lines(tmp_path / "out" / f"{SUCCESS}.jsonl")]
    assert {e["job"]["namespace"] for e in events} == {"nightly"}


def test_progress_line_on_a_terminal(tmp_path: Path, key: Path) -> None:
    """With stderr on a terminal a carriage-return progress line is drawn, then erased."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "agent", "replay", str(log), "--key", str(key)],
            stdout=subprocess.PIPE,
            stderr=terminal,
            timeout=TIMEOUT,
            check=False,
        )
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(controller)
    assert proc.returncode == 0
    size = log.stat().st_size / 1024 / 1024
    drawn = f"\rreplay: 1/1 logs, {size:.1f}/{size:.1f} MiB"
    assert drawn.encode() in seen
    assert seen.endswith(b"\r" + b" " * (len(drawn) - 1) + b"\r")


def test_help_lists_exit_codes() -> None:
    """`--help` documents the exit codes."""
    result = run("--help")
    assert result.returncode == 0
    assert (
        "exit status:\n"
        "  0   every run ended COMPLETE or is still running\n"
        "  1   a run ended FAIL or ABORT, or (--send) an event was dropped or unconfirmed\n"
        "  2   usage: a log that cannot be read, a missing or unusable key, an output file "
        "that exists\n"
        "  78  a configuration error in --config, or a transport that cannot start (EX_CONFIG)\n"
    ) in result.stdout


# -- usage and configuration errors ----------------------------------------------------------------


def test_missing_log_exits_2(tmp_path: Path, key: Path) -> None:
    """A LOG that does not exist is a usage error, before anything is written."""
    result = run(tmp_path / "nope", "--key", key, "--output-dir", tmp_path / "out")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"lineage-agent: {tmp_path / 'nope'}: No such file or directory\n"


def test_directory_without_logs_exits_2(tmp_path: Path, key: Path) -> None:
    """A directory with no event log in it is a usage error."""
    (tmp_path / "empty").mkdir()
    result = run(tmp_path / "empty", "--key", key)
    assert result.returncode == 2
    assert result.stderr == (
        f"lineage-agent: {tmp_path / 'empty'}: no Spark event logs in this directory\n"
    )


def test_unreadable_log_exits_2(tmp_path: Path, key: Path) -> None:
    """A file Spark would not have named (unknown codec) is reported and exits 2."""
    log = sample(tmp_path / "logs", "success.jsonl", "success.jsonl")
    result = run(log, "--key", key)
    assert result.returncode == 2
    assert f"error: {log}: unknown codec 'jsonl'\n" in result.stdout


def test_missing_key_exits_2(tmp_path: Path) -> None:
    """No key at all, or a key file that does not exist: usage errors."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    result = run(log)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "lineage-agent: no signing key: give --key PATH, or --config FILE with signing.key_path\n"
    )
    result = run(log, "--key", tmp_path / "absent.key")
    assert result.returncode == 2
    assert result.stderr == (
        f"lineage-agent: {tmp_path / 'absent.key'}: private key file does not exist\n"
    )


def test_send_without_config_exits_2(tmp_path: Path, key: Path) -> None:
    """`--send` without `--config` has no transports to send through."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    result = run(log, "--key", key, "--send")
    assert result.returncode == 2
    assert result.stderr == (
        "lineage-agent: --send needs --config FILE: the transports are configured there\n"
    )


def test_config_error_exits_78(tmp_path: Path, key: Path) -> None:
    """A config file with an unknown key is EX_CONFIG, the message naming file and line."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    config = tmp_path / "config.yaml"
    config.write_text("lineage:\n  queue_sise: 10\n")
    result = run(log, "--key", key, "--config", config)
    assert result.returncode == 78
    assert result.stderr.startswith(f"lineage-agent: {config}:2: lineage.queue_sise: ")


def test_key_and_namespace_from_config(tmp_path: Path, key: Path, public: Ed25519PublicKey) -> None:
    """Without `--key` the config's signing key signs; its lineage.namespace names jobs."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    config = config_file(tmp_path, key, {"namespace": "from-config"})
    assert run(log, "--config", config, "--output-dir", tmp_path / "out").returncode == 0
    for line in lines(tmp_path / "out" / f"{SUCCESS}.jsonl"):
        event = json.loads(line)
        verify(event, public)
        assert event["job"]["namespace"] == "from-config"


# -- sending ---------------------------------------------------------------------------------------


def test_send_to_collector(tmp_path: Path, key: Path, public: Ed25519PublicKey) -> None:
    """`--send` delivers every event to a real collector, schema-valid, the bytes reported."""
    logs = tmp_path / "logs"
    sample(logs, "success.jsonl", "local-1")
    sample(logs, "sql_failure.jsonl", "local-2")
    with Collector(validate=True) as collector:
        config = config_file(
            tmp_path, key, {"transport": "http", "http": {"endpoint": collector.url}}
        )
        result = run(logs, "--config", config, "--send", "--json")
        assert result.returncode == 1, result.stderr  # sql_failure has FAIL runs
        report = json.loads(result.stdout)
        assert report["deliveries"] == [
            {
                "transport": "http",
                "offered": 14,
                "delivered": 14,
                "dropped": 0,
                "dropped_by_reason": {},
                "unconfirmed": 0,
            }
        ]
        events = collector.wait_for(14)
        requests = collector.requests
    assert collector.invalid == []
    digests = [d for app in report["applications"] for d in app["digests"]]
    assert sorted(hashlib.sha256(r.content).hexdigest() for r in requests) == sorted(digests)
    for event in events:
        verify(event, public)


def test_send_counts_drops(tmp_path: Path, key: Path) -> None:
    """Events the collector refuses (and, retries off, no retry stores) are dropped, counted
    by reason, and exit 1."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    with Collector(503) as collector:
        http = {"endpoint": collector.url, "retry": {"total": 0}}
        config = config_file(tmp_path, key, {"transport": "http", "http": http})
        result = run(log, "--config", config, "--send")
    assert result.returncode == 1
    assert result.stdout.endswith(
        "sent through http: 0 delivered, 6 dropped (http_503 6)\n"
        "\n"
        "1 application(s), 3 run(s), 6 event(s): failed: 6 event(s) dropped\n"
    )


def test_send_waits_for_room_in_a_small_queue(tmp_path: Path, key: Path) -> None:
    """A queue smaller than the replay drops nothing: the file gets every event, in order."""
    logs = tmp_path / "logs"
    sample(logs, "success.jsonl", "local-1")
    sample(logs, "sql_failure.jsonl", "local-2")
    events_file = tmp_path / "sent" / "events.jsonl"
    config = config_file(
        tmp_path, key, {"transport": "file", "queue_size": 1, "file": {"path": str(events_file)}}
    )
    result = run(logs, "--config", config, "--send", "--json")
    report = json.loads(result.stdout)
    assert report["deliveries"][0]["delivered"] == 14
    digests = [d for app in report["applications"] for d in app["digests"]]
    assert [hashlib.sha256(line).hexdigest() for line in lines(events_file)] == digests


def test_transport_that_cannot_start_exits_78(tmp_path: Path, key: Path) -> None:
    """A bearer token missing from the environment stops `--send` before anything is read."""
    log = sample(tmp_path / "logs", "success.jsonl", "local-1")
    http = {
        "endpoint": "https://127.0.0.1:9/api/v1/lineage",
        "auth": {"type": "bearer", "token_env": "REPLAY_TEST_TOKEN_UNSET"},
    }
    config = config_file(tmp_path, key, {"transport": "http", "http": http})
    result = run(log, "--config", config, "--send")
    assert (result.returncode, result.stdout) == (78, "")
    assert result.stderr == (
        "lineage-agent: lineage.http.auth.token_env: environment variable "
        "REPLAY_TEST_TOKEN_UNSET is not set\n"
    )


# -- the Python function ---------------------------------------------------------------------------


def test_replay_function_unsigned(tmp_path: Path) -> None:
    """`replay` without a signer reports runs and digests of the unsigned event bytes."""
    log = sample(tmp_path / "logs", "sql_failure.jsonl", "local-2")
    report = replay([log], namespace="ns")
    [app] = report.applications
    assert not report.passed
    assert app.application is not None and app.application.state == "FAIL"
    assert [r.state for r in app.failed] == ["FAIL", "FAIL", "FAIL"]
    assert len(app.digests) == 8 and app.output is None and app.errors == ()
    assert report.runs[0].job_name == "exp_sql_failure"


def test_corrupt_line_is_skipped_with_a_warning(tmp_path: Path, key: Path) -> None:
    """A line that is not JSON is skipped and reported; the rest of the log still counts."""
    original = sample_bytes("success").splitlines(keepends=True)
    log = tmp_path / "logs" / "local-1"
    log.parent.mkdir()
    log.write_bytes(b"".join(original[:5]) + b"{not json\n" + b"".join(original[5:]))
    with pytest.raises(orjson.JSONDecodeError) as parse:
        orjson.loads(b"{not json")
    result = run(log, "--key", key)
    assert result.returncode == 0
    assert result.stdout.endswith(
        f"warning: {log}: 1 corrupt line(s) skipped; the first: {parse.value}\n"
        "\n"
        "1 application(s), 3 run(s), 6 event(s): passed\n"
    )


def test_malformed_event_is_skipped_with_a_warning(tmp_path: Path, key: Path) -> None:
    """An ApplicationEnd without a Timestamp is skipped and reported; it ends nothing."""
    original = sample_bytes("success").splitlines(keepends=True)
    log = tmp_path / "logs" / "local-1"
    log.parent.mkdir()
    end = b'{"Event":"SparkListenerApplicationEnd"}\n'
    log.write_bytes(b"".join(original[:6]) + end * 2 + b"".join(original[6:]))
    result = run(log, "--key", key)
    assert result.returncode == 0
    assert result.stdout.endswith(
        f"warning: {log}: 2 malformed event(s) skipped; the first: "
        "SparkListenerApplicationEnd without a valid Timestamp\n"
        "\n"
        "1 application(s), 3 run(s), 6 event(s): passed\n"
    )


def test_output_file_names() -> None:
    """Output files are `<app_id>[_<attempt>].jsonl`, with unsafe characters replaced."""
    app = AppResult("application_1700000000000_0001", "2", None, "log", True, (), ())
    assert app.file_name == "application_1700000000000_0001_2.jsonl"
    assert replace(app, app_id="../x y", attempt_id=None).file_name == "_x_y.jsonl"


def test_replay_function_missing_path(tmp_path: Path) -> None:
    """`replay` raises ReplayError naming a path that is not there."""
    with pytest.raises(ReplayError) as error:
        replay([tmp_path / "gone"], namespace="spark")
    assert str(error.value) == f"{tmp_path / 'gone'}: No such file or directory"


# -- Spark's other layouts and codecs --------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", codec_params())
def test_every_layout_and_codec(spark_logs: SparkLogs, layout: str, codec: str) -> None:
    """Compressed and rolling logs replay to the application and both SQL runs, COMPLETE."""
    report = replay([spark_logs.directory(layout, codec)], namespace="spark")
    [app] = report.applications
    assert (app.app_id, app.complete, app.errors) == (
        spark_logs.app_ids[f"{layout}-{codec}"],
        True,
        (),
    )
    assert [(r.job_type, r.state) for r in app.runs] == [
        ("APPLICATION", "COMPLETE"),
        ("SQL_JOB", "COMPLETE"),
        ("SQL_JOB", "COMPLETE"),
    ]
    assert report.passed and len(app.digests) == 6


@pytest.mark.spark
async def test_same_events_as_the_spark_source(spark_logs: SparkLogs, tmp_path: Path) -> None:
    """A rolled-over zstd log (named as its rolling directory) replays to exactly the events
    the daemon's Spark source emits for it."""
    source = SparkSource(
        SparkConfig(event_log_dirs=(str(spark_logs.multi),), poll_interval=0.1, replay_horizon=0),
        "spark",
        StateDB(tmp_path / "state"),
        Metrics(CollectorRegistry()),
    )
    async with source_running(source) as events, asyncio.timeout(60):
        while source._first_scan or source.apps:
            await asyncio.sleep(0.05)
    emitted = [orjson.dumps(e) for _, e in events]
    [rolling] = spark_logs.multi.glob("eventlog_v2_*")
    report = replay([rolling], namespace="spark")
    assert emitted
    assert list(report.applications[0].digests) == [hashlib.sha256(e).hexdigest() for e in emitted]
