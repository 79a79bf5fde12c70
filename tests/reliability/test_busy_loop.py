"""No event log holds the daemon's event loop: while it translates a plan that takes seconds,
/metrics, /healthz and the control socket keep answering (the real daemon)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent.service.control.client import request
from tests.applog import unpacked
from tests.spark_scenarios import daemon_config, events_in, spark_daemon

SUCCESS = Path(__file__).resolve().parents[1] / "data" / "eventlogs" / "success.jsonl.zst"
ANSWER_WITHIN = 1.0  # seconds for each answer, however long the translation takes
PROJECT = "Output [3]: [id#0L, (id#0L % 10) AS k#1L, cast(id#0L as string) AS s#2]"
RANGE = "Arguments: Range (0, 20000, step=1, splits=Some(2))"


def huge_project(plan: str) -> str:
    """A legitimate plan of 2 MB: a projection of 60,000 computed columns."""
    exprs = ", ".join(f"(id#0L + {k}) AS c{k}#{k + 10}L" for k in range(60_000))
    return plan.replace(PROJECT, f"Output [60000]: [{exprs}]")


def backtracking_detail(plan: str) -> str:
    """An operator's detail line that a backtracking regex takes minutes over: a letter,
    4,000 spaces and another letter (a filter on a string literal can print one)."""
    return plan.replace(RANGE, "A" + " " * 4000 + "x")


def log_with(events_dir: Path, change: Callable[[str], str]) -> None:
    """The success sample with its first SQL execution's plan text changed."""
    lines = unpacked(SUCCESS).split(b"\n")
    index = next(i for i, line in enumerate(lines) if b"SQLExecutionStart" in line[:120])
    record = json.loads(lines[index])
    record["physicalPlanDescription"] = change(record["physicalPlanDescription"])
    lines[index] = json.dumps(record).encode()
    events_dir.mkdir()
    (events_dir / "local-1700000000000").write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("change", [huge_project, backtracking_detail])
def test_a_slow_plan_does_not_hold_the_event_loop(
    tmp_path: Path, change: Callable[[str], str]
) -> None:
    """Each answer of /metrics, /healthz and `status` comes within a second while the daemon
    translates the log, and the log's events all arrive."""
    events_dir = tmp_path / "events"
    log_with(events_dir, change)
    config = daemon_config(tmp_path / "agent", events_dir)
    out = tmp_path / "agent" / "lineage.jsonl"
    sock = str(tmp_path / "agent" / "control.sock")
    slowest = {"metrics": 0.0, "healthz": 0.0, "status": 0.0}
    with spark_daemon(config) as agent:
        assert agent.metrics_url is not None
        urls = {
            "metrics": agent.metrics_url,
            "healthz": agent.metrics_url[: -len("metrics")] + "healthz",
        }
        began = time.monotonic()
        deadline = began + 120
        while len(events_in(out)) < 6 and time.monotonic() < deadline:
            for name, url in urls.items():
                asked = time.monotonic()
                assert httpx.get(url, timeout=30).status_code == 200
                slowest[name] = max(slowest[name], time.monotonic() - asked)
            asked = time.monotonic()
            assert request(sock, {"command": "status"}, timeout=30)["state"] == "running"
            slowest["status"] = max(slowest["status"], time.monotonic() - asked)
            time.sleep(0.1)
        took = time.monotonic() - began
    assert len(events_in(out)) == 6, f"events after {took:.1f}s: {len(events_in(out))}"
    print(f"{change.__name__}: all events after {took:.2f}s; slowest answers {slowest}")
    assert max(slowest.values()) < ANSWER_WITHIN, slowest
