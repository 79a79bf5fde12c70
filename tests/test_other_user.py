"""The agent as the shipped unit runs it: another user than Spark's, reading the logs through
their group, unable to look into the driver's /proc/PID/fd (real PySpark drivers)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.agentproc import AgentProcess, stop_process
from tests.otheruser import NOBODY, as_user, give, public_dir
from tests.spark_logs import spark_env
from tests.spark_scenarios import Event, daemon_config, events_in, wait_events

JOBS = Path(__file__).resolve().parent / "sparkjobs"
STALE = 3.0  # seconds: spark.stale_after of these agents
WRITE = "execute_insert_into_hadoop_fs_relation_command"

pytestmark = pytest.mark.spark


class IdleApp:
    """tests/sparkjobs/idle_driver.py, run by root with the group the agent reads through."""

    def __init__(self, control: Path, process: subprocess.Popen[bytes]) -> None:
        self.control = control
        self.process = process

    def wait(self, name: str, timeout: float = 120) -> str:
        path = self.control / name
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"no {name!r}:\n{self.output()}"
            time.sleep(0.05)
        return path.read_text()

    def go(self, name: str) -> None:
        (self.control / name).touch()

    def output(self) -> str:
        return (self.control / "output.log").read_text(errors="replace")[-4000:]


@pytest.fixture
def base() -> Iterator[Path]:
    with public_base() as path:
        yield path


@contextmanager
def public_base() -> Iterator[Path]:
    """A directory the agent's user can enter: events (group-readable), agent, control."""
    path = public_dir("lineage-agent-other-")
    events = path / "events"
    events.mkdir()
    os.chown(events, 0, NOBODY)
    events.chmod(0o2770)  # Spark's group owns what Spark writes here, as on real nodes
    (path / "agent").mkdir()
    (path / "control").mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def idle_app(base: Path, ui: str, master: str = "local[1]") -> Iterator[IdleApp]:
    """The Spark application, as root in the agent's group (so its 0660 log is readable)."""
    control = base / "control"
    script = JOBS / "idle_driver.py"
    with (control / "output.log").open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, str(script), str(base / "events"), str(control), ui, master],
            cwd=control,
            env=spark_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            group=NOBODY,
            extra_groups=[],
        )
    try:
        yield IdleApp(control, process)
    finally:
        stop_process(process)


def agent_config(base: Path, **spark: object) -> Path:
    """The agent's config and key, handed to its user; `spark` adds keys to its section."""
    work = base / "agent"
    config = daemon_config(work, base / "events", stale_after=f"{STALE:g}s", **spark)
    give([work, config, work / "ed25519.key"])
    return config


@contextmanager
def other_agent(python: Path, config: Path, caps: tuple[str, ...] = ()) -> Iterator[AgentProcess]:
    """`lineage-agent run` as uid 65534 from the world-readable install."""
    log_path = config.parent / f"agent-{time.monotonic_ns()}.log"
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [*as_user(caps=caps), str(python), "-m", "agent", "run", "--config", str(config)],
            cwd=config.parent,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    agent = AgentProcess(proc, log_path)
    try:
        agent.wait_started(timeout=60)
        yield agent
    finally:
        stop_process(proc)


def control(python: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A control command as root (the operator), from the same install."""
    return subprocess.run(
        [str(python), "-m", "agent", *args, "--socket", str(config.parent / "control.sock")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_signal(agent: AgentProcess, pattern: str, timeout: float = 60) -> None:
    """Block until a `driver_idle_alive` line names a signal matching `pattern`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in agent.logs():
            if line.get("event") == "driver_idle_alive" and re.fullmatch(pattern, line["signal"]):
                return
        time.sleep(0.2)
    raise AssertionError(f"no driver_idle_alive matching {pattern!r}:\n{agent.raw_output()}")


def outline(events: list[dict[str, object]]) -> list[tuple[object, str]]:
    """(event type, job name less the application's) of every event, in file order."""
    return [
        (e["eventType"], str(e["job"]["name"]).partition(".")[2])  # type: ignore[index]
        for e in events
    ]


#: The events of idle_driver.py run to its end: the application, its two writes.
IDLE_APP_OUTLINE = [
    ("START", ""),
    ("START", f"{WRITE}.control_first"),
    ("COMPLETE", f"{WRITE}.control_first"),
    ("START", f"{WRITE}.control_second"),
    ("COMPLETE", f"{WRITE}.control_second"),
    ("COMPLETE", ""),
]


def kept_alive_then_finished(
    agent: AgentProcess, app: IdleApp, out: Path, signal: str
) -> list[Event]:
    """Once `app` idles after its first write: the agent keeps it alive by a signal matching
    `signal`, past three times STALE with no driver_lost; then the app writes again and stops.
    Returns its six events."""
    idle_since = time.monotonic()
    wait_signal(agent, signal)
    time.sleep(max(0.0, 3 * STALE + 1 - (time.monotonic() - idle_since)))
    assert not [line for line in agent.logs() if line.get("event") == "driver_lost"]
    app.go("go-second")
    app.wait("second-done")
    app.go("go-stop")
    app.wait("stopped")
    return wait_events(out, lambda ev: len(ev) == 6)


@pytest.mark.parametrize("ui", ["on", "off"])
def test_an_idle_driver_of_another_user_stays_alive(
    public_agent: Path, base: Path, ui: str
) -> None:
    """An agent that may not read the driver's /proc/PID/fd keeps an idle driver alive past
    three times `stale_after` (by its UI's REST API, or with the UI off by its listening
    driver port), and the writes after the idle time arrive: no driver_lost."""
    config = agent_config(base)
    out = config.parent / "lineage.jsonl"
    with other_agent(public_agent, config) as agent, idle_app(base, ui) as app:
        app.wait("first-done")
        wait_events(out, lambda ev: len(ev) == 3)
        # Which signal answers first depends on how busy the driver is; with its UI on, the
        # UI's REST API answers sooner or later.
        if ui == "on":
            signal = r"the driver UI at 127\.0\.0\.1:\d+ answers for it"
        else:
            signal = r"the driver's port \d+ listens \(uid 0\)"
        events = kept_alive_then_finished(agent, app, out, signal)
    assert outline(events) == IDLE_APP_OUTLINE
    assert events_in(out) == events
