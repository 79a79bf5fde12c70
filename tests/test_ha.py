"""Several real agents over one event-log directory and one real PostgreSQL state: one
SIGKILLed or SIGSTOPped in the middle of applications, the database restarted; every run
keeps one START and one terminal event across the agents, and every claimed event is
accounted for by one agent."""

from __future__ import annotations

import collections
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.commands import views
from tests.agentproc import AgentProcess, accounting, assert_identity, keygen, metric
from tests.collector import Collector
from tests.otheruser import give, public_dir
from tests.pg import Postgres
from tests.pg_plugin import fresh_database, url_of
from tests.spark_logs import SparkLogs
from tests.spark_scenarios import spark_daemon
from tests.test_other_user import other_agent

APPS = 4
LEASE = "3s"
TERMINAL = ("COMPLETE", "FAIL", "ABORT")


def split_logs(logs: SparkLogs, events_dir: Path) -> list[tuple[Path, str]]:
    """APPS copies of the real uncompressed single-file log under new application ids, each
    written up to its first SQL execution's end as an in-progress log; (log, rest) pairs."""
    source = next(logs.directory("single", "none").iterdir())
    app_id = source.name
    lines = source.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "SQLExecutionEnd" in line)
    events_dir.mkdir()
    pending = []
    for n in range(APPS):
        new_id = f"{app_id[:-4]}{n:04d}"
        text = [line.replace(app_id, new_id) for line in lines]
        path = events_dir / f"{new_id}.inprogress"
        path.write_text("".join(text[:cut]))
        pending.append((path, "".join(text[cut:])))
    return pending


def complete(pending: list[tuple[Path, str]]) -> None:
    """Spark writes the rest of each log and renames it to its final name."""
    for path, rest in pending:
        with path.open("a") as out:
            out.write(rest)
        path.rename(path.with_suffix(""))


def agent_config(
    work: Path, events_dir: Path, url: str, collector: Collector, endpoint: str | None = None
) -> Path:
    work.mkdir(parents=True)
    keygen(work)
    config = work / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "lineage": {
                    "transport": "http",
                    "http": {"endpoint": endpoint or collector.url},
                },
                "signing": {"key_path": str(work / "ed25519.key")},
                "spark": {
                    "event_log_dirs": [str(events_dir)],
                    "poll_interval": "200ms",
                    "stale_after": "10m",
                    "replay_horizon": 0,
                },
                "metrics": {"listen": "127.0.0.1:0"},
                "state_dir": str(work / "state"),
                "state_url": url,
                "state_lease": LEASE,
                "control_socket": str(work / "control.sock"),
                "logging": {"level": "info", "format": "json"},
            }
        )
    )
    return config


