"""The real agent (`python -m agent run`) as a child process, over several lives: each life
ends with SIGTERM (numbers: its last scrape completed by its `agent_stopped` line) or SIGKILL
(numbers: its last scrape, taken just before the signal)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.agentproc import AgentProcess
from tests.faults.report import Life, apply_stopped, life_from_samples

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0


def keygen(path: Path) -> None:
    """A fresh signing key made with the agent's own command."""
    subprocess.run(
        [sys.executable, "-m", "agent", "keygen", "--out", str(path)],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )


def write_config(
    directory: Path, endpoint: str, namespace: str, events: Path, http: dict[str, Any]
) -> Path:
    """The agent's config: http transport to Marquez, the scenario's namespace, its own key,
    state and control socket, loopback metrics on an ephemeral port, the followed directory."""
    config = {
        "lineage": {
            "enabled": True,
            "transport": "http",
            "namespace": namespace,
            "http": {"endpoint": endpoint, **http},
        },
        "signing": {"key_path": str(directory / "ed25519.key")},
        "metrics": {"listen": "127.0.0.1:0"},
        "state_dir": str(directory / "state"),
        "control_socket": str(directory / "control.sock"),
        "logging": {"level": "info", "format": "json"},
        "spark": {"event_log_dirs": [str(events)], "poll_interval": "200ms", "replay_horizon": 0},
    }
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class AgentLives:
    """Start, scrape, SIGTERM and SIGKILL the agent; `lives` holds each ended life."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.process: AgentProcess | None = None
        self.lives: list[Life] = []
        self.last: dict[str, float] = {}

    def start(self) -> None:
        log_path = self.config.parent / f"agent-{len(self.lives) + 1}.log"
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "agent", "run", "--config", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
        self.process = AgentProcess(proc, log_path)
        self.last = {}
        self.process.wait_started(timeout=START_TIMEOUT)

    def scrape(self) -> dict[str, float]:
        """One scrape of the running life's `/metrics` (the last good one on failure)."""
        if self.process is not None and self.process.proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError, AssertionError):
                self.last = self.process.scrape()
        return self.last

    def current(self) -> Life:
        """The running life's numbers now."""
        return life_from_samples(self.scrape(), "running")

    def produced_before(self) -> int:
        return sum(life.produced for life in self.lives)

    def sigterm(self) -> Life:
        process = self._running()
        samples = self.scrape()
        process.proc.send_signal(signal.SIGTERM)
        try:
            code = process.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.proc.kill()
            code = process.proc.wait()
        life = life_from_samples(samples, "sigterm" if code == 0 else f"sigterm exit {code}")
        for line in reversed(process.logs()):
            if line.get("event") == "agent_stopped" and isinstance(line.get("accounting"), dict):
                apply_stopped(life, line["accounting"])
                break
        return self._ended(life)

    def sigkill(self) -> Life:
        process = self._running()
        samples = self.scrape()
        process.proc.kill()
        process.proc.wait()
        return self._ended(life_from_samples(samples, "sigkill"))

    def close(self) -> None:
        """End a life still running (SIGTERM), so that its numbers are kept."""
        if self.process is not None and self.process.proc.poll() is None:
            self.sigterm()
        elif self.process is not None:
            self._ended(life_from_samples(self.last, f"exited {self.process.proc.returncode}"))

    def _running(self) -> AgentProcess:
        if self.process is None or self.process.proc.poll() is not None:
            raise RuntimeError("the agent is not running")
        return self.process

    def _ended(self, life: Life) -> Life:
        self.lives.append(life)
        self.process = None
        return life

    def settle(self, expected: int, timeout: float, quiet: float = 3.0) -> str | None:
        """Wait until the running life is idle: nothing queued, every offered event resolved,
        the numbers unchanged for `quiet` s, and all `expected` events produced over the lives
        (or nothing produced for 20 s: a lost life may never make some). None when idle, else
        what was still going on at `timeout`."""
        deadline = time.monotonic() + timeout
        seen: tuple[int, ...] | None = None
        since = time.monotonic()
        state = "no scrape"
        while time.monotonic() < deadline:
            if self.process is None or self.process.proc.poll() is not None:
                return "the agent exited"
            life = self.current()
            resolved = life.delivered + sum(life.dropped.values()) + sum(life.unconfirmed.values())
            numbers = (life.produced, life.offered, resolved, life.queued)
            if numbers != seen:
                seen, since = numbers, time.monotonic()
            idle = life.queued == 0 and resolved == life.offered
            made = self.produced_before() + life.produced
            quiet_for = time.monotonic() - since
            if idle and quiet_for >= quiet and (made >= expected or quiet_for >= 20):
                return None
            state = f"produced {made} of {expected}, queued {life.queued}, offered {life.offered}"
            time.sleep(0.5)
        return f"not idle after {timeout:g} s: {state}"
