"""One real PySpark pipeline (several small applications in one JVM) under a collector that
is down, failing, hanging and healthy in turn, switching between applications: the
applications never fail or wait on lineage, and the accounting is exact. A file of its own
so that it runs beside the in-memory collector-fault tests, not after them."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.agentproc import AgentProcess, keygen, metric
from tests.collector import closed_port
from tests.reliability import harness
from tests.spark_logs import spark_env

JOB = Path(__file__).resolve().parent / "sparkjob.py"
APP_TIMEOUT = 300.0  # one small application on a busy machine, JVM start included
# (name, watched by the agent, what the collector does meanwhile)
PHASES: list[tuple[str, bool, Any]] = [
    ("warmup", False, None),  # the JVM starts here; not timed against the others
    ("baseline", False, None),  # the same application, its log not watched: no agent involved
    ("down", True, None),  # nothing listens on the collector's port
    ("failing", True, 503),
    ("hanging", True, "hang"),
    ("healthy", True, 201),
]
TALLY_KEY = {"failing": 503, "hanging": "hang", "healthy": 201}


def queued_still(process: AgentProcess) -> dict[str, float]:
    """Scrape until two scrapes in a row agree and the collector was tried and not reached:
    the events made so far wait in the queue."""
    before: dict[str, float] | None = None
    deadline = time.monotonic() + harness.PATIENCE
    while True:
        samples = process.scrape()
        tried = metric(samples, harness.NOT_SENT, transport="http", reason="connect")
        keys = (
            "lineage_queue_depth{transport=http}",
            "lineage_events_offered_total{transport=http}",
        )
        if tried and before is not None and all(samples.get(k) == before.get(k) for k in keys):
            return samples
        before = samples
        assert time.monotonic() < deadline, process.raw_output()[-3000:]
        time.sleep(0.5)


def wait_file(path: Path, job: subprocess.Popen[bytes], output: Path) -> dict[str, Any]:
    deadline = time.monotonic() + APP_TIMEOUT
    while not path.exists():
        if job.poll() is not None:
            raise AssertionError(f"sparkjob.py exited {job.returncode}:\n{output.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {path.name} within {APP_TIMEOUT:g}s")
        time.sleep(0.1)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


@pytest.mark.spark
def test_pipeline_unaffected_by_collector_faults(tmp_path: Path) -> None:
    """Real PySpark apps finish under a down, failing, hanging collector (retries, the
    late-answer wait and the terminal resend off); exact accounting: what waited for a
    collector that was down went later, refusals dropped, requests without an answer
    unconfirmed."""
    keygen(tmp_path)
    watched, quiet, work = tmp_path / "events", tmp_path / "quiet", tmp_path / "work"
    for directory in (watched, quiet, work):
        directory.mkdir()
    port = closed_port()
    url = f"http://127.0.0.1:{port}/api/v1/lineage"
    config = harness.config_file(
        tmp_path,
        {
            **harness.http_lineage(url, timeout="1s", **harness.AT_ONCE),
            "resend_unconfirmed_terminal": False,
        },
        spark={"event_log_dirs": [str(watched)]},
    )
    collector: harness.TallyCollector | None = None
    output = work / "sparkjob.log"
    with harness.agent(config) as process, output.open("wb") as log:
        specs = [f"{name}={watched if seen else quiet}" for name, seen, _ in PHASES]
        job = subprocess.Popen(
            [sys.executable, str(JOB), str(work), *specs],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=spark_env(),
            cwd=work,
        )
        phases: dict[str, dict[str, Any]] = {}
        try:
            before: dict[str, float] = {}
            for name, seen, behaviour in PHASES:
                if behaviour is not None:
                    if collector is None:
                        collector = harness.TallyCollector(behaviour, port=port).start()
                    collector.set_behaviour(behaviour)
                (work / f"go-{name}").touch()
                done = wait_file(work / f"done-{name}", job, output)
                phases[name] = done
                if not seen:
                    continue
                process.wait_log(
                    "eventlog_finished", timeout=harness.PATIENCE, app_id=done["app_id"]
                )
                # With nothing listening the events wait in the queue.
                samples = (
                    queued_still(process) if behaviour is None else harness.settle(process, "http")
                )
                now = {
                    "produced": harness.produced(samples),
                    "delivered": metric(
                        samples, "lineage_events_delivered_total", transport="http"
                    ),
                    "queued": metric(samples, "lineage_queue_depth", transport="http"),
                    **{f"drop:{k}": v for k, v in harness.drops(samples, "http").items()},
                    **{
                        f"unconfirmed:{k}": v
                        for k, v in harness.unconfirmed(samples, "http").items()
                    },
                }
                done["delta"] = {
                    k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)
                }
                before = now
            assert job.wait(60) == 0, output.read_text()[-3000:]
            harness.assert_healthy(process)
            accounting = harness.stop_and_account(process)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait(60)
            if collector is not None:
                collector.stop()
    assert collector is not None

    # Every watched application made the same lineage. With nothing listening it waited in
    # the queue and went to the failing collector with the next application's; the hanging
    # collector took its requests without answering (unconfirmed).
    counts = {name: phases[name]["delta"]["produced"] for name, seen, _ in PHASES if seen}
    assert len(set(counts.values())) == 1 and counts["down"] >= 6, counts
    per_app = counts["down"]
    assert phases["down"]["delta"] == {"produced": per_app, "queued": per_app}
    assert phases["failing"]["delta"] == {
        "produced": per_app,
        "queued": -per_app,
        "drop:http_503": 2 * per_app,
    }
    assert phases["hanging"]["delta"] == {"produced": per_app, "unconfirmed:timeout": per_app}
    assert phases["healthy"]["delta"] == {"produced": per_app, "delivered": per_app}
    assert collector.tally(503) == 2 * per_app
    assert collector.tally("hang") == per_app
    assert collector.tally(201) == collector.accepted == per_app
    total = 4 * per_app
    assert accounting == {
        "http": {
            "offered": total,
            "delivered": per_app,
            "dropped": 2 * per_app,
            "unconfirmed": per_app,
            "queued": 0,
        }
    }

    # What arrived is the healthy application's whole lineage: valid, verified, each run
    # START then exactly one terminal event; the application run ends COMPLETE.
    events = collector.events
    assert harness.check_events(events, tmp_path / "ed25519.key") == per_app
    runs = harness.assert_runs_whole(events)
    assert all(types[-1] == "COMPLETE" for types in runs.values()), runs

    # The ledger in the state database tells the same story, event by event.
    with sqlite3.connect(tmp_path / "state" / "state.sqlite3") as db:
        ledger = Counter(
            (outcome, reason)
            for outcome, reason in db.execute(
                "SELECT outcome, reason FROM ledger WHERE transport = 'http'"
            )
        )
        claimed = db.execute("SELECT COUNT(*) FROM emitted").fetchone()[0]
    assert claimed == total
    assert ledger == Counter(
        {
            ("delivered", None): per_app,
            ("dropped", "http_503"): 2 * per_app,
            ("unconfirmed", "timeout"): per_app,
        }
    )

    # Wall time of each application, for the record: lineage faults never blocked one.
    times = {name: phases[name]["seconds"] for name, _, _ in PHASES}
    print(f"application seconds: {times}")
