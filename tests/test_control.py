"""The control socket against a running agent: status, describe, job stop of a real
PySpark application (its runs end ABORT), and the socket's mode and access rules."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.service.control.server import ControlServer
from tests.agentproc import AgentProcess, cli, keygen
from tests.independent import public_key, verify
from tests.olschema import validate_run_event
from tests.spark_logs import JOBS, spark_env
from tests.spark_scenarios import spark_daemon, wait_events


@contextmanager
def spark_agent(
    work: Path,
    events_dir: Path,
    socket_path: Path | None = None,
    spark: dict[str, Any] | None = None,
) -> Iterator[tuple[AgentProcess, Path, Path]]:
    """The real daemon (`lineage-agent run`) watching `events_dir`, file transport; `spark`
    adds keys to its `spark:` section."""
    work.mkdir(parents=True, exist_ok=True)
    keygen(work)
    out = work / "lineage.jsonl"
    config = work / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "lineage": {"enabled": True, "transport": "file", "file": {"path": str(out)}},
                "signing": {"key_path": str(work / "ed25519.key")},
                "spark": {
                    "event_log_dirs": [str(events_dir)],
                    "poll_interval": "200ms",
                    "replay_horizon": 0,
                    **(spark or {}),
                },
                "metrics": {"listen": "127.0.0.1:0"},
                "state_dir": str(work / "state"),
                "control_socket": str(socket_path or work / "run" / "control.sock"),
                "logging": {"level": "info", "format": "json"},
            }
        )
    )
    with spark_daemon(config) as agent:
        yield agent, config, out


@pytest.mark.spark
def test_job_stop_ends_runs_abort(tmp_path: Path) -> None:
    """`job stop` ends a real application with its in-flight SQL run as ABORT, with the reason;
    status and describe show it; the ABORT events arrive signed and schema-valid."""
    events_dir, work = tmp_path / "events", tmp_path / "job"
    events_dir.mkdir()
    work.mkdir()
    with spark_agent(tmp_path / "agent", events_dir) as (agent, config, out):
        sock = tmp_path / "agent" / "run" / "control.sock"
        assert stat.S_IMODE(sock.stat().st_mode) == 0o660
        log = (work / "spark.log").open("wb")
        job = subprocess.Popen(
            [sys.executable, str(JOBS / "long_sql.py"), str(events_dir), str(work)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=spark_env(),
            cwd=work,
        )
        try:
            deadline = time.monotonic() + 120
            while not (work / "started").exists():
                assert job.poll() is None, (work / "spark.log").read_text()[-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.1)
            app_id = (work / "started").read_text()
            wait_events(out, lambda ev: sum(e["eventType"] == "START" for e in ev) >= 2)

            status = cli("status", "--config", str(config), "--json", check=True)
            answer = json.loads(status.stdout)
            assert answer["state"] == "running"
            [app] = [a for a in answer["applications"] if a["app_id"] == app_id]
            assert app["complete"] is False
            assert cli("status", "--config", str(config)).stdout.count(app_id) == 1

            began = time.monotonic()
            stopped = cli(
                "job", "stop", app_id, "--reason", "maintenance window", "--config", str(config)
            )
            assert stopped.returncode == 0, stopped.stderr
            assert stopped.stdout.startswith(f"stopped {app_id} (driver pid ")
            assert stopped.stdout.rstrip().endswith("its runs end ABORT: maintenance window")
            events = wait_events(
                out,
                lambda ev: sum(e["eventType"] in ("ABORT", "FAIL", "COMPLETE") for e in ev) >= 2,
            )
            took = time.monotonic() - began
        finally:
            if job.poll() is None:
                job.kill()
            job.wait(60)
            log.close()
        terminal = [e for e in events if e["eventType"] != "START"]
        assert [e["eventType"] for e in terminal] == ["ABORT", "ABORT"], terminal
        assert "maintenance window" in json.dumps(terminal[-1])
        key = public_key(tmp_path / "agent" / "ed25519.key")
        for event in events:
            validate_run_event(event)
            verify(event, key)

        described = cli("describe", app_id, "--config", str(config), "--json", check=True)
        detail = json.loads(described.stdout)
        assert detail["stop"][0] == "maintenance window"
        assert detail["stop"][1].startswith(f"uid {os.getuid()}")
        assert [e["event_type"] for e in detail["emitted"]].count("ABORT") == 2
        assert {d["outcome"] for d in detail["deliveries"]} == {"delivered"}
        assert len(detail["deliveries"]) == len(events)
        text = cli("describe", app_id, "--config", str(config)).stdout
        assert "deliveries" in text and "ABORT" in text
        print(f"job stop to ABORT written: {took:.2f}s")
        assert agent.stop() == 0


def test_unknown_application_is_a_clear_error(tmp_path: Path) -> None:
    """`job stop` and `describe` of an application the agent never saw fail with exit 1."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    with spark_agent(tmp_path / "agent", events_dir) as (agent, config, _):
        stopped = cli("job", "stop", "app-nope", "--config", str(config))
        assert stopped.returncode == 1
        assert stopped.stderr == (
            "lineage-agent: application app-nope is not running on this node\n"
        )
        described = cli("describe", "app-nope", "--config", str(config))
        assert described.returncode == 1
        assert described.stderr == (
            "lineage-agent: unknown application app-nope: this agent has not seen it\n"
        )
        assert agent.stop() == 0


