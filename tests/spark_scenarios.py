"""Real PySpark pipelines end to end: the applications of tests/sparkjobs/scenarios.py and the
agent's events for each of them.

`session_scenarios(tmp_path_factory)` (cached per session; wrap it in a module's session
fixture): starts a throwaway PostgreSQL server (tests/pg.py) when one can run here, runs
every batch scenario in ONE PySpark process (one JVM), stops the server, then runs the
agent's `SparkSource` once over the resulting event-log directory and keeps what it emitted,
per application, plus the agent's log lines. Each test then asserts on its own application.

`spark_daemon(...)`: the real daemon (`lineage-agent run`) as a child process with the file
transport, for the tests that watch live applications. `live_apps(...)`: a live PySpark
process (scenarios.py `live`) that advances one command at a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from prometheus_client import CollectorRegistry

from agent.config.model import SparkConfig
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.agentproc import AgentProcess, keygen, stop_process
from tests.pg import JDBC_JAR, postgres_skip_reason, start_postgres
from tests.spark_logs import JOBS, SteeredJob, once_per_session, spark_env, start_steered

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = JOBS / "scenarios.py"
BATCH_TIMEOUT = 900.0  # one JVM, a dozen applications, on a busy 2-core machine
AGENT_TIMEOUT = 300.0
STEP_TIMEOUT = 180.0
EXIT_CODE = 3  # the batch's last application leaves with sys.exit(3)
TERMINAL = ("COMPLETE", "FAIL", "ABORT")

Event = dict[str, Any]


@dataclass(frozen=True)
class Scenarios:
    """The batch applications' logs and what the agent made of them."""

    root: Path
    events_dir: Path
    data: Path
    warehouse: Path
    manifest: Mapping[str, Any]  # scenarios.py's manifest.json
    events: Mapping[str, list[Event]]  # application id -> emitted events, in order
    logs: list[dict[str, Any]]  # the agent's structured log lines
    exit_code: int  # of the PySpark process
    postgres: Mapping[str, Any] = field(default_factory=dict)  # url, namespace, rows written
    spark_seconds: float = 0.0
    agent_seconds: float = 0.0

    def app(self, key: str) -> tuple[str, list[Event]]:
        """(application id, its events) of one scenario; skips with the exact reason when the
        scenario could not run here (JDBC without PostgreSQL)."""
        record = self.manifest["apps"][key]
        if "skipped" in record:
            pytest.skip(f"scenario {key!r} not run: {record['skipped']}")
        return record["app_id"], self.events.get(record["app_id"], [])

    def path(self, name: str) -> str:
        """A data path as the agent names it (file namespace, absolute path)."""
        return str(self.data / name)


def run_batch(out: Path, postgres: Mapping[str, str] | None) -> tuple[int, str]:
    """Run scenarios.py batch into `out`; (exit code, tail of its output)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.parent / "scenarios.log"
    command = [sys.executable, str(SCENARIOS), "batch", str(out)]
    if postgres is not None:
        command.append(json.dumps(dict(postgres)))
    with log.open("wb") as output:
        result = subprocess.run(
            command,
            cwd=out.parent,
            env=spark_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=BATCH_TIMEOUT,
            check=False,
        )
    return result.returncode, log.read_text(errors="replace")[-4000:]


@asynccontextmanager
async def source_running(source: SparkSource) -> AsyncIterator[list[tuple[str, Event]]]:
    """`source` running in a task while the block runs, what it emits gathered as
    (execution, event) into the list it yields; then stopped and its state closed."""
    emitted: list[tuple[str, Event]] = []
    stop = asyncio.Event()
    task = asyncio.create_task(
        source.run(lambda ex, ev, _fence=None: emitted.append((ex, dict(ev))), stop)
    )
    try:
        yield emitted
    finally:
        stop.set()
        await task
        source.state.close()


async def read_all(directory: Path, state_dir: Path) -> list[tuple[str, Event]]:
    """Run the agent's Spark source over `directory` until every log was read to its end."""
    config = SparkConfig(event_log_dirs=(str(directory),), poll_interval=0.1, replay_horizon=0)
    source = SparkSource(config, "spark", StateDB(state_dir), Metrics(CollectorRegistry()))
    async with source_running(source) as emitted:
        async with asyncio.timeout(AGENT_TIMEOUT):
            while source._first_scan or source.apps:
                await asyncio.sleep(0.05)
    return emitted