def runs(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Event types per run id, in arrival order."""
    seen: dict[str, list[str]] = collections.defaultdict(list)
    for event in events:
        seen[event["run"]["runId"]].append(event["eventType"])
    return seen


def app_runs(events: list[dict[str, Any]]) -> set[str]:
    return {e["run"]["runId"] for e in events if "parent" not in e["run"]["facets"]}


def wait_until(collector: Collector, done: Any, seconds: float = 90) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        events = list(collector.events)
        if done(events):
            return events
        time.sleep(0.2)
    raise AssertionError(f"not done within {seconds}s: {dict(runs(list(collector.events)))}")


def started(events: list[dict[str, Any]]) -> bool:
    return len(app_runs(events)) == APPS


def finished(events: list[dict[str, Any]]) -> bool:
    ended = {e["run"]["runId"] for e in events if e["eventType"] in TERMINAL}
    return len(app_runs(events)) == APPS and set(runs(events)) <= ended


def assert_once(events: list[dict[str, Any]]) -> None:
    """Every run: one START, then one terminal event; no event twice."""
    for run_id, types in runs(events).items():
        assert types[0] == "START" and types.count("START") == 1, (run_id, types)
        assert sum(t in TERMINAL for t in types) == 1, (run_id, types)
    keys = [(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in events]
    assert len(keys) == len(set(keys))


@pytest.fixture
def shared(
    postgres_server: Postgres,
    spark_logs: SparkLogs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, list[tuple[Path, str]], Collector]]:
    """A fresh state database, the half-written logs and a collector."""
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    url = url_of(postgres_server, fresh_database(postgres_server))
    pending = split_logs(spark_logs, tmp_path / "events")
    with Collector() as collector:
        yield url, pending, collector


def test_a_killed_agents_applications_are_finished_by_the_others(
    shared: tuple[str, list[tuple[Path, str]], Collector],
    tmp_path: Path,
    postgres_server: Postgres,
) -> None:
    """One agent owns every application and is SIGKILLed mid-way; the two others take its
    applications once the leases expire and end every run once, each event once; they
    adopt and count what it claimed without recording an outcome, so that every claimed
    event is counted by exactly one agent."""
    url, pending, collector = shared
    database = url.rsplit("/", 1)[1]
    events_dir = pending[0][0].parent
    configs = [agent_config(tmp_path / f"a{i}", events_dir, url, collector) for i in range(3)]
    with ExitStack() as stack:
        first = stack.enter_context(spark_daemon(configs[0]))
        wait_until(collector, started)
        assert metric(first.scrape(), "lineage_state_leases_held") == APPS
        status = status_of(first)
        owner = status["agent_id"]
        assert [(lease["owner"], lease["token"]) for lease in status["leases"]] == [
            (owner, 1)
        ] * APPS
        assert f"leases (this agent: {owner})" in views.status(status)
        first.signal(signal.SIGKILL)
        first.proc.wait(10)
        killed_at = time.monotonic()
        claimed, resolved = terms_of(postgres_server, database, owner)
        others = [stack.enter_context(spark_daemon(c)) for c in configs[1:]]
        complete(pending)
        events = wait_until(collector, finished)
        failover = time.monotonic() - killed_at
        time.sleep(1.0)  # room for a duplicate to arrive
        events = list(collector.events)
        assert_once(events)
        taken = [line for o in others for line in o.logs() if line["event"] == "lease_taken"]
        assert len({line["key"] for line in taken}) == APPS
        assert all(line["token"] == 2 for line in taken)  # each one taken from the dead one
        for other in others:
            assert_identity(other.scrape(), "http")
        handed_over = wait_for(
            lambda: sum(metric(o.scrape(), "lineage_events_handed_over_total") for o in others),
            claimed - resolved,
        )
        produced = sum(accounting(o.scrape(), "http")[0] for o in others)
        total = int(postgres_server.psql("SELECT count(*) FROM emitted", database))
        assert total == claimed + produced  # each claimed event produced by one agent
        print(
            f"failover: every application ended {failover:.1f}s after the SIGKILL; "
            f"the dead agent claimed {claimed} events, recorded {resolved} outcomes, "
            f"{handed_over:g} were adopted"
        )


def test_an_agent_paused_past_its_lease_writes_and_emits_nothing_when_it_wakes(
    shared: tuple[str, list[tuple[Path, str]], Collector], tmp_path: Path
) -> None:
    """A SIGSTOPped owner is replaced; resumed after its applications ended, it claims and
    sends nothing more, and says it lost each of them."""
    url, pending, collector = shared
    events_dir = pending[0][0].parent
    configs = [agent_config(tmp_path / f"a{i}", events_dir, url, collector) for i in range(2)]
    with ExitStack() as stack:
        paused = stack.enter_context(spark_daemon(configs[0]))
        wait_until(collector, started)
        paused.signal(signal.SIGSTOP)
        try:
            other = stack.enter_context(spark_daemon(configs[1]))
            complete(pending)
            wait_until(collector, finished)
        finally:
            paused.signal(signal.SIGCONT)
        # One line per application, each when the woken agent next looks at it.
        wait_for(lambda: len(lost_keys(paused)), APPS, seconds=60)
        # The woken agent's next passes let every lost lease go.
        wait_for(lambda: metric(paused.scrape(), "lineage_state_leases_held"), 0, seconds=60)
        time.sleep(2.0)  # room for a duplicate to arrive
        events = list(collector.events)
        assert_once(events)
        assert finished(events)
        assert_identity(paused.scrape(), "http")
        assert_identity(other.scrape(), "http")


def test_agents_wait_out_a_database_restart_and_resume(
    shared: tuple[str, list[tuple[Path, str]], Collector],
    tmp_path: Path,
    postgres_server: Postgres,
) -> None:
    """The database restarts while two agents follow applications: they hold their events,
    reconnect and end every run once; a third agent started later follows none of them and
    describes each from the shared state."""
    url, pending, collector = shared
    events_dir = pending[0][0].parent
    configs = [agent_config(tmp_path / f"a{i}", events_dir, url, collector) for i in range(3)]
    with ExitStack() as stack:
        agents = [stack.enter_context(spark_daemon(c)) for c in configs[:2]]
        wait_until(collector, started)
        postgres_server.restart()
        complete(pending)
        events = wait_until(collector, finished)
        # All released when finished, as the agent next looks.
        wait_for(lambda: len(status_of(agents[0])["leases"]), 0, seconds=60)
        time.sleep(1.0)  # room for a duplicate to arrive
        events = list(collector.events)
        assert_once(events)
        status = status_of(agents[0])
        assert status["agent_id"] and status["leases"] == []
        late = stack.enter_context(spark_daemon(configs[2]))
        time.sleep(2.0)  # its first scans
        assert not [line for line in late.logs() if line["event"] == "eventlog_followed"]
        described = [
            control(late, {"command": "describe", "app_id": path.with_suffix("").name})
            for path, _ in pending
        ]
        # Every event the collector got, told by an agent that followed none of them.
        told = [(e["run_id"], e["event_type"]) for d in described for e in d["emitted"]]
        assert sorted(told) == sorted((e["run"]["runId"], e["eventType"]) for e in events)
        for agent in agents:
            assert_identity(agent.scrape(), "http")
            # Logged connection failures and the URL never carry the password.
            assert postgres_server.password not in agent.raw_output()


def test_a_paused_agents_queued_events_never_leave_after_the_takeover(
    shared: tuple[str, list[tuple[Path, str]], Collector],
    tmp_path: Path,
    postgres_server: Postgres,
) -> None:
    """An owner whose collector is down holds its claimed STARTs in its queue and is paused
    past its lease; another agent ends the runs. Resumed with its collector back, it sends
    none of them (an old START after the new owner's COMPLETE): each is dropped as
    lease_lost, and the new owner counts them handed over."""
    url, pending, collector = shared
    events_dir = pending[0][0].parent
    with socket.socket() as probe:  # a port nothing listens on, until its collector starts
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = agent_config(
        tmp_path / "a0", events_dir, url, collector, endpoint=f"http://127.0.0.1:{port}"
    )
    configs = [down, agent_config(tmp_path / "a1", events_dir, url, collector)]
    with ExitStack() as stack:
        paused = stack.enter_context(spark_daemon(configs[0]))
        # Every application's START claimed by the one to be paused (not just as many events
        # queued: two of one application may be, before it reads another's log).
        wait_for(lambda: sum(claimed_start(paused, path) for path, _ in pending), APPS)
        queued = metric(paused.scrape(), "lineage_queue_depth", transport="http")
        paused.signal(signal.SIGSTOP)
        try:
            other = stack.enter_context(spark_daemon(configs[1]))
            complete(pending)
            wait_until(collector, lambda events: len(ended(events)) >= APPS)
            late = stack.enter_context(Collector(port=port))
        finally:
            paused.signal(signal.SIGCONT)
        lost = "lineage_events_dropped_by_reason_total"
        produced = accounting(paused.scrape(), "http")[0]
        wait_for(
            lambda: metric(paused.scrape(), lost, transport="http", reason="lease_lost"),
            produced,
        )
        assert late.events == []  # nothing left the woken agent
        events = list(collector.events)
        assert not [
            e for e in events if e["eventType"] == "START" and "parent" not in e["run"]["facets"]
        ]
        assert len(ended(events)) == len({e["run"]["runId"] for e in events})  # each run ended
        keys = [(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in events]
        assert len(keys) == len(set(keys))
        assert queued >= APPS
        wait_for(lambda: metric(other.scrape(), "lineage_events_handed_over_total"), produced)
        assert_identity(paused.scrape(), "http")
        assert_identity(other.scrape(), "http")


def claimed_start(agent: AgentProcess, log: Path) -> bool:
    """Whether `agent` claimed a START of the application whose log is `log` (its first
    event, the application's own START, comes before any other)."""
    try:
        described = control(agent, {"command": "describe", "app_id": log.with_suffix("").name})
    except subprocess.CalledProcessError:  # an application it has not seen yet
        return False
    return any(e["event_type"] == "START" for e in described["emitted"])


def lost_keys(agent: AgentProcess) -> set[str]:
    """The applications whose lease the agent has logged it lost."""
    return {line["key"] for line in agent.logs() if line["event"] == "lease_lost"}


def ended(events: list[dict[str, Any]]) -> set[str]:
    return {e["run"]["runId"] for e in events if e["eventType"] in TERMINAL}


def terms_of(postgres_server: Postgres, database: str, owner: str) -> tuple[int, int]:
    """(events claimed, outcomes recorded) under an agent's leases, from the database."""
    row = postgres_server.psql(
        "SELECT coalesce(sum(claimed), 0), coalesce(sum(resolved), 0) FROM terms "
        f"WHERE owner = '{owner}'",
        database,
    )
    claimed, resolved = row.split("|")
    return int(claimed), int(resolved)


def wait_for(read: Any, expected: Any, seconds: float = 30) -> float:
    """Poll `read()` until it equals `expected` (or `expected(value)` holds); its value."""
    deadline = time.monotonic() + seconds
    while True:
        value = read()
        if (expected(value) if callable(expected) else value == expected) or (
            time.monotonic() > deadline
        ):
            break
        time.sleep(0.2)
    assert expected(value) if callable(expected) else value == expected, (value, expected)
    return float(value)


def status_of(agent: AgentProcess) -> dict[str, Any]:
    """`lineage-agent status --json` of a running agent, through its control socket."""
    return control(agent, {"command": "status"})


def control(agent: AgentProcess, request: dict[str, Any]) -> dict[str, Any]:
    """A control-socket command's JSON answer, through the agent's own command line."""
    config = yaml.safe_load(next(agent.log_path.parent.glob("config.yaml")).read_text())
    args = [request["command"]] + ([request["app_id"]] if "app_id" in request else [])
    out = subprocess.run(
        [sys.executable, "-m", "agent", *args, "--socket", config["control_socket"], "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return dict(json.loads(out.stdout))


def test_an_agent_as_the_units_user_shares_the_state(
    shared: tuple[str, list[tuple[Path, str]], Collector],
    postgres_server: Postgres,
    public_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the shipped unit runs it: uid 65534 from the world-readable install, its password
    in a 0600 file of its own (no PG variables), beside an agent run as root; every run ends
    once and the password shows nowhere."""
    url, pending, collector = shared
    monkeypatch.delenv("PGPASSWORD")
    base = public_dir("lineage-ha-")
    try:
        events_dir = base / "events"
        shutil.copytree(pending[0][0].parent, events_dir)
        for path in [events_dir, *events_dir.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        config = agent_config(base / "agent", events_dir, url, collector)
        settings = yaml.safe_load(config.read_text())
        secret = base / "agent" / "state-password"
        secret.write_text(postgres_server.password + "\n")
        secret.chmod(0o600)
        settings["state_password_file"] = str(secret)
        config.write_text(yaml.safe_dump(settings))
        give([base / "agent", *(base / "agent").rglob("*")])
        moved = [(events_dir / path.name, rest) for path, rest in pending]
        with other_agent(public_agent, config) as agent:
            wait_until(collector, started)
            complete(moved)
            events = wait_until(collector, finished)
            # Released once their events are delivered, as the agent next looks.
            wait_for(lambda: metric(agent.scrape(), "lineage_state_leases_held"), 0, seconds=60)
            time.sleep(1.0)  # room for a duplicate to arrive
            assert_once(list(collector.events))
            assert_identity(agent.scrape(), "http")
            assert postgres_server.password not in agent.raw_output()
        assert events
    finally:
        shutil.rmtree(base, ignore_errors=True)
