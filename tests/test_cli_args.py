"""Command-line arguments an operator types: durations as the config writes them, -V."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent import __version__
from agent.commands.cli import build_parser
from tests.agentproc import ROOT


def lineage_agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300.0), ("90s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("12", 12.0), ("0", 0.0)],
)
def test_job_stop_grace_takes_durations_like_the_config(text: str, seconds: float) -> None:
    """`job stop --grace` reads 5m, 90s, 500ms, 1h and bare seconds, as the config does."""
    args = build_parser().parse_args(["job", "stop", "app-1", "--grace", text])
    assert args.grace == seconds


@pytest.mark.parametrize("text", ["2h", "5x", "nan", "inf", "-1s", "1e3"])
def test_a_grace_out_of_bounds_or_not_a_duration_is_a_usage_error(text: str) -> None:
    """Anything but a duration from 0 to 1h is refused with exit 2 and the accepted form."""
    ran = lineage_agent("job", "stop", "app-1", "--socket", "/nonexistent.sock", f"--grace={text}")
    assert ran.returncode == 2
    assert ran.stderr.endswith(
        f"lineage-agent job stop: error: argument --grace: expected a duration from 0 to 1h "
        f"(like 30s or 5m), got {text!r}\n"
    )


def test_exec_retry_for_takes_durations() -> None:
    """`exec --retry-for 2m` is 120 seconds."""
    args = build_parser().parse_args(["exec", "--retry-for", "2m", "--", "true"])
    assert args.retry_for == 120.0


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(flag: str) -> None:
    """-V and --version print the name and version, exit 0."""
    ran = lineage_agent(flag)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"lineage-agent {__version__}\n", "")
