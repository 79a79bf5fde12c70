"""Special files where the agent expects regular ones, under real processes: a FIFO, a
character device or a huge file as the config (`config check` and SIGHUP), and FIFOs planted
in a watched event-log directory. Nothing blocks, the agent keeps shipping the other logs,
answers `status` and stops on SIGTERM; what it refused is counted and logged once per path."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent.service.control.client import request
from tests.agentproc import metric
from tests.reliability import harness
from tests.samples import sample_bytes

SUCCESS = sample_bytes("success")
SUCCESS_APP = "local-1795495169157"


def config_check(path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """`lineage-agent config check PATH` as a child process, and the CPU seconds it used."""
    started = children_cpu()
    result = subprocess.run(
        [sys.executable, "-m", "agent", "config", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=harness.PATIENCE,
        cwd=harness.ROOT,
    )
    return result, children_cpu() - started


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def test_config_check_refuses_special_and_huge_files_at_once(tmp_path: Path) -> None:
    """A FIFO, /dev/zero and a 100 MB file are refused without being read, each in the CPU
    time of a start."""
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as out:
        out.truncate(100 * 1024 * 1024)
    cases = [
        (fifo, f"{fifo}: cannot read: not a regular file (a FIFO)"),
        (Path("/dev/zero"), "/dev/zero: cannot read: not a regular file (a character device)"),
        (
            huge,
            f"{huge}: cannot read: 104857600 bytes, more than a config file may have (1 MiB)",
        ),
    ]
    for path, message in cases:
        result, took = config_check(path)
        assert (result.returncode, result.stdout, result.stderr) == (
            78,
            "",
            f"lineage-agent: {message}\n",
        )
        # CPU time: a busy machine does not lengthen it, and reading any of them would
        # (/dev/zero for ever, 100 MB through the YAML parser); a FIFO that blocked the
        # read would not use CPU but would not return within PATIENCE either.
        assert took < 10, (path, took)


def test_fifo_config_on_sighup_and_fifos_in_the_event_log_directory(workdir: Path) -> None:
    """FIFOs as the config at SIGHUP and as event files: refused without blocking anything."""
    clean = workdir / "clean"
    clean.mkdir()
    (clean / SUCCESS_APP).write_bytes(SUCCESS)
    events_dir = workdir / "events"
    events_dir.mkdir()
    # Planted by anyone who can write to the directory: a single-file log and a rolling one.
    os.mkfifo(events_dir / "local-1000000000001")
    rolling = events_dir / "eventlog_v2_local-1000000000002"
    rolling.mkdir()
    (rolling / "appstatus_local-1000000000002.inprogress").touch()
    os.mkfifo(rolling / "events_1_local-1000000000002")
    config = harness.config_file(
        workdir,
        harness.file_lineage(workdir / "lineage.jsonl", rotation_size_mb=0),
        spark={"event_log_dirs": [str(events_dir)]},
    )
    saved = config.read_bytes()
    with harness.agent(config) as process:
        (events_dir / SUCCESS_APP).write_bytes(SUCCESS)
        harness.wait_until("the real log finished", lambda: finished(process) == 1)
        unreadable = sorted(
            (line["log"], line["error"])
            for line in process.logs()
            if line.get("event") == "eventlog_unreadable"
        )
        assert unreadable == [
            (str(rolling), "events_1_local-1000000000002: not a regular file (a FIFO)"),
            (str(events_dir / "local-1000000000001"), "not a regular file (a FIFO)"),
        ]
        skipped = metric(
            process.scrape(), "lineage_eventlog_lines_skipped_total", reason="special_file"
        )
        assert skipped == 2
        # The config replaced by a FIFO nobody writes to: the reload fails at once.
        config.unlink()
        os.mkfifo(config)
        process.signal(signal.SIGHUP)
        failed = process.wait_log("reload_failed", timeout=harness.PATIENCE)
        assert failed["error"] == f"{config}: cannot read: not a regular file (a FIFO)"
        answer: dict[str, Any] = request(str(workdir / "control.sock"), {"command": "status"})
        assert answer["ok"], answer
        harness.assert_healthy(process)
        samples = harness.settle(process, "file")
        assert harness.drops(samples, "file") == {}
        delivered = metric(samples, "lineage_events_delivered_total", transport="file")
        accounting = harness.stop_and_account(process, timeout=harness.PATIENCE)
    config.unlink()
    config.write_bytes(saved)
    events = harness.read_jsonl(workdir / "lineage.jsonl")
    assert len(events) == delivered == accounting["file"]["delivered"]
    assert accounting["file"]["offered"] == (
        accounting["file"]["delivered"]
        + accounting["file"]["dropped"]
        + accounting["file"]["queued"]
    )
    harness.check_events(events, workdir / "ed25519.key")
    assert [harness.unsigned(e) for e in events] == harness.reference_events(clean)


def finished(process: Any) -> int:
    return sum(line.get("event") == "eventlog_finished" for line in process.logs())