def build(root: Path) -> Scenarios:
    """Everything `session_scenarios` does, into `root`."""
    began = time.monotonic()
    pg_info: dict[str, Any] = {}
    server = None
    skipped = postgres_skip_reason()
    if skipped is None:
        try:
            server = start_postgres()
        except RuntimeError as error:
            skipped = f"PostgreSQL did not start: {error}"
    try:
        creds = None
        if server is not None:
            creds = {
                "url": server.jdbc_url,
                "user": server.user,
                "password": server.password,
                "jar": str(JDBC_JAR),
            }
        code, tail = run_batch(root / "out", creds)
        if server is not None:
            pg_info = {
                "url": server.jdbc_url,
                "namespace": server.namespace,
                "database": server.database,
                "orders_rows": _count(server, "public.orders"),
                "hidden_rows": _count(server, "public.hidden"),
            }
    finally:
        if server is not None:
            server.stop()
    out = root / "out"
    if code != EXIT_CODE or not (out / "manifest.json").exists():
        raise RuntimeError(f"scenarios.py batch exited {code}, expected {EXIT_CODE}:\n{tail}")
    spark_seconds = time.monotonic() - began
    manifest = json.loads((out / "manifest.json").read_text())
    for record in manifest["apps"].values():
        if "skipped" in record:
            record["skipped"] = skipped or record["skipped"]  # the exact reason, for pytest
    began = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        emitted = asyncio.run(read_all(out / "events", root / "state"))
    by_app: dict[str, list[Event]] = defaultdict(list)
    for execution, event in emitted:
        by_app[execution].append(event)
    return Scenarios(
        root=out,
        events_dir=out / "events",
        data=Path(manifest["data"]),
        warehouse=Path(manifest["warehouse"]),
        manifest=manifest,
        events=dict(by_app),
        logs=[dict(line) for line in logs],
        exit_code=code,
        postgres=pg_info,
        spark_seconds=round(spark_seconds, 2),
        agent_seconds=round(time.monotonic() - began, 2),
    )


def _count(server: Any, table: str) -> int | None:
    try:
        return int(server.psql(f"SELECT count(*) FROM {table}"))
    except (RuntimeError, ValueError):
        return None


_built: dict[Path, Scenarios | BaseException] = {}


def session_scenarios(tmp_path_factory: pytest.TempPathFactory) -> Scenarios:
    """The session's scenarios, built on first use; a failure is remembered, not retried."""

    def built() -> Scenarios:
        return build(tmp_path_factory.mktemp("spark-scenarios"))

    failures = (RuntimeError, OSError, subprocess.SubprocessError, TimeoutError)
    return once_per_session(_built, tmp_path_factory, built, failures)


# -- checks shared by the tests ----------------------------------------------------------


def runs_of(events: list[Event]) -> dict[str, list[Event]]:
    """Events by run id, in emission order."""
    runs: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event)
    return dict(runs)


def assert_run_shapes(events: list[Event]) -> None:
    """Every run: one START first, one terminal last, nothing twice; the application's
    terminal event is the last event of all."""
    pairs = Counter((e["run"]["runId"], e["eventType"]) for e in events)
    assert [p for p, n in pairs.items() if n > 1] == []
    for run_id, run in runs_of(events).items():
        types = [e["eventType"] for e in run]
        assert types[0] == "START", (run_id, types)
        assert types[-1] in TERMINAL, (run_id, types)
        assert sum(t in TERMINAL for t in types) == 1, (run_id, types)
    if events and events[-1]["job"]["facets"]["jobType"]["jobType"] == "APPLICATION":
        assert events[-1]["eventType"] in TERMINAL


def outline(events: list[Event], app: str) -> list[tuple[str, str]]:
    """(eventType, job name without the `{app}.` prefix) of every event, in order."""
    out = []
    for event in events:
        name = event["job"]["name"]
        out.append((event["eventType"], "" if name == app else name.removeprefix(app + ".")))
    return out


def datasets(event: Event, role: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event[role]]


