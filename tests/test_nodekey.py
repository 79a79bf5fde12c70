"""The node's signing key is made by the agent at its first start, never by the installer:
made once (0600, its key id logged, the key never), reused after, never made by a reload."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
from pathlib import Path

import yaml

from agent.service.nodekey import make_key
from tests.agentproc import cli, run_agent, write_config
from tests.independent import public_key, verify


def keyed_config(tmp_path: Path, key: Path) -> Path:
    """A file-transport config whose signing key is `key`."""
    config = write_config(tmp_path, {"transport": "file", "file": {"path": str(tmp_path / "e")}})
    data = yaml.safe_load(config.read_text())
    data["signing"] = {"key_path": str(key)}
    data["spark"] = {"event_log_dirs": [str(tmp_path)]}
    config.write_text(yaml.safe_dump(data))
    return config


def test_first_start_makes_the_key_and_later_starts_reuse_it(tmp_path: Path) -> None:
    """With no key (nor its directory) the agent makes it, 0600 in a 0750 directory, logs
    `signing_key_created` with its key id and no key material, and signs with it; the next
    start logs no such line and signs with the same key."""
    key = tmp_path / "state" / "keys" / "ed25519.key"
    config = keyed_config(tmp_path, key)
    with run_agent(config, events=4, args=["--exit-when-done"]) as agent:
        assert agent.proc.wait(60) == 0, agent.raw_output()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o750
    key_id = cli("pubkey", "--key", str(key), "--id").stdout.strip()
    made = [line for line in agent.logs() if line["event"] == "signing_key_created"]
    assert made == [
        {
            "path": str(key),
            "key_id": key_id,
            "mode": "0600",
            "event": "signing_key_created",
            "level": "info",
            "timestamp": made[0]["timestamp"],
        }
    ]
    assert key.read_text().strip() not in agent.raw_output()
    [started] = [line for line in agent.logs() if line["event"] == "agent_started"]
    assert started["key_id"] == key_id
    first = key.read_bytes()

    with run_agent(config, events=4, args=["--exit-when-done"]) as again:
        assert again.proc.wait(60) == 0, again.raw_output()
    assert [line for line in again.logs() if line["event"] == "signing_key_created"] == []
    [started] = [line for line in again.logs() if line["event"] == "agent_started"]
    assert started["key_id"] == key_id
    assert key.read_bytes() == first
    events = (tmp_path / "e").read_text().splitlines()
    assert len(events) == 8
    trusted = public_key(key)
    for line in events:
        verify(json.loads(line), trusted)


def test_no_key_where_none_can_be_made_is_refused_by_run_and_check(tmp_path: Path) -> None:
    """A key path below a regular file: `config check` and `run` both refuse it (exit 78)
    with the same message, and nothing is made."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file\n")
    key = blocker / "ed25519.key"
    config = keyed_config(tmp_path, key)
    message = f"signing.key_path: {key}: cannot create private key file: Not a directory"
    checked = cli("config", "check", str(config))
    line = config.read_text().splitlines().index("  key_path: " + str(key)) + 1
    assert (checked.returncode, checked.stdout, checked.stderr) == (
        78,
        "",
        f"lineage-agent: {config}:{line}: {message}\nlineage-agent: hint: leave the path free "
        "and the agent makes the key at its first start, or make one now with `lineage-agent "
        "keygen --out PATH` as the service's user\n",
    )
    with run_agent(config, wait=False) as agent:
        assert agent.proc.wait(60) == 78
    assert agent.wait_log("start_refused")["error"] == message
    assert blocker.read_text() == "a file\n"


def test_config_check_notes_a_key_still_to_be_made(tmp_path: Path) -> None:
    """`config check` of a config whose key does not exist yet says ok, and a note that the
    agent makes it at its first start; it makes nothing itself."""
    key = tmp_path / "state" / "ed25519.key"
    config = keyed_config(tmp_path, key)
    checked = cli("config", "check", str(config))
    assert (checked.returncode, checked.stdout, checked.stderr) == (
        0,
        f"ok\nnote: signing.key_path: {key}: no key yet; the agent makes one (mode 0600) at "
        "its first start and logs its key id (signing_key_created)\n",
        "",
    )
    assert not key.parent.exists()


def test_a_reload_never_makes_a_key(tmp_path: Path) -> None:
    """SIGHUP with signing.key_path changed to a path that names nothing fails the reload
    (the running key stays) and makes no key there."""
    key = tmp_path / "ed25519.key"
    config = keyed_config(tmp_path, key)
    with run_agent(config, events=2) as agent:
        moved = tmp_path / "elsewhere" / "ed25519.key"
        moved.parent.mkdir()
        data = yaml.safe_load(config.read_text())
        data["signing"]["key_path"] = str(moved)
        config.write_text(yaml.safe_dump(data))
        agent.signal(signal.SIGHUP)
        failed = agent.wait_log("reload_failed")
        assert failed["error"] == f"signing.key_path: {moved}: private key file does not exist"
        assert not moved.exists()
        assert agent.stop() == 0


def test_racing_starts_make_one_key(tmp_path: Path) -> None:
    """Eight makers racing on one path: exactly one makes the key, the file is whole, and no
    temporary file is left beside it."""
    key = tmp_path / "keys" / "ed25519.key"
    barrier = threading.Barrier(8)
    made: list[bool] = []

    def maker() -> None:
        barrier.wait()
        made.append(make_key(str(key)))

    threads = [threading.Thread(target=maker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(made) == [False] * 7 + [True]
    assert os.listdir(key.parent) == ["ed25519.key"]
    assert cli("pubkey", "--key", str(key), "--id").returncode == 0
