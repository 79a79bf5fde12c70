"""`lineage-agent exec` around real PySpark programs, reporting to the real daemon: the
command's status passes through and decides its application's terminal state, with the
agent running, restarted meanwhile or down, and the scheduler's run becomes the parent."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agentproc import ROOT, assert_identity
from tests.independent import public_key, verify
from tests.olschema import validate_run_event
from tests.spark_logs import spark_env
from tests.spark_scenarios import (
    Event,
    assert_run_shapes,
    daemon_config,
    spark_daemon,
    wait_events,
)

pytestmark = pytest.mark.spark

JOB = ROOT / "tests" / "sparkjobs" / "exec_job.py"
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
INSERT = "execute_insert_into_hadoop_fs_relation_command"
PARENT_RUN = "019a5f3e-1c2d-7e4f-8a9b-0c1d2e3f4a5b"
ROOT_RUN = "019a5f3e-0000-7000-8000-000000000001"
PARENT_ID = f"airflow_ns/etl_dag.load_orders/{PARENT_RUN}"
ROOT_PARENT_ID = f"airflow_ns/etl_dag/{ROOT_RUN}"
RAISED = "RuntimeError: raise: failed after the Spark work"


@dataclass
class Setup:
    """One agent's config and where things go."""

    config: Path
    events: Path  # Spark's event-log directory
    lineage: Path  # the file transport's output
    work: Path

    def key_check(self, events: list[Event]) -> None:
        """Every event is schema-valid and carries a good signature."""
        key = public_key(self.work / "agent" / "ed25519.key")
        for event in events:
            validate_run_event(event)
            verify(event, key)


@dataclass
class Ran:
    """A finished `lineage-agent exec`."""

    status: int
    stdout: str
    stderr: str


def setup(tmp_path: Path) -> Setup:
    events = tmp_path / "events"
    events.mkdir()
    config = daemon_config(tmp_path / "agent", events, exec_verdict_wait="90s")
    return Setup(config, events, tmp_path / "agent" / "lineage.jsonl", tmp_path)


def start_exec(
    s: Setup,
    mode: str,
    *,
    retry_for: str = "0",
    env: dict[str, str] | None = None,
    launcher: str = sys.executable,
) -> subprocess.Popen[bytes]:
    """`lineage-agent exec -- python exec_job.py ... MODE` (or `spark-submit exec_job.py`),
    output to files under work/."""
    out = s.work / mode
    out.mkdir(exist_ok=True)
    command = [
        *(sys.executable, "-m", "agent", "exec", "--config", str(s.config)),
        *("--retry-for", retry_for, "--", launcher, str(JOB), str(s.events), str(out)),
        mode,
    ]
    with (s.work / f"{mode}.out").open("wb") as stdout, (s.work / f"{mode}.err").open("wb") as err:
        return subprocess.Popen(
            command, stdout=stdout, stderr=err, cwd=ROOT, env={**spark_env(), **(env or {})}
        )


def finish(s: Setup, proc: subprocess.Popen[bytes], mode: str) -> Ran:
    status = proc.wait(240)
    return Ran(
        status,
        (s.work / f"{mode}.out").read_text(errors="replace"),
        (s.work / f"{mode}.err").read_text(errors="replace"),
    )


