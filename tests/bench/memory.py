"""Memory and idle cost of the real daemon.

Overflow: the daemon (`tests/bench/agent_child.py`: `run_daemon` with a streaming source of
sample RunEvents) offers `events` events while the collector is down (its endpoint is a
closed loopback port), with the default bounded queue. Every event must be held in the queue
(never sent, so kept for when the collector answers) or dropped and counted (produced =
delivered + dropped + queued at the end), and the resident set must stay
under 100 MiB and flat: it is sampled from /proc while the events flow, the baseline being
the daemon's own footprint before the first event.

Idle: the daemon (`python -m agent run`) watches two directories holding `completed` finished
and `running` in-progress application logs (copies of the real sample logs under new ids,
zstd, both layouts; in-progress ones are the SIGKILLed sample, renamed `.inprogress`), with a
loopback collector taking the replayed events. Once it has read every finished log and
follows only the in-progress ones, its CPU time is measured over `window` seconds (from
/proc), against the same daemon watching two empty directories.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agentproc import AgentProcess
from tests.bench import harness
from tests.bench.corpus import populate
from tests.collector import closed_port


@dataclass(frozen=True)
class Params:
    events: int = 1_000_000
    overflow_timeout: float = 600.0
    completed: int = 200
    running: int = 20
    window: float = 30.0
    settle_timeout: float = 300.0


FULL = Params()
SMOKE = Params(events=5_000, completed=4, running=2, window=2.0, settle_timeout=120.0)


# -- overflow ----------------------------------------------------------------------------------


def overflow(context: harness.Context, params: Params, result: harness.Result) -> None:
    base = context.directory("memory-overflow")
    endpoint = f"http://127.0.0.1:{closed_port()}/api/v1/lineage"
    config = harness.agent_config(base, endpoint=endpoint)
    delay = 3.0
    samples: list[tuple[float, float]] = []  # (events produced, RSS MiB)
    with harness.agent_process(
        config,
        module=("tests.bench.agent_child",),
        args=["--events", str(params.events), "--start-delay", str(delay)],
    ) as agent:
        pid = agent.proc.pid
        time.sleep(delay * 0.7)
        idle = harness.rss_mib(pid)
        deadline = time.monotonic() + params.overflow_timeout
        last: dict[str, float] = {}
        while time.monotonic() < deadline:
            rss = harness.rss_mib(pid)
            scraped = harness.scrape(agent)
            if scraped:
                last = scraped
                produced = harness.total(last, "lineage_events_emitted_total")
                samples.append((produced, rss))
                if produced >= params.events and _settled(last):
                    break
            time.sleep(0.25)
        final, peak = harness.rss_mib(pid), harness.peak_rss_mib(pid)
        produced = harness.total(last, "lineage_events_emitted_total")
        dropped = _dropped(last)
        delivered = last.get("lineage_events_delivered_total{transport=http}", 0.0)
        queued = last.get("lineage_queue_depth{transport=http}", 0.0)
        agent.stop()
    if produced < params.events:
        result.notes.append(
            f"overflow: only {int(produced)} of {params.events} events were offered within "
            f"{params.overflow_timeout:g} s"
        )
    at_tenth = next((rss for n, rss in samples if n >= params.events / 10), final)
    checkpoints = {
        f"{share * 10}%": round(
            next((rss for n, rss in samples if n >= params.events * share / 10), final), 1
        )
        for share in range(1, 11)
    }
    result.add(
        harness.Figure(
            "overflow_rss_mib",
            final,
            "MiB",
            "the same daemon before its first event",
            idle,
            harness.Target("<=", 100.0, on="value"),
            {
                "peak_rss_mib": round(peak, 1),
                "rss_at_share_of_events": checkpoints,
                "events_offered": int(produced),
            },
        )
    )
    result.add(
        harness.Figure(
            "overflow_rss_growth",
            final,
            "MiB",
            "RSS after the first 10% of the events",
            at_tenth,
            harness.Target("<=", 1.05),
            {"what": "flat: the last 90% of the events may add at most 5%"},
        )
    )
    # Nothing listens, so nothing ever leaves: the queue holds what it can (never sent, so
    # kept for when the collector answers) and every event past it is dropped and counted.
    result.add(
        harness.Figure(
            "overflow_drops_counted",
            dropped + queued,
            "events",
            "events offered",
            produced,
            harness.Target(">=", 1.0),
            {
                "delivered": delivered,
                "queued": queued,
                "by_reason": {
                    k.split("reason=", 1)[1].split(",")[0].rstrip("}"): v
                    for k, v in last.items()
                    if k.startswith("lineage_events_dropped_by_reason_total{")
                },
                "identity_holds": produced == delivered + dropped + queued,
            },
        )
    )


def _dropped(samples: dict[str, float]) -> float:
    return sum(
        v
        for k, v in samples.items()
        if k.startswith("lineage_events_dropped_by_reason_total{") and "transport=http" in k
    )


def _settled(samples: dict[str, float]) -> bool:
    """Every event produced is accounted for: delivered, dropped, or waiting in the queue."""
    produced = harness.total(samples, "lineage_events_emitted_total")
    delivered = samples.get("lineage_events_delivered_total{transport=http}", 0.0)
    queued = samples.get("lineage_queue_depth{transport=http}", 0.0)
    return produced == delivered + _dropped(samples) + queued


# -- idle --------------------------------------------------------------------------------------


@dataclass
class Idle:
    cpu_percent: float
    rss_mib: float
    startup_seconds: float


def idle_cost(base: Path, dirs: list[Path], finished: int, following: int, params: Params) -> Idle:
    with harness.CollectorProcess.standard() as collector:
        config = harness.agent_config(
            base, endpoint=collector.url, event_dirs=dirs, spark={"replay_horizon": 0}
        )
        began = time.monotonic()
        with harness.agent_process(config) as agent:
            tail = harness.LogTail(agent.log_path)
            harness.wait_until(
                lambda: _following(agent, tail, finished, following),
                params.settle_timeout,
                f"the agent to finish {finished} logs and follow {following}",
                0.25,
            )
            settled = time.monotonic() - began
            time.sleep(2.0)  # let the last deliveries and the ledger flush pass
            pid = agent.proc.pid
            before, start = harness.cpu_seconds(pid), time.monotonic()
            time.sleep(params.window)
            used, elapsed = harness.cpu_seconds(pid) - before, time.monotonic() - start
            rss = harness.rss_mib(pid)
            agent.stop()
    return Idle(100 * used / elapsed, rss, settled)


def _following(agent: AgentProcess, tail: harness.LogTail, finished: int, following: int) -> bool:
    tail.poll()
    samples = harness.scrape(agent)
    return (
        tail.count("eventlog_finished") >= finished
        and samples.get("lineage_applications_tracked") == following
    )


def idle(context: harness.Context, params: Params, result: harness.Result) -> None:
    base = context.directory("memory-idle")
    empty = [base / "empty-a", base / "empty-b"]
    for directory in empty:
        directory.mkdir()
    busy = [base / "logs-a", base / "logs-b"]
    layout: dict[str, Any] = {}
    half_done, half_live = params.completed // 2, params.running // 2
    for number, directory in enumerate(busy):
        layout[directory.name] = populate(
            directory,
            completed=params.completed - half_done if number else half_done,
            running=params.running - half_live if number else half_live,
            start_id=1_790_000_000_000 + number * 100_000,
        )
    baseline = idle_cost(base / "agent-empty", empty, 0, 0, params)
    loaded = idle_cost(base / "agent-logs", busy, params.completed, params.running, params)
    result.setup["idle_logs"] = layout
    result.add(
        harness.Figure(
            "idle_cpu_percent_of_a_core",
            loaded.cpu_percent,
            "% of a core",
            "the same daemon watching two empty directories",
            baseline.cpu_percent,
            harness.Target("<=", 1.0, on="value"),
            {
                "window_seconds": params.window,
                "completed_logs": params.completed,
                "in_progress_logs": params.running,
                "seconds_to_settle": round(loaded.startup_seconds, 1),
            },
        )
    )
    result.add(
        harness.Figure(
            "idle_rss_mib",
            loaded.rss_mib,
            "MiB",
            "the same daemon watching two empty directories",
            baseline.rss_mib,
            None,
        )
    )


def run(context: harness.Context) -> harness.Result:
    params = SMOKE if context.smoke else FULL
    result = harness.Result("memory", "python -m tests.bench memory")
    result.setup = {
        "overflow_events": params.events,
        "queue_size": 1024,
        "collector": "down (closed loopback port)",
        "agent": "real daemon; overflow: streaming in-memory source; idle: python -m agent run",
    }
    overflow(context, params, result)
    idle(context, params, result)
    return result
