"""The delivery fault scenarios of issue 35, each against a real Marquez driven by the shell
commands it was given, and the steps every scenario shares: a fresh namespace, key and state,
the agent as a child process, real logs written over time, the fault mid-stream, a bounded wait
for the agent to go idle, then Marquez read back and compared with a replay of the same logs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.faults.agentlives import ROOT, AgentLives, keygen, write_config
from tests.faults.feed import Feeder, workload
from tests.faults.marquez_api import Marquez, time_window
from tests.faults.report import Accounting, Comparison, compare, expected_runs

#: The command options: name -> what it must do.
COMMANDS: dict[str, str] = {
    "db-stop": "stop Marquez's database",
    "db-start": "start Marquez's database again",
    "db-restart": "restart Marquez's database (when --db-stop/--db-start are not given)",
    "db-pause": "freeze Marquez's database (SIGSTOP, docker pause)",
    "db-resume": "thaw it (SIGCONT, docker unpause)",
    "marquez-kill": "SIGKILL the Marquez API",
    "marquez-stop": "stop the Marquez API (default: --marquez-kill)",
    "marquez-start": "start the Marquez API again (the runner waits until it answers)",
}
#: A command and the one that undoes it, run at the end of a scenario that did not.
UNDO = {
    "db-stop": "db-start",
    "db-pause": "db-resume",
    "marquez-kill": "marquez-start",
    "marquez-stop": "marquez-start",
}


@dataclass
class Options:
    url: str
    commands: Mapping[str, str]
    logs: Sequence[str]
    work: Path
    stamp: str
    feed_seconds: float = 30.0
    steps: int = 12
    fault_at: float = 0.4
    down: float = 5.0
    settle: float = 180.0
    command_timeout: float = 180.0
    marquez_timeout: float = 180.0
    http: dict[str, Any] = field(default_factory=dict)
    namespace_prefix: str = "faults"


class Skip(Exception):
    """A scenario that cannot run as configured (a command it needs is missing)."""


class Context:
    """What a scenario's fault can do: run a command, sleep, restart the agent."""

    def __init__(self, options: Options, marquez: Marquez, agent: AgentLives, log: Path):
        self.options = options
        self.marquez = marquez
        self.agent = agent
        self.log = log
        self.notes: list[str] = []
        self.pending: list[str] = []  # undo commands not run yet

    def has(self, name: str) -> bool:
        return bool(self.command_text(name))

    def command_text(self, name: str) -> str:
        text = self.options.commands.get(name, "")
        if not text and name == "marquez-stop":
            text = self.options.commands.get("marquez-kill", "")
        return text

    def run(self, name: str) -> None:
        """Run one of the commands; its output goes to the scenario's commands.log."""
        text = self.command_text(name)
        if not text:
            raise Skip(f"needs --{name}")
        started = time.monotonic()
        with self.log.open("ab") as out:
            out.write(f"$ {text}\n".encode())
            out.flush()
            try:
                # Its own session: a Marquez it starts outlives this runner.
                code = subprocess.run(
                    text,
                    shell=True,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=self.options.command_timeout,
                    start_new_session=True,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                code = -1
        took = time.monotonic() - started
        self.notes.append(f"{name}: exit {code} in {took:.1f} s")
        if name in UNDO:
            self.pending.append(UNDO[name])
        elif name in self.pending:
            self.pending.remove(name)

    def probe(self, what: str) -> None:
        """Note how Marquez answers a read now (its status, or the error)."""
        try:
            answer = self.marquez.client.get("/api/v1/namespaces", timeout=3)
            found = f"HTTP {answer.status_code}"
        except httpx.HTTPError as error:
            found = type(error).__name__
        self.notes.append(f"{what}: GET /api/v1/namespaces -> {found}")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait_marquez(self) -> None:
        started = time.monotonic()
        if self.marquez.wait_up(self.options.marquez_timeout):
            self.notes.append(f"Marquez answered again after {time.monotonic() - started:.1f} s")
        else:
            self.notes.append(f"Marquez did not answer within {self.options.marquez_timeout:g} s")

    def undo(self) -> None:
        for name in list(reversed(self.pending)):
            self.notes.append(f"undone at the end: {name}")
            self.run(name)
        self.pending.clear()


# -- the faults ----------------------------------------------------------------------------------


def db_restart(ctx: Context) -> None:
    """Marquez's PostgreSQL restarted mid-stream: Marquez answers 500 while it is away."""
    if ctx.has("db-stop") and ctx.has("db-start"):
        ctx.run("db-stop")
        ctx.probe("database stopped")
        ctx.sleep(ctx.options.down)
        ctx.probe(f"database stopped {ctx.options.down:g} s")
        ctx.run("db-start")
    else:
        ctx.run("db-restart")
    ctx.wait_marquez()


def marquez_kill(ctx: Context) -> None:
    """Marquez SIGKILLed mid-delivery, started again after a few seconds."""
    if not ctx.has("marquez-start"):
        raise Skip("needs --marquez-start")
    ctx.run("marquez-kill")
    ctx.sleep(ctx.options.down)
    ctx.run("marquez-start")
    ctx.wait_marquez()


def stall(seconds: float) -> Callable[[Context], None]:
    def fault(ctx: Context) -> None:
        if not ctx.has("db-resume"):
            raise Skip("needs --db-resume")
        paused = time.monotonic()
        ctx.run("db-pause")
        ctx.sleep(min(5.0, seconds / 2))
        ctx.probe("database paused")
        ctx.sleep(max(0.0, seconds - (time.monotonic() - paused)))
        ctx.run("db-resume")
        ctx.notes.append(f"database paused {time.monotonic() - paused:.1f} s")
        ctx.wait_marquez()

    fault.__doc__ = (
        f"Marquez stalled {seconds:g} s mid-application (its database paused, then resumed): "
        "requests time out on the agent's side and Marquez stores them when it resumes."
    )
    return fault


def agent_restart_down(kill: bool) -> Callable[[Context], None]:
    def fault(ctx: Context) -> None:
        if not ctx.has("marquez-start"):
            raise Skip("needs --marquez-start")
        ctx.run("marquez-stop")
        ctx.sleep(3)
        ctx.probe("Marquez stopped")
        ended = ctx.agent.sigkill() if kill else ctx.agent.sigterm()
        ctx.notes.append(
            f"agent {ended.ended}: produced {ended.produced}, delivered {ended.delivered}, "
            f"dropped {sum(ended.dropped.values())}, unconfirmed "
            f"{sum(ended.unconfirmed.values())}, queued at its end {ended.queued}"
        )
        ctx.agent.start()
        ctx.sleep(3)
        ctx.run("marquez-start")
        ctx.wait_marquez()

    signame = "SIGKILL" if kill else "SIGTERM"
    fault.__doc__ = (
        f"Marquez stopped, the agent stopped with {signame} and started again, Marquez back."
    )
    return fault


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: Callable[[Context], None]

    @property
    def description(self) -> str:
        return (self.fault.__doc__ or "").strip()


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("db-restart", db_restart),
        Scenario("marquez-kill", marquez_kill),
        Scenario("stall-15", stall(15)),
        Scenario("stall-60", stall(60)),
        Scenario("agent-restart-down", agent_restart_down(kill=False)),
        Scenario("agent-kill-down", agent_restart_down(kill=True)),
    )
}


