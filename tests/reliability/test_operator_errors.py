"""Operator mistakes, made for real against real agents: out-of-range numbers in the config
(at start, in `config check` and in a SIGHUP), configs `config check` must refuse exactly as
`run` does, a second agent on the same control socket, the `pubkey` scripting path and bad
`job stop --grace` values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.control import request
from tests.reliability.harness import (
    PATIENCE,
    ROOT,
    assert_healthy,
    config_file,
    file_lineage,
    memory_agent,
    settle,
    stop_and_account,
)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`lineage-agent ARGS...` as a child process."""
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        cwd=ROOT,
        env=env,
    )


# -- pubkey ------------------------------------------------------------------------------------


def test_pubkey_output_feeds_verify_in_a_shell(workdir: Path) -> None:
    """`verify F --public-key $(lineage-agent pubkey --key K)` works as written in a shell."""
    target = workdir / "events.jsonl"
    config = config_file(workdir, file_lineage(target))
    with memory_agent(config, 12) as process:
        settle(process, "file", 12)
        stop_and_account(process)
    key = workdir / "ed25519.key"
    shown = cli("pubkey", "--key", str(key))
    assert shown.returncode == 0
    public, key_id = shown.stdout.strip(), cli("pubkey", "--key", str(key), "--id").stdout.strip()
    assert shown.stdout == f"{public}\n"
    assert shown.stderr == f"key id: {key_id}\n"
    assert key_id.startswith("sha256:") and "\n" not in key_id
    agent = f"{sys.executable} -m agent"
    script = f'{agent} verify "$1" --public-key $({agent} pubkey --key "$2")'
    result = subprocess.run(
        ["bash", "-c", script, "verify", str(target), str(key)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        cwd=ROOT,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "12 events checked, 12 verified, 0 failed\n",
        "key id: " + key_id + "\n",
    )


# -- job stop --grace --------------------------------------------------------------------------


@pytest.mark.parametrize("grace", ["nan", "inf", "-inf", "1e400", "-5", "3600.5", "soon", ""])
def test_job_stop_grace_out_of_range_is_a_usage_error(tmp_path: Path, grace: str) -> None:
    """`job stop --grace` outside 0..3600 seconds is an argparse error (exit 2), no traceback."""
    result = cli("job", "stop", "app-1", f"--grace={grace}", "--socket", str(tmp_path / "s"))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"lineage-agent job stop: error: argument --grace: expected seconds from 0 to 3600, "
        f"got {grace!r}"
    )
    assert "Traceback" not in result.stderr


def test_job_stop_grace_checked_by_the_agent_too(workdir: Path) -> None:
    """A control request with a grace outside 0..3600 is refused by the running agent."""
    config = config_file(workdir, file_lineage(workdir / "events.jsonl"))
    with memory_agent(config, 3) as process:
        socket = str(workdir / "control.sock")
        for grace, shown in [
            (float("nan"), "nan"),
            (float("inf"), "inf"),
            (-5, "-5"),
            (1e300, "1e+300"),
            ("10", "'10'"),
            (True, "True"),
        ]:
            answer = request(socket, {"command": "job_stop", "app_id": "memory", "grace": grace})
            assert answer == {
                "ok": False,
                "error": f"grace: expected seconds from 0 to 3600, got {shown}",
            }
        answer = request(socket, {"command": "job_stop", "app_id": "memory", "grace": 0})
        assert answer == {"ok": False, "error": "application memory is not running on this node"}
        assert_healthy(process)
        stop_and_account(process)
    for grace in ("0", "3600", "2.5"):
        result = cli("job", "stop", "memory", "--grace", grace, "--socket", socket)
        assert (result.returncode, result.stderr) == (
            1,
            f"lineage-agent: {socket}: no agent is listening (is lineage-agent running?)\n",
        )
