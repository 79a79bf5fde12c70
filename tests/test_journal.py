"""Log lines carry their syslog priority (`<N>`) when stdout is the journal, and only then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.agentproc import ROOT

# The agent's own logging set-up, in a process of its own whose stdout is the file given.
PROGRAM = """
import structlog
from agent.telemetry import logs
logs.configure("debug", "auto")
log = structlog.get_logger("agent.daemon")
log.debug("poll")
log.info("agent_started")
log.warning("transport_failing", transport="http")
log.error("reload_failed", error="bad")
log.critical("driver_lost")
"""


def run_with_stdout(out: Path, journal_stream: str | None) -> bytes:
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    if journal_stream is not None:
        env["JOURNAL_STREAM"] = journal_stream
    with out.open("wb") as stdout:
        subprocess.run(
            [sys.executable, "-c", PROGRAM], stdout=stdout, env=env, cwd=ROOT, check=True
        )
    return out.read_bytes()


def identity(path: Path) -> str:
    info = path.stat()
    return f"{info.st_dev}:{info.st_ino}"


def test_priority_prefix_when_stdout_is_the_journal(tmp_path: Path) -> None:
    """JOURNAL_STREAM naming stdout's device:inode puts <7>, <6>, <4>, <3>, <2> before each
    JSON line, by level."""
    out = tmp_path / "journal"
    out.touch()
    lines = run_with_stdout(out, identity(out)).splitlines()
    assert [line[:4] for line in lines] == [b"<7>{", b"<6>{", b"<4>{", b"<3>{", b"<2>{"]
    events = [json.loads(line[3:]) for line in lines]
    assert [(e["event"], e["level"]) for e in events] == [
        ("poll", "debug"),
        ("agent_started", "info"),
        ("transport_failing", "warning"),
        ("reload_failed", "error"),
        ("driver_lost", "critical"),
    ]


def test_plain_json_when_stdout_is_not_the_journal(tmp_path: Path) -> None:
    """Without JOURNAL_STREAM, or with one naming another file (stdout redirected), every
    line is plain JSON."""
    out = tmp_path / "out"
    other = tmp_path / "other"
    other.touch()
    for journal_stream in (None, identity(other), "garbage"):
        lines = run_with_stdout(out, journal_stream).splitlines()
        assert len(lines) == 5
        assert [json.loads(line)["level"] for line in lines] == [
            "debug",
            "info",
            "warning",
            "error",
            "critical",
        ], journal_stream
