"""The spool's cost on the hot path: CPU time per event from `Pipeline.submit` to its
delivery, with the spool (appends and in-flight marks, `write(2)` each), with the spool and
`fsync` (one sync per batch, off the event loop), against the same pipeline without a spool.

The transport is in memory, so what is measured is the agent's own work per event (signing
excluded: the events are serialized, not signed, in all three): the spool's share is the
difference. One event per batch, four lanes: the agent's default for HTTP, its worst case.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from tests.bench.harness import Context, Figure, Result, Target

FULL = {"events": 3_000, "rounds": 3}
SMOKE = {"events": 500, "rounds": 1}


async def _ship(events: list[dict[str, Any]], spool_dir: Path | None, fsync: bool) -> float:
    """CPU seconds of the process to submit and deliver `events`."""
    from agent.delivery.pipeline import Pipeline
    from agent.delivery.queue import BoundedQueue
    from agent.delivery.shipping import Delivery
    from agent.delivery.spool import Spool
    from agent.telemetry.health import HealthTracker
    from agent.telemetry.metrics import Metrics
    from agent.testing import RecordingTransport

    metrics = Metrics(CollectorRegistry())
    health = HealthTracker()
    spool = None
    if spool_dir is not None:
        spool = Spool(spool_dir, 1 << 30, fsync=fsync)
        spool.open()
    pipeline = Pipeline(orjson.dumps, metrics, health, spool)
    transport = RecordingTransport(name="http")
    delivery = Delivery(
        transport,
        BoundedQueue(len(events) + 1, 4),
        batch_size=1,
        metrics=metrics,
        health=health,
        spool=spool,
    )
    pipeline.add(delivery)
    delivery.start()
    began = time.process_time()
    for event in events:
        pipeline.submit("bench", event)
    deadline = time.monotonic() + 300
    while delivery.delivered < len(events) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    spent = time.process_time() - began
    await delivery.drain(time.monotonic() + 1)
    if spool is not None:
        spool.close()
    assert delivery.delivered == len(events), delivery.delivered
    return spent


def run(context: Context) -> Result:
    from agent.testing import sample_run_events

    params = SMOKE if context.smoke else FULL
    result = Result("spool", "python -m tests.bench spool")
    events = list(sample_run_events(params["events"]))
    rounds: dict[str, list[float]] = {"none": [], "spool": [], "fsync": []}
    with tempfile.TemporaryDirectory(dir=context.work) as work:
        for number in range(params["rounds"]):
            for mode in rounds:
                directory = None if mode == "none" else Path(work) / f"{mode}-{number}"
                spent = asyncio.run(_ship(events, directory, fsync=mode == "fsync"))
                rounds[mode].append(1e6 * spent / len(events))
    base = statistics.median(rounds["none"])
    for mode, what in (("spool", "the spool, no fsync"), ("fsync", "the spool with fsync")):
        result.add(
            Figure(
                f"submit_to_delivery_cpu_per_event_with_{mode}",
                statistics.median(rounds[mode]),
                "us/event",
                "the same pipeline without a spool",
                base,
                Target("<=", 1.5) if mode == "spool" else None,
                {"rounds_us": rounds[mode], "baseline_rounds_us": rounds["none"], "what": what},
            )
        )
    result.notes.append(
        "CPU time of the process per event, one event per batch over four lanes, in-memory "
        "transport; fsync's wall time is spent in worker threads and shows here only as "
        "their CPU."
    )
    return result
