"""No event log holds the daemon's event loop: while it translates a plan that takes seconds,
/metrics, /healthz and the control socket keep answering (the real daemon)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.service.control.client import request
from tests.applog import unpacked
from tests.spark_scenarios import daemon_config, events_in, spark_daemon

SUCCESS = Path(__file__).resolve().parents[1] / "data" / "eventlogs" / "success.jsonl.zst"
EVENTS = 6  # the success sample's
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


def under_way(scrape: str) -> bool:
    """Whether a /metrics scrape shows the log read and not all of its events emitted: the
    translation (of its one batch, in a worker thread) is under way."""
    read = emitted = 0.0
    for family in text_string_to_metric_families(scrape):
        for sample in family.samples:
            if sample.name == "lineage_eventlog_read_bytes_total":
                read += sample.value
            elif sample.name == "lineage_events_emitted_total":
                emitted += sample.value
    return read > 0 and emitted < EVENTS


# A count, not a wall time: a held loop answers no round while it translates (the one held
# up answers once it ends), a free one answers every round; a busy machine slows both sides.
@pytest.mark.parametrize(("change", "rounds"), [(huge_project, 3), (backtracking_detail, 0)])
def test_a_slow_plan_does_not_hold_the_event_loop(
    tmp_path: Path, change: Callable[[str], str], rounds: int
) -> None:
    """/metrics, /healthz and `status` keep answering while the daemon translates the log:
    at least `rounds` rounds of the three while a plan of seconds translates (one whose
    detail a backtracking regex takes minutes over translates at once); its events all
    arrive."""
    events_dir = tmp_path / "events"
    log_with(events_dir, change)
    config = daemon_config(tmp_path / "agent", events_dir)
    out = tmp_path / "agent" / "lineage.jsonl"
    sock = str(tmp_path / "agent" / "control.sock")
    answered = translating = 0
    with spark_daemon(config) as agent:
        assert agent.metrics_url is not None
        healthz = agent.metrics_url[: -len("metrics")] + "healthz"
        deadline = time.monotonic() + 300
        while len(events_in(out)) < EVENTS and time.monotonic() < deadline:
            scrape = httpx.get(agent.metrics_url, timeout=60)
            assert scrape.status_code == 200
            assert httpx.get(healthz, timeout=60).status_code == 200
            assert request(sock, {"command": "status"}, timeout=60)["state"] == "running"
            answered += 1
            translating += under_way(scrape.text)
            time.sleep(0.1)  # pacing the rounds; what the test waits on is the events
    assert len(events_in(out)) == EVENTS, f"events after {answered} rounds: {events_in(out)}"
    print(f"{change.__name__}: {translating} of {answered} rounds answered while translating")
    assert translating >= rounds, (translating, answered)
