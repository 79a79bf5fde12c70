"""The agent process's lifecycle: sd_notify, reloads, enabled: false, the file transport,
the metrics endpoint and `lineage-agent verify` on what it wrote."""

from __future__ import annotations

import json
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.agentproc import assert_identity, keygen, metric, run_agent, write_config
from tests.collector import Collector


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    keygen(tmp_path)
    return tmp_path


def file_lineage(path: Path, **extra: object) -> dict[str, object]:
    return {"enabled": True, "transport": "file", "file": {"path": str(path), **extra}}


def lines_of(*files: Path) -> list[dict[str, object]]:
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def wait_metric(
    agent: object, name: str, value: float, timeout: float = 20, **labels: str
) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        samples: dict[str, float] = agent.scrape()  # type: ignore[attr-defined]
        if metric(samples, name, **labels) >= value or time.monotonic() > deadline:
            return samples
        time.sleep(0.05)


def test_sd_notify_ready_reload_watchdog_stopping(workdir: Path) -> None:
    """systemd hears READY=1, RELOADING=1 then READY=1 around SIGHUP, WATCHDOG=1, STOPPING=1."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    address = str(workdir / "notify.sock")
    notify.bind(address)
    notify.settimeout(10)
    config = write_config(workdir, file_lineage(workdir / "events.jsonl"))
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"}
    messages: list[str] = []

    def until(field: str) -> None:
        while not any(field in m.split("\n") for m in messages):
            messages.append(notify.recv(4096).decode())

    with run_agent(config, env=env) as agent:
        until("READY=1")
        until("WATCHDOG=1")
        agent.signal(signal.SIGHUP)
        until("RELOADING=1")
        reloading = next(i for i, m in enumerate(messages) if "RELOADING=1" in m)
        while not any("READY=1" in m for m in messages[reloading + 1 :]):
            messages.append(notify.recv(4096).decode())
        assert any(m.startswith("RELOADING=1\nMONOTONIC_USEC=") for m in messages)
        agent.signal(signal.SIGTERM)
        until("STOPPING=1")
        assert agent.proc.wait(20) == 0
    notify.close()


def test_reload_good_and_bad(workdir: Path) -> None:
    """A good reload moves shipping to the new endpoint; a bad one keeps the old config."""
    with Collector() as first, Collector() as second:
        lineage = {"enabled": True, "transport": "http", "http": {"endpoint": first.url}}
        config = write_config(workdir, lineage)
        with run_agent(config, events=4000, rate=200) as agent:
            first.wait_for(5, timeout=20)
            text = config.read_text()
            config.write_text(text.replace(first.url, second.url))
            agent.signal(signal.SIGHUP)
            agent.wait_log("reload_ok")
            second.wait_for(5, timeout=20)
            config.write_text("lineage:\n  enabled: true\n  queue_szie: 5\n")
            agent.signal(signal.SIGHUP)
            failed = agent.wait_log("reload_failed")
            assert failed["error"] == (
                f"{config}:3: lineage.queue_szie: unknown key (did you mean 'queue_size'?)"
            )
            count = len(second.events)
            second.wait_for(count + 5, timeout=20)
            samples = agent.scrape()
            assert metric(samples, "lineage_config_reloads_total", result="ok") == 1
            assert metric(samples, "lineage_config_reloads_total", result="error") == 1
            assert agent.stop() == 0
            samples_final = agent.wait_log("agent_stopped")["accounting"]["http"]
    assert samples_final["offered"] == (
        samples_final["delivered"] + samples_final["dropped"] + samples_final["queued"]
    )
    assert samples_final["dropped"] == 0
    assert len(first.events) + len(second.events) == samples_final["delivered"]


def test_disabled_starts_nothing_and_says_so(workdir: Path) -> None:
    """enabled: false logs why, serves nothing, and stops cleanly."""
    config = write_config(workdir, {"enabled": False})
    with run_agent(config, wait=False) as agent:
        line = agent.wait_log("lineage_disabled")
        assert line["detail"] == "lineage.enabled is false; nothing is watched or shipped"
        assert agent.stop() == 0


def test_file_transport_rotates_and_verifies(workdir: Path) -> None:
    """Rotation splits at whole lines into <path>.<nanos>; every line verifies with `verify`."""
    target = workdir / "out" / "events.jsonl"
    target.parent.mkdir()
    config = write_config(workdir, file_lineage(target, rotation_size_mb=0.02))
    with run_agent(config, events=60) as agent:
        samples = wait_metric(agent, "lineage_events_delivered_total", 60, transport="file")
        assert_identity(samples, "file")
        assert agent.stop() == 0
    rotated = sorted(
        p
        for p in target.parent.iterdir()
        if p.name.startswith("events.jsonl.") and p.name != "events.jsonl.lock"
    )
    assert rotated, "expected at least one rotation"
    suffixes = [p.name.removeprefix("events.jsonl.") for p in rotated]
    assert all(s.isdigit() and len(s) >= 19 for s in suffixes), suffixes
    assert all(p.stat().st_size >= 0.02 * 1024 * 1024 for p in rotated)
    events = lines_of(*rotated, target)
    assert len(events) == 60
    pub = subprocess.run(
        [sys.executable, "-m", "agent", "pubkey", "--key", str(workdir / "ed25519.key")],
        capture_output=True,
        text=True,
        check=True,
    )
    key = pub.stdout.split()[0]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent",
            "verify",
            *map(str, [*rotated, target]),
            "--public-key",
            key,
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tampered = workdir / "tampered.jsonl"
    lines = rotated[0].read_text().splitlines()
    assert '"eventType":"COMPLETE"' in lines[1]
    lines[1] = lines[1].replace('"eventType":"COMPLETE"', '"eventType":"FAIL"', 1)
    tampered.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "agent", "verify", str(tampered), "--public-key", key],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert f"{tampered}:2: signature does not verify" in result.stdout


def test_rotation_zero_never_rotates(workdir: Path) -> None:
    """rotation_size_mb: 0 keeps one file however large it grows."""
    target = workdir / "events.jsonl"
    config = write_config(workdir, file_lineage(target, rotation_size_mb=0))
    with run_agent(config, events=200) as agent:
        wait_metric(agent, "lineage_events_delivered_total", 200, transport="file")
        assert agent.stop() == 0
    assert [p.name for p in workdir.iterdir() if p.name.startswith("events.jsonl")] == [
        "events.jsonl",
        "events.jsonl.lock",
    ] or sorted(p.name for p in workdir.iterdir() if p.name.startswith("events.jsonl")) == [
        "events.jsonl",
        "events.jsonl.lock",
    ]
    assert len(lines_of(target)) == 200


def test_second_writer_on_same_path_refused(workdir: Path) -> None:
    """A second agent writing the same file refuses to start with exit 78."""
    target = workdir / "events.jsonl"
    config = write_config(workdir, file_lineage(target))
    other = workdir / "other"
    other.mkdir()
    keygen(other)
    config2 = write_config(other, file_lineage(target))
    with run_agent(config) as agent, run_agent(config2, wait=False) as second:
        assert second.proc.wait(20) == 78
        assert f"another lineage-agent is writing {target}" in second.raw_output()
        assert agent.stop() == 0


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


def test_write_error_counted_and_survived(workdir: Path) -> None:
    """Past the file-size limit writes fail: counted as write_error, the agent keeps running."""
    target = workdir / "events.jsonl"
    config = write_config(workdir, file_lineage(target, rotation_size_mb=0))
    with run_agent(config, events=400, rate=400, preexec_fn=_limit_file_size) as agent:
        samples = wait_metric(agent, "lineage_events_dropped_total", 1)
        deadline = time.monotonic() + 20
        while True:
            samples = agent.scrape()
            delivered = metric(samples, "lineage_events_delivered_total", transport="file")
            dropped = metric(samples, "lineage_events_dropped_total")
            if delivered + dropped == 400 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert dropped > 0 and delivered > 0
        assert (
            metric(
                samples,
                "lineage_events_dropped_by_reason_total",
                transport="file",
                reason="write_error",
            )
            == dropped
        )
        assert_identity(samples, "file")
        assert agent.metrics_url is not None
        assert httpx.get(agent.metrics_url.replace("/metrics", "/healthz")).json()["status"] == "ok"
        assert agent.stop() == 0
    assert len(lines_of(target)) == delivered


def test_metrics_endpoint_parses_and_names(workdir: Path) -> None:
    """/metrics parses with prometheus_client and carries every documented series."""
    config = write_config(workdir, file_lineage(workdir / "events.jsonl"))
    with run_agent(config, events=10) as agent:
        samples = wait_metric(agent, "lineage_events_delivered_total", 10, transport="file")
        for name in (
            "lineage_events_dropped_total",
            "lineage_queue_capacity{transport=file}",
            "lineage_queue_depth{transport=file}",
            "lineage_events_emitted_total{event_type=START}",
            "lineage_delivery_latency_seconds_count{transport=file}",
            "lineage_config_reloads_total{result=ok}",
            "lineage_build_info{version=0.1.0}",
        ):
            assert name in samples, name
        assert samples["lineage_queue_capacity{transport=file}"] == 1024
        assert agent.stop() == 0
    cfg = yaml.safe_load(config.read_text())
    assert cfg["metrics"]["listen"].startswith("127.0.0.1:")