def test_no_agent_listening(tmp_path: Path) -> None:
    """status with no agent running says so and exits 1."""
    result = cli("status", "--socket", str(tmp_path / "none.sock"))
    assert result.returncode == 1
    assert result.stderr == (
        f"lineage-agent: {tmp_path / 'none.sock'}: no agent is listening "
        "(is lineage-agent running?)\n"
    )


def test_peer_outside_group_is_refused(tmp_path: Path) -> None:
    """A peer whose user is not in the socket's group gets `permission denied`."""
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    # The test's own temporary tree is private to root; the socket must be reachable.
    public = Path(tempfile.mkdtemp(prefix="lineage-control-"))
    public.chmod(0o755)
    sock = public / "control.sock"
    try:
        with spark_agent(tmp_path / "agent", events_dir, sock) as (agent, _config, _):
            os.chmod(sock, 0o666)  # even with the mode opened up, the uid check refuses
            probe = (
                "import os, socket; os.setgid(65534); os.setuid(65534); "
                f"s = socket.socket(socket.AF_UNIX); s.connect({str(sock)!r}); "
                's.sendall(b\'{"command": "status"}\\n\'); print(s.recv(4096).decode())'
            )
            result = subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30
            )
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout) == {"ok": False, "error": "permission denied"}
            agent.wait_log("control_refused", peer="uid 65534 (nobody)")
            assert agent.stop() == 0
    finally:
        shutil.rmtree(public, ignore_errors=True)


def test_cli_and_socket_agree_on_the_grace_bounds() -> None:
    """`job stop --grace` and the control socket accept the same default and maximum."""
    from agent.commands import cli
    from agent.service.control import handlers as control

    assert (cli.STOP_GRACE, cli.MAX_STOP_GRACE) == (control.STOP_GRACE, control.MAX_STOP_GRACE)


class _SharedState:
    """A shared state that notes the thread of each call: the question is only where the
    server's handlers run a database round trip, which needs no PostgreSQL server."""

    owner = "agent-a"
    lease_seconds = 30.0
    write_errors = (OSError,)
    remote = True

    def __init__(self) -> None:
        self.threads: list[int] = []

    def leases(self) -> dict[str, tuple[str, int, float]]:
        self.threads.append(threading.get_ident())
        return {"app-1": ("agent-a", 3, 12.0)}

    def record_verdict(self, *_args: Any) -> bool:
        self.threads.append(threading.get_ident())
        return True

    def acquire(self, app_key: str, *, steal: bool = True) -> int | None:
        return None

    def release(self, app_key: str, token: int) -> None:
        return None

    def heartbeat(self, held: Any, written: Any, *, judge: bool = True) -> Any:
        return None


async def test_lease_and_verdict_queries_run_off_the_loop(tmp_path: Path) -> None:
    """Status reads the leases and exec_end writes a verdict of a shared state in a worker
    thread, never on the event loop's."""
    state = _SharedState()
    agent = types.SimpleNamespace(state_db=state, applications=None)
    handlers = ControlServer(agent, str(tmp_path / "control.sock")).handlers
    assert await handlers.leases() == {
        "agent_id": "agent-a",
        "leases": [{"key": "app-1", "owner": "agent-a", "token": 3, "seconds_left": 12.0}],
    }
    reply = await handlers.exec_end({"exec_id": "e" * 32, "status": 0}, os.getuid())
    assert reply["recorded"] is True
    assert len(state.threads) == 2
    assert threading.get_ident() not in state.threads