def fields(dataset: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    schema = dataset.get("facets", {}).get("schema", {})
    return [(f["name"], f.get("type")) for f in schema.get("fields", [])]


# -- the real daemon and live applications -----------------------------------------------


def events_in(path: Path) -> list[Event]:
    """The complete JSON lines the file transport wrote so far."""
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[: text.rfind("\n") + 1]  # a line being written is not read yet
    return [json.loads(line) for line in complete.splitlines() if line]


def wait_events(
    path: Path, predicate: Callable[[list[Event]], bool], seconds: float = 120
) -> list[Event]:
    """Poll the transport's file until `predicate(events)` holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        events = events_in(path)
        if predicate(events):
            return events
        time.sleep(0.1)
    seen = [(e["eventType"], e["job"]["name"]) for e in events_in(path)]
    raise AssertionError(f"condition not met within {seconds}s; events: {seen}")


def daemon_config(work: Path, events_dir: Path, *, stale_after: str = "10m", **spark: Any) -> Path:
    """A config for `lineage-agent run`: file transport into `work/lineage.jsonl`; `spark`
    adds keys to the `spark:` section."""
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "ed25519.key").exists():
        keygen(work)
    config = work / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "lineage": {
                    "enabled": True,
                    "transport": "file",
                    "file": {"path": str(work / "lineage.jsonl"), "rotation_size_mb": 0},
                },
                "signing": {"key_path": str(work / "ed25519.key")},
                "spark": {
                    "event_log_dirs": [str(events_dir)],
                    "poll_interval": "200ms",
                    "stale_after": stale_after,
                    "replay_horizon": 0,
                    **spark,
                },
                "metrics": {"listen": "127.0.0.1:0"},
                "state_dir": str(work / "state"),
                "control_socket": str(work / "control.sock"),
                "logging": {"level": "info", "format": "json"},
            }
        )
    )
    return config


@contextmanager
def spark_daemon(config: Path) -> Iterator[AgentProcess]:
    """`lineage-agent run --config CONFIG` as a child process, until the block ends (SIGTERM,
    then SIGKILL); a test may SIGKILL it earlier itself."""
    log_path = config.parent / f"agent-{time.monotonic_ns()}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
        )
    agent = AgentProcess(proc, log_path)
    try:
        agent.wait_started(timeout=60)
        yield agent
    except BaseException:
        agent.print_tail()
        raise
    finally:
        stop_process(proc)


class LiveApps(SteeredJob):
    """A scenarios.py `live` process: applications that advance one command at a time."""

    program = "scenarios.py live"
    step_timeout = STEP_TIMEOUT

    def __init__(self, event_dir: Path, control: Path, process: subprocess.Popen[bytes]) -> None:
        super().__init__(event_dir, control, process)
        self._seq = 0

    def started(self, index: int) -> dict[str, Any]:
        """`{"app_id", "jvm_pid"}` of the index-th application (from 1), once it runs."""
        return dict(json.loads(self.wait_file(f"started-{index}").read_text()))

    def send(self, command: str) -> int:
        """Queue a command; its sequence number."""
        self._seq += 1
        tmp = self.control / f".cmd-{self._seq}"
        tmp.write_text(command)
        os.replace(tmp, self.control / f"cmd-{self._seq}")
        return self._seq

    def do(self, command: str) -> None:
        """Run a command and wait until it finished."""
        self.wait_file(f"done-{self.send(command)}")

    def release(self, name: str) -> None:
        (self.control / f"release-{name}").touch()

    def kill_driver(self, jvm_pid: int) -> None:
        """SIGKILL the driver JVM and its Python process: no ApplicationEnd is written."""
        os.kill(jvm_pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait(30)


@contextmanager
def live_apps(work: Path, *names: str) -> Iterator[LiveApps]:
    """Start scenarios.py live with applications `names` logging into `work/events`; on exit
    the process is stopped (SIGTERM, then SIGKILL) if it is still alive."""
    event_dir, control = work / "events", work / "control"
    event_dir.mkdir(parents=True, exist_ok=True)
    process = start_steered(work, control, SCENARIOS, "live", str(event_dir), str(control), *names)
    apps = LiveApps(event_dir, control, process)
    try:
        yield apps
    finally:
        stop_process(process)
