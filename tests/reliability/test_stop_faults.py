"""`job stop` of a real PySpark application with a SQL write in flight: every run of it ends
ABORT with the stop's reason, whether the agent stays up or is SIGKILLed right after the stop
and started again (then without waiting `stale_after`)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.harness import (
    agent,
    assert_runs_whole,
    check_events,
    cli,
    config_file,
    file_lineage,
    kill,
    read_jsonl,
    stop_and_account,
    wait_until,
)
from tests.spark_logs import JOBS, spark_env

pytestmark = pytest.mark.spark


def written(out: Path) -> list[dict[str, Any]]:
    return read_jsonl(out) if out.exists() else []


def terminals(out: Path) -> dict[str, tuple[str, str]]:
    """Job name -> (terminal event type, errorMessage) of every ended run."""
    ended: dict[str, tuple[str, str]] = {}
    for event in written(out):
        if event["eventType"] in ("COMPLETE", "FAIL", "ABORT"):
            facet = event["run"]["facets"].get("errorMessage", {})
            ended[event["job"]["name"]] = (event["eventType"], facet.get("message", ""))
    return ended


@pytest.mark.parametrize(
    ("grace", "agent_killed"),
    [(None, False), (None, True), ("0", True)],
    ids=["agent_up", "agent_killed", "sigkill_agent_killed"],
)
def test_job_stop_reason_reaches_every_run(
    workdir: Path, grace: str | None, agent_killed: bool
) -> None:
    """The SQL write in flight and the application both end ABORT with `stopped by ...:
    tester`; with the agent SIGKILLed after the stop, the restarted agent ends them at once,
    also when the driver was SIGKILLed and wrote no ApplicationEnd."""
    events_dir, job_dir, out = workdir / "events", workdir / "job", workdir / "lineage.jsonl"
    events_dir.mkdir()
    job_dir.mkdir()
    config = config_file(workdir, file_lineage(out), spark={"event_log_dirs": [str(events_dir)]})
    with agent(config) as process:
        with (job_dir / "spark.log").open("wb") as spark_log:
            job = subprocess.Popen(
                [sys.executable, str(JOBS / "long_sql.py"), str(events_dir), str(job_dir)],
                stdout=spark_log,
                stderr=subprocess.STDOUT,
                env=spark_env(),
                cwd=job_dir,
            )
        try:
            wait_until("the write's tasks", lambda: (job_dir / "started").exists())
            app_id = (job_dir / "started").read_text()
            wait_until("two STARTs", lambda: len(written(out)) >= 2)
            stopped = cli(
                "job",
                "stop",
                app_id,
                "--reason",
                "tester",
                "--config",
                str(config),
                *(("--grace", grace) if grace is not None else ()),
            )
            assert stopped.returncode == 0, stopped.stderr
            if agent_killed:
                kill(process)
        finally:
            if job.poll() is None:
                job.kill()
            job.wait(60)
        if not agent_killed:
            wait_until("two terminal events", lambda: len(terminals(out)) == 2)
            stop_and_account(process)
    if agent_killed:
        with agent(config) as process:
            began = time.monotonic()
            wait_until("two terminal events", lambda: len(terminals(out)) == 2)
            assert time.monotonic() - began < 60  # stale_after is 10 minutes
            stop_and_account(process)
    uid = os.getuid()
    reason = f"stopped by uid {uid} ({pwd.getpwuid(uid).pw_name}): tester"
    assert sorted(terminals(out).values()) == [("ABORT", reason), ("ABORT", reason)]
    events = read_jsonl(out)
    assert_runs_whole(events)
    check_events(events, workdir / "ed25519.key")