# -- one scenario --------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    namespace: str
    directory: Path
    comparison: Comparison | None = None
    accounting: Accounting | None = None
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0
    extra_runs: int = 0


def replay(config: Path, events: Path, out: Path) -> list[dict[str, Any]]:
    """The events the agent makes from the logs now in `events` (`lineage-agent replay`: the
    same translator, namespace and key; run ids and event types are what the agent makes)."""
    if out.exists():
        shutil.rmtree(out)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "agent", "replay", "--config", str(config)),
            *("--output-dir", str(out), "--json", str(events)),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    if result.returncode not in (0, 1):  # 1: a run ended FAIL or ABORT, as some do
        raise RuntimeError(f"replay exited {result.returncode}: {result.stderr.decode()[-2000:]}")
    events_made: list[dict[str, Any]] = []
    for path in sorted(out.glob("*.jsonl")):
        events_made.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return events_made


def run_scenario(scenario: Scenario, options: Options, index: int) -> Outcome:
    started = time.monotonic()
    directory = options.work / scenario.name
    events_dir = directory / "events"
    events_dir.mkdir(parents=True)
    namespace = f"{options.namespace_prefix}-{scenario.name}-{options.stamp}"
    outcome = Outcome(scenario.name, namespace, directory)
    marquez = Marquez(options.url)
    keygen(directory / "ed25519.key")
    config = write_config(directory, marquez.endpoint, namespace, events_dir, options.http)
    apps = workload(options.logs, int(time.time() * 1000) + index * 1000)
    agent = AgentLives(config)
    ctx = Context(options, marquez, agent, directory / "commands.log")
    feeder = Feeder(events_dir, apps, options.feed_seconds, options.steps)
    try:
        if not marquez.wait_up(options.marquez_timeout):
            outcome.skipped = f"Marquez does not answer at {options.url}"
            return outcome
        agent.start()
        feeder.start()
        feeder.wait_progress(options.fault_at, timeout=options.feed_seconds * 2 + 30)
        ctx.notes.append(f"fault at {feeder.progress:.0%} of the feed")
        fault_started = time.monotonic()
        try:
            scenario.fault(ctx)
        except Skip as skip:
            outcome.skipped = str(skip)
            return outcome
        ctx.notes.append(f"fault over after {time.monotonic() - fault_started:.1f} s")
        feeder.join(timeout=options.feed_seconds * 3 + 60)
        if feeder.is_alive():
            feeder.stop.set()
            feeder.join(timeout=10)
            ctx.notes.append("the feed did not end in time: stopped early")
        if feeder.error is not None:
            ctx.notes.append(f"the feed failed: {feeder.error!r}")
        expected = replay(config, events_dir, directory / "expected")
        if agent.process is None:
            agent.start()
        busy = agent.settle(len(expected), options.settle)
        if busy:
            ctx.notes.append(f"agent {busy}")
        first, last = time_window(expected)
        _wait_stored(marquez, first, last)
        stored = marquez.events_between(first, last)
        runs = expected_runs(expected)
        in_namespace = marquez.namespace_runs(namespace)
        # A run the namespace's listing does not show is asked for by id (it may be elsewhere).
        states = {run: in_namespace.get(run) or marquez.run_state(run) for run in runs}
        outcome.extra_runs = len(set(in_namespace) - set(runs))
        if outcome.extra_runs:
            ctx.notes.append(f"{outcome.extra_runs} runs in the namespace no log calls for")
        agent.close()
        outcome.comparison = compare(expected, stored, states)
        (directory / "expected.json").write_text(json.dumps(expected))
        (directory / "stored.json").write_text(
            json.dumps([e for e in stored if str(e["run"]["runId"]) in runs])
        )
    finally:
        feeder.stop.set()
        ctx.undo()
        if agent.process is not None:
            agent.close()
        outcome.accounting = Accounting(agent.lives)
        outcome.notes = ctx.notes
        outcome.seconds = time.monotonic() - started
        marquez.close()
    return outcome


def _wait_stored(marquez: Marquez, first: str, last: str, timeout: float = 30.0) -> None:
    """Until Marquez's count of events in the window stays the same for 3 s (a request it took
    after its client gave up may still be being stored)."""
    deadline = time.monotonic() + timeout
    seen, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = marquez.count_between(first, last)
        if count != seen:
            seen, since = count, time.monotonic()
        elif time.monotonic() - since >= 3:
            return
        time.sleep(0.5)
