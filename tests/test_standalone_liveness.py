"""Driver liveness through a real Spark standalone master: PySpark drivers in client mode on
a master and worker started from pyspark's own jars, followed by an agent that runs as
another user and whose drivers' UI is off, so the master's word is what tells it.

Each agent starts once its application has: until the log carries the environment (Spark
writes it with ApplicationStart, after the application registered with the master and, on a
busy node, many seconds after the log appeared) it names no master to ask, and these tests'
`stale_after` of 3 s could take a starting driver for lost."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

from tests.agentproc import stop_process
from tests.otheruser import public_dir
from tests.spark_logs import spark_env
from tests.spark_scenarios import wait_events
from tests.test_other_user import (
    IDLE_APP_OUTLINE,
    STALE,
    agent_config,
    base,
    control,
    idle_app,
    kept_alive_then_finished,
    other_agent,
    outline,
)

__all__ = ["base"]  # the fixture, shared with tests/test_other_user.py

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT = 90.0


@dataclass(frozen=True)
class Standalone:
    """A running master and its one worker."""

    url: str  # spark://127.0.0.1:PORT
    ui_port: int  # the master's web UI

    def apps(self) -> dict[str, str]:
        """Application id -> state, as the master lists them."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            body = json.load(r)
        return {a["id"]: a["state"] for a in body["activeapps"] + body["completedapps"]}


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spark_class(main: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    """`$SPARK_HOME/bin/spark-class MAIN ARGS` (it execs the JVM: the pid is the JVM's)."""
    env = {**spark_env(), "SPARK_HOME": str(SPARK_HOME), "SPARK_NO_DAEMONIZE": "1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), main, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.fixture(scope="module")
def standalone() -> Iterator[Standalone]:
    """A standalone master with one worker (1 core, 512 MiB) on loopback, for the module."""
    work = public_dir("lineage-agent-standalone-")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master = spark_class(
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
        log=work / "master.log",
    )
    worker = spark_class(
        "org.apache.spark.deploy.worker.Worker",
        *("--host", "127.0.0.1", "--webui-port", str(worker_ui), "--cores", "1"),
        *("--memory", "512m", "--work-dir", str(work / "work"), f"spark://127.0.0.1:{port}"),
        log=work / "worker.log",
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                url = f"http://127.0.0.1:{ui_port}/json/"
                with urllib.request.urlopen(url, timeout=5) as response:
                    if json.load(response).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            assert master.poll() is None and worker.poll() is None, "master or worker exited"
            assert time.monotonic() < deadline, (work / "master.log").read_text()[-4000:]
            time.sleep(0.5)
        yield Standalone(f"spark://127.0.0.1:{port}", ui_port)
    finally:
        stop_process(worker)
        stop_process(master)
        shutil.rmtree(work, ignore_errors=True)


def driver_jvm(parent: int) -> int:
    """The SparkSubmit JVM that PySpark started under `parent`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if ppid == parent and b"org.apache.spark.deploy.SparkSubmit" in cmdline:
            return int(entry)
    raise AssertionError(f"no SparkSubmit JVM under pid {parent}")


def test_an_idle_driver_stays_alive_while_its_master_runs_it(
    public_agent: Path, base: Path, standalone: Standalone
) -> None:
    """An idle client-mode driver with its UI off, followed by an agent of another user, is
    kept alive past three times `stale_after` by the master listing it RUNNING (at the web UI
    port of `spark.master_ui_port`), and its later writes and COMPLETE arrive."""
    config = agent_config(base, master_ui_port=standalone.ui_port)
    out = config.parent / "lineage.jsonl"
    # The agent starts once the application has: a log that does not yet carry its
    # environment names no master to ask (see the module's docstring).
    with idle_app(base, "off", standalone.url) as app, ExitStack() as stack:
        app_id = app.wait("started")
        agent = stack.enter_context(other_agent(public_agent, config))
        app.wait("first-done")
        wait_events(out, lambda ev: len(ev) == 3)
        where = re.escape(f"127.0.0.1:{standalone.ui_port}")
        running = f"the standalone master at {where} reports it RUNNING"
        events = kept_alive_then_finished(agent, app, out, running)
    assert outline(events) == IDLE_APP_OUTLINE
    assert standalone.apps()[app_id] == "FINISHED"


def test_a_killed_driver_fails_with_its_masters_word(
    public_agent: Path, base: Path, standalone: Standalone
) -> None:
    """A driver JVM killed with SIGKILL writes no ApplicationEnd; once its master lists the
    application FINISHED and the log is stale, the application ends FAIL with what the agent
    looked at, the master's word among it."""
    config = agent_config(base, master_ui_port=standalone.ui_port)
    out = config.parent / "lineage.jsonl"
    with idle_app(base, "off", standalone.url) as app, ExitStack() as stack:
        app_id = app.wait("started")
        stack.enter_context(other_agent(public_agent, config))
        app.wait("first-done")
        wait_events(out, lambda ev: len(ev) == 3)
        os.kill(driver_jvm(app.process.pid), signal.SIGKILL)
        events = wait_events(out, lambda ev: len(ev) == 4)
    assert outline(events)[3] == ("FAIL", "")
    assert events[3]["run"]["facets"]["errorMessage"]["message"] == (
        f"the driver is gone: the event log has not grown for {STALE:g}s, no process the agent "
        "may inspect holds it open, nothing listens on its driver port, the standalone master "
        f"at 127.0.0.1:{standalone.ui_port} reports it FINISHED and its UI is off"
    )
    assert standalone.apps()[app_id] == "FINISHED"


def test_job_stop_without_cap_kill_names_the_masters_way(
    public_agent: Path, base: Path, standalone: Standalone
) -> None:
    """Under the shipped unit (no CAP_KILL) `job stop` of a client-mode driver of a standalone
    master says why it cannot signal it (or, when other root Spark drivers started at the same
    moment on this shared node, that it does not guess) and how the master stops it; nothing
    is signalled."""
    config = agent_config(base, master_ui_port=standalone.ui_port)
    out = config.parent / "lineage.jsonl"
    with idle_app(base, "off", standalone.url) as app, ExitStack() as stack:
        app_id = app.wait("started")
        stack.enter_context(other_agent(public_agent, config))
        app.wait("first-done")
        wait_events(out, lambda ev: len(ev) == 3)
        refused = control(public_agent, config, "job", "stop", app_id, "--reason", "r")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        why = (
            r"cannot signal driver pid \d+: it belongs to another user and the agent \(uid "
            r"65534\) lacks CAP_KILL \(see docs/operations/commands\.md, 'Stopping a job'\); "
            r"without it, "
            r"|application " + re.escape(app_id) + r": SparkSubmit processes [\d, ]+ of uid 0 "
            r"all started when it was submitted; the agent does not guess which to stop: stop "
            r"it from its driver's node as its user, or "
        )
        assert re.fullmatch(
            rf"lineage-agent: (?:{why})stop it with the \(kill\) link beside it on its "
            + re.escape(f"master's web UI (http://127.0.0.1:{standalone.ui_port}/), ")
            + r"or for a cluster-mode driver with `spark-class "
            r"org\.apache\.spark\.deploy\.Client kill MASTER_URL DRIVER_ID`\n",
            refused.stderr,
        ), refused.stderr
        assert app.process.poll() is None
        assert standalone.apps()[app_id] == "RUNNING"