def wait_path(path: Path, proc: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the program ended ({proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.1)


def ended(app: str) -> Callable[[list[Event]], bool]:
    """A predicate for wait_events: the application run `app` has its terminal event."""
    return lambda events: any(
        e["job"]["name"] == app and e["eventType"] in ("COMPLETE", "FAIL", "ABORT") for e in events
    )


def terminal(events: list[Event], job: str) -> Event:
    (event,) = [
        e
        for e in events
        if e["job"]["name"] == job and e["eventType"] in ("COMPLETE", "FAIL", "ABORT")
    ]
    return event


def error_message(event: Event) -> str:
    return str(event["run"]["facets"]["errorMessage"]["message"])


@pytest.fixture(scope="module")
def succeeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Setup, Ran, list[Event]]:
    """A program that succeeds, run by exec under a scheduler's OpenLineage variables."""
    s = setup(tmp_path_factory.mktemp("exec-ok"))
    with spark_daemon(s.config) as agent:
        env = {"OPENLINEAGE_PARENT_ID": PARENT_ID, "OPENLINEAGE_ROOT_PARENT_ID": ROOT_PARENT_ID}
        ran = finish(s, start_exec(s, "ok", env=env), "ok")
        events = wait_events(s.lineage, ended("exec_ok"))
        agent.wait_log("exec_verdict", status=0)
        assert_identity(agent.scrape(), "file")
    return s, ran, events


def test_program_that_succeeds_completes(succeeded: tuple[Setup, Ran, list[Event]]) -> None:
    """Exit 0 passes through, the program's stdout too; its runs end COMPLETE, signed."""
    s, ran, events = succeeded
    assert ran.status == 0, ran.stderr
    assert f"wrote {s.work}/ok/numbers" in ran.stdout
    assert "lineage-agent" not in ran.stderr  # exec said nothing of its own
    assert terminal(events, "exec_ok")["eventType"] == "COMPLETE"
    assert terminal(events, f"exec_ok.{INSERT}.ok_numbers")["eventType"] == "COMPLETE"
    assert_run_shapes(events)
    s.key_check(events)


def test_parent_facets_from_the_schedulers_environment(
    succeeded: tuple[Setup, Ran, list[Event]],
) -> None:
    """OPENLINEAGE_PARENT_ID / OPENLINEAGE_ROOT_PARENT_ID become the application's `parent`
    and `root`; its child runs keep the application as parent and the scheduler's root."""
    _, _, events = succeeded
    app = next(e for e in events if e["job"]["name"] == "exec_ok")
    parent = app["run"]["facets"]["parent"]
    assert parent["job"] == {"namespace": "airflow_ns", "name": "etl_dag.load_orders"}
    assert parent["run"] == {"runId": PARENT_RUN}
    assert parent["root"] == {
        "job": {"namespace": "airflow_ns", "name": "etl_dag"},
        "run": {"runId": ROOT_RUN},
    }
    child = next(e for e in events if e["job"]["name"] == f"exec_ok.{INSERT}.ok_numbers")
    assert child["run"]["facets"]["parent"]["run"] == {"runId": app["run"]["runId"]}
    assert child["run"]["facets"]["parent"]["root"] == parent["root"]


@pytest.mark.parametrize("launcher", ["python", "spark-submit"])
def test_program_that_raises_after_its_work_fails(tmp_path: Path, launcher: str) -> None:
    """PySpark logs ExitCode 0 after the exception, yet the application ends FAIL with the
    exit status and the end of stderr, and the status passes through; the same under
    `python job.py` and `spark-submit job.py`. spark-submit prints the Python program's
    traceback on its stdout, so there stderr's last lines are the JVM's shutdown log."""
    s = setup(tmp_path)
    program = sys.executable if launcher == "python" else str(SPARK_SUBMIT)
    with spark_daemon(s.config):
        ran = finish(s, start_exec(s, "raise", launcher=program), "raise")
        events = wait_events(s.lineage, ended("exec_raise"))
    assert ran.status == 1
    app = terminal(events, "exec_raise")
    assert app["eventType"] == "FAIL"
    message = error_message(app)
    assert message.startswith(
        "the command run by lineage-agent exec exited with status 1; the last lines of its "
        "stderr:\n"
    )
    if launcher == "python":
        assert RAISED in ran.stderr
        assert RAISED in message
    else:
        assert RAISED in ran.stdout
        assert "Successfully stopped SparkContext" in message
    # The tail as the command wrote it, less Spark's console progress bar and its returns.
    assert "[Stage " not in message and "\r" not in message
    assert message.endswith(ran.stderr.rstrip()[-200:])
    assert terminal(events, f"exec_raise.{INSERT}.raise_numbers")["eventType"] == "COMPLETE"
    assert_run_shapes(events)
    s.key_check(events)


def test_program_killed_by_a_signal_fails(tmp_path: Path) -> None:
    """SIGTERM to exec reaches the program; exec exits 143 like a shell, and the
    application ends FAIL saying which signal killed the command."""
    s = setup(tmp_path)
    with spark_daemon(s.config):
        proc = start_exec(s, "sleep")
        wait_path(s.work / "sleep" / "holding", proc)
        proc.send_signal(signal.SIGTERM)
        ran = finish(s, proc, "sleep")
        events = wait_events(s.lineage, ended("exec_sleep"))
    assert ran.status == 128 + signal.SIGTERM
    app = terminal(events, "exec_sleep")
    assert app["eventType"] == "FAIL"
    assert error_message(app).startswith(
        "the command run by lineage-agent exec was killed by SIGTERM (exit status 143)"
    )
    assert_run_shapes(events)
    s.key_check(events)


def test_agent_restarted_while_the_program_runs(tmp_path: Path) -> None:
    """The agent is killed (SIGKILL) and started again while the program runs; the verdict
    reaches the new one and every run still has one START and one terminal event."""
    s = setup(tmp_path)
    with spark_daemon(s.config) as first:
        proc = start_exec(s, "hold")
        wait_path(s.work / "hold" / "holding", proc)
        # The write ended before `holding`: the kill waits for its COMPLETE to be written, so
        # that it lands while the program holds, not inside the one batch a SIGKILL may lose
        # between its claim and the spool (docs/reliability.md, at-most-once under SIGKILL).
        wait_events(
            s.lineage,
            lambda ev: any(
                e["job"]["name"].startswith("exec_hold.") and e["eventType"] == "COMPLETE"
                for e in ev
            ),
        )
        first.proc.kill()
        first.proc.wait(30)
    with spark_daemon(s.config) as second:
        (s.work / "hold" / "go").touch()
        ran = finish(s, proc, "hold")
        events = wait_events(s.lineage, ended("exec_hold"))
        second.wait_log("exec_verdict", status=1)
    assert ran.status == 1
    app = terminal(events, "exec_hold")
    assert app["eventType"] == "FAIL"
    assert "RuntimeError: hold: failed after the Spark work" in error_message(app)
    assert_run_shapes(events)
    s.key_check(events)


def test_agent_down_while_the_program_runs(tmp_path: Path) -> None:
    """With no agent, the program runs and exec exits with its status at once; a detached
    process retries the report, and the agent started later ends the application FAIL."""
    s = setup(tmp_path)
    ran = finish(s, start_exec(s, "raise", retry_for="120"), "raise")
    assert ran.status == 1
    match = re.search(
        r"the agent was not told how the command ended \((.*)\); process (\d+) ", ran.stderr
    )
    assert match is not None, ran.stderr
    assert match.group(1).endswith("no agent is listening (is lineage-agent running?)")
    retrier = int(match.group(2))
    with spark_daemon(s.config) as agent:
        events = wait_events(s.lineage, ended("exec_raise"))
        agent.wait_log("exec_verdict", status=1)
    assert terminal(events, "exec_raise")["eventType"] == "FAIL"
    assert RAISED in error_message(terminal(events, "exec_raise"))
    deadline = time.monotonic() + 30
    while _alive(retrier):  # it ends once the agent took the report
        assert time.monotonic() < deadline, "the retrying process did not end"
        time.sleep(0.1)
    assert_run_shapes(events)
    s.key_check(events)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (reparented, not reaped yet) counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"
