"""Run the real agent as a child process and look at it from outside (logs, metrics, signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]


def cli(
    *args: str, check: bool = False, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`lineage-agent ARGS...` as a child process run from the checkout, its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        check=check,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def keygen(directory: Path) -> Path:
    """A fresh signing key made with the agent's own command."""
    key = directory / "ed25519.key"
    subprocess.run(
        [sys.executable, "-m", "agent", "keygen", "--out", str(key)],
        check=True,
        capture_output=True,
    )
    return key


def write_config(directory: Path, lineage: Mapping[str, Any], **sections: Any) -> Path:
    """A config file for a test agent: loopback metrics on an ephemeral port, own state dir."""
    config: dict[str, Any] = {
        "lineage": dict(lineage),
        "signing": {"key_path": str(directory / "ed25519.key")},
        "metrics": {"listen": "127.0.0.1:0"},
        "state_dir": str(directory / "state"),
        "control_socket": str(directory / "control.sock"),
        "logging": {"level": "info", "format": "json"},
    }
    config.update(sections)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class AgentProcess:
    """A running agent: its process, its JSON log lines and its metrics endpoint."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path
        self.metrics_url: str | None = None

    def logs(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"event": "non_json", "text": line})
        return lines

    def raw_output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def print_tail(self, lines: int = 60) -> None:
        """Print the log's last `lines` lines: pytest shows them in a failing test's report,
        so a failure seen only in CI says what the agent did."""
        print(f"--- the agent's log ({self.log_path.name}), last {lines} lines ---")
        print("\n".join(self.raw_output().splitlines()[-lines:]))

    def wait_log(self, event: str, timeout: float = 20, **fields: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.logs():
                if line.get("event") == event and all(line.get(k) == v for k, v in fields.items()):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(
            f"no log line {event!r} {fields} (exit {self.proc.poll()}):\n{self.raw_output()}"
        )

    def wait_started(self, timeout: float = 20) -> None:
        line = self.wait_log("agent_started", timeout)
        if line.get("metrics"):
            self.metrics_url = f"http://{line['metrics']}/metrics"

    def scrape(self) -> dict[str, float]:
        """Every sample of /metrics as `name{label=value,...}` -> value, parsed by prometheus."""
        assert self.metrics_url is not None
        text = httpx.get(self.metrics_url, timeout=5).text
        samples: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return samples

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 30.0) -> int:
    """SIGTERM, then SIGKILL after `timeout`; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@contextmanager
def run_agent(
    config: Path,
    *,
    events: int = 0,
    rate: float = 0.0,
    env: Mapping[str, str] | None = None,
    args: list[str] | None = None,
    wait: bool = True,
    preexec_fn: Any = None,
) -> Iterator[AgentProcess]:
    """Start `python -m agent.testing` (the real daemon on an in-memory source)."""
    log_path = config.parent / f"agent-{time.monotonic_ns()}.log"
    command = [
        sys.executable,
        "-m",
        "agent.testing",
        "--config",
        str(config),
        "--events",
        str(events),
        "--rate",
        str(rate),
        *(args or []),
    ]
    inherited = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    child_env = {**inherited, **(env or {})}
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env,
            cwd=ROOT,
            preexec_fn=preexec_fn,
        )
    agent = AgentProcess(proc, log_path)
    try:
        if wait:
            agent.wait_started()
        yield agent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def metric(samples: Mapping[str, float], name: str, **labels: str) -> float:
    key = name
    if labels:
        key += "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"
    return samples.get(key, 0.0)


def accounting(
    samples: Mapping[str, float], transport: str
) -> tuple[float, float, float, float, float]:
    """(produced, delivered, dropped, unconfirmed for this transport, queued) from one scrape."""
    produced = sum(v for k, v in samples.items() if k.startswith("lineage_events_emitted_total{"))
    delivered = metric(samples, "lineage_events_delivered_total", transport=transport)
    dropped = labelled(samples, "lineage_events_dropped_by_reason_total", transport)
    unconfirmed = labelled(samples, "lineage_events_unconfirmed_total", transport)
    queued = metric(samples, "lineage_queue_depth", transport=transport)
    return produced, delivered, dropped, unconfirmed, queued


def labelled(samples: Mapping[str, float], name: str, transport: str) -> float:
    """The sum of a counter's series of one transport, over every reason."""
    return sum(
        v for k, v in samples.items() if k.startswith(name + "{") and f"transport={transport}" in k
    )


def assert_identity(samples: Mapping[str, float], transport: str) -> None:
    """produced = delivered + dropped + unconfirmed + queued, for one transport."""
    produced, delivered, dropped, unconfirmed, queued = accounting(samples, transport)
    assert produced == delivered + dropped + unconfirmed + queued, (
        produced,
        delivered,
        dropped,
        unconfirmed,
        queued,
    )
