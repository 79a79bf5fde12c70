"""Cost on Spark: the same applications with nothing, with the agent watching their event
logs, and with the OpenLineage listener in the driver, in alternating rounds.

Built on the overhead benchmark's pieces (`tests/bench/overhead.py`, `harness.py`): the
long-lived PySpark driver (`jobs/spark_driver.py`, actions `job` and `wide`), the agent
switched on for its rounds and off (once caught up) for the others, medians and spreads.
Three arms instead of two: each block of three rounds runs every arm once, the order
rotating and reversing from block to block, so that a drift of the machine's load hits all
arms alike. Two driver processes: one without the listener's jar (nothing, agent) and one
with it on the class path (listener); each warms up with one unmeasured round.

Per round: wall time (session start to stop, inside the driver), CPU of the driver's
process tree (Python, JVM, Python workers; from /proc), the driver JVM's peak heap (the
heap pools' peak, dominated by the young generation's size) and the bytes its threads
allocated (what the collector had to clear: a listener's garbage shows here); in agent
rounds also the agent's CPU until it read the log to its end. Ratios are medians
over the "nothing" arm's medians.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tests.bench.harness import SparkDriver, cpu_seconds, median, spread
from tests.bench.overhead import AgentSwitch
from tests.peer.jobs import LISTENER, NAMESPACE
from tests.peer.sidebyside import agent_config, listener_jars

Arm = Literal["nothing", "agent", "listener"]
ARMS: tuple[Arm, ...] = ("nothing", "agent", "listener")
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Job:
    """One application shape for the cost rounds: a spark_driver.py action and its params."""

    name: str
    action: str
    params: dict[str, Any]


JOBS = (
    Job("many_tasks", "job", {"queries": 2, "rows": 20_000, "partitions": 32}),
    Job("wide_500_columns", "wide", {"columns": 500, "rows": 200}),
)
BLOCKS = 8  # rounds per arm and job
ROUND_TIMEOUT = 600.0


def order(blocks: int) -> list[Arm]:
    """Every arm once per block; the order rotates by one and reverses every other block."""
    rounds: list[Arm] = []
    for block in range(blocks):
        turn = block % len(ARMS)
        arms = list(ARMS[turn:] + ARMS[:turn])
        rounds += reversed(arms) if block % 2 else arms
    return rounds


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its descendants (reaped children included)."""
    total = 0.0
    pending: list[int] = [pid]
    seen: set[int] = set()
    while pending and len(seen) < 1000:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with open(f"/proc/{current}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / _TICKS
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    pending += [int(c) for c in children.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def run(work: Path, blocks: int = BLOCKS) -> dict[str, Any]:
    """Every job in every arm, `blocks` rounds each, in a fresh `work`; figures and ratios."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    jars = ",".join(str(p) for p in listener_jars())
    events = {arm: work / f"events-{arm}" for arm in ARMS}
    for folder in events.values():
        folder.mkdir(exist_ok=True)
    plain = SparkDriver(work / "driver-plain")
    peer: SparkDriver | None = None
    try:
        peer = SparkDriver(work / "driver-listener")
        config = agent_config(work / "agent", events["agent"])
        with AgentSwitch(config) as switch:
            counter = iter(range(1, 100_000))

            def conf_of(arm: Arm, number: int) -> dict[str, str]:
                if arm != "listener":
                    return {}
                return {
                    "spark.jars": jars,
                    "spark.extraListeners": LISTENER,
                    "spark.openlineage.transport.type": "file",
                    "spark.openlineage.transport.location": str(work / f"listener-{number}.jsonl"),
                    "spark.openlineage.namespace": NAMESPACE,
                }

            def one(job: Job, arm: Arm) -> dict[str, float]:
                number = next(counter)
                driver = peer if arm == "listener" else plain
                assert driver is not None
                agent = switch.on() if arm == "agent" else None
                if arm != "agent":
                    switch.off()
                agent_before = cpu_seconds(agent.proc.pid) if agent else 0.0
                before = tree_cpu(driver.proc.pid)
                answer = driver.call(
                    job.action,
                    ROUND_TIMEOUT,
                    event_dir=str(events[arm]),
                    work=str(work / "scratch" / f"r{number}"),
                    app_name=f"peer cost {job.name} {number}",
                    conf=conf_of(arm, number),
                    **job.params,
                )
                figures = {
                    "seconds": float(answer["seconds"]),
                    "driver_cpu_seconds": tree_cpu(driver.proc.pid) - before,
                    "heap_peak_mib": float(answer["heap_peak_bytes"]) / 2**20,
                    "allocated_mib": float(answer["heap_allocated_bytes"]) / 2**20,
                }
                if agent is not None:
                    switch.finished += 1
                    switch.wait_caught_up()
                    figures["agent_cpu_seconds"] = cpu_seconds(agent.proc.pid) - agent_before
                return figures

            results: dict[str, Any] = {}
            for job in JOBS:
                one(job, "nothing")  # warm-up of each driver: JIT, classes, caches
                one(job, "listener")
                rounds: dict[Arm, list[dict[str, float]]] = {arm: [] for arm in ARMS}
                for arm in order(blocks):
                    rounds[arm].append(one(job, arm))
                switch.off()
                results[job.name] = summarize(job, rounds)
    finally:
        plain.close()
        if peer is not None:
            peer.close()
    return {
        "order": order(blocks),
        "rounds_per_arm": blocks,
        "jobs": results,
        "ratios": {name: dict(figures["ratios"]) for name, figures in results.items()},
    }


def summarize(job: Job, rounds: dict[Arm, list[dict[str, float]]]) -> dict[str, Any]:
    def med(arm: Arm, key: str) -> float:
        return median([r[key] for r in rounds[arm]])

    keys = ("seconds", "driver_cpu_seconds", "heap_peak_mib", "allocated_mib")
    medians = {arm: {k: round(med(arm, k), 3) for k in keys} for arm in ARMS}

    def ratio(arm: Arm, key: str) -> float:
        return round(med(arm, key) / med("nothing", key), 3)

    agent_cpu = median([r["agent_cpu_seconds"] for r in rounds["agent"]])
    return {
        "params": job.params,
        "medians": medians,
        "spread": {
            arm: {k: round(spread([r[k] for r in rounds[arm]]), 3) for k in keys} for arm in ARMS
        },
        "agent_cpu_seconds_median": round(agent_cpu, 3),
        "ratios": {
            "wall_agent": ratio("agent", "seconds"),
            "wall_listener": ratio("listener", "seconds"),
            "driver_cpu_agent": ratio("agent", "driver_cpu_seconds"),
            "driver_cpu_listener": ratio("listener", "driver_cpu_seconds"),
            "heap_peak_agent": ratio("agent", "heap_peak_mib"),
            "heap_peak_listener": ratio("listener", "heap_peak_mib"),
            "allocated_agent": ratio("agent", "allocated_mib"),
            "allocated_listener": ratio("listener", "allocated_mib"),
            "node_cpu_agent": round(
                (med("agent", "driver_cpu_seconds") + agent_cpu)
                / med("nothing", "driver_cpu_seconds"),
                3,
            ),
        },
        "rounds": {arm: rounds[arm] for arm in ARMS},
    }
