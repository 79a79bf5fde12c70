"""In-memory parts for tests and benchmarks: a source of realistic RunEvents, a recording
transport, and a way to run the real daemon on that source (`python -m agent.testing`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.delivery.envelope import Envelope
from agent.errors import (
    DeliveryError,
    DropReason,
    NotSent,
    NotSentReason,
    NotStored,
    TransportFailure,
    Unconfirmed,
    UnconfirmedReason,
)
from agent.facets import OPENLINEAGE_SCHEMA_URL, PRODUCER
from agent.source import Sink

_FACETS = "https://openlineage.io/spec/facets/"


def _ts(start: datetime, ms: int) -> str:
    return (
        (start + timedelta(milliseconds=ms))
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def sample_run_events(
    count: int, *, namespace: str = "spark", app: str = "memory_app", columns: int = 8
) -> Iterator[dict[str, Any]]:
    """`count` schema-valid RunEvents: START/COMPLETE pairs of SQL jobs with datasets.

    Deterministic: the same arguments give the same events (run ids from uuid5).
    """
    start = datetime(2026, 1, 1, tzinfo=UTC)
    fields = [{"name": f"col_{i}", "type": "string" if i % 2 else "long"} for i in range(columns)]
    for i in range(count):
        pair, terminal = divmod(i, 2)
        run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{app}/{pair}"))
        dataset = {
            "namespace": "file",
            "name": f"/data/{app}/table_{pair % 97}",
            "facets": {
                "schema": {
                    "_producer": PRODUCER,
                    "_schemaURL": _FACETS
                    + "1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                    "fields": fields,
                },
                "dataSource": {
                    "_producer": PRODUCER,
                    "_schemaURL": _FACETS
                    + "1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
                    "name": "file",
                    "uri": "file:///",
                },
            },
        }
        yield {
            "eventType": "COMPLETE" if terminal else "START",
            "eventTime": _ts(start, 2 * i + terminal),
            "producer": PRODUCER,
            "schemaURL": OPENLINEAGE_SCHEMA_URL,
            "run": {"runId": run_id, "facets": {}},
            "job": {
                "namespace": namespace,
                "name": f"{app}.execute_insert_into_hadoop_fs_relation_command.table_{pair % 97}",
                "facets": {
                    "jobType": {
                        "_producer": PRODUCER,
                        "_schemaURL": _FACETS + "2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                        "processingType": "BATCH",
                        "integration": "SPARK",
                        "jobType": "SQL_JOB",
                    }
                },
            },
            "inputs": [],
            "outputs": [dataset],
        }


@dataclass
class MemorySource:
    """Feeds prepared events to the pipeline, optionally paced, then waits for `stop`."""

    events: Iterable[Mapping[str, Any]]
    app_id: str = "memory"
    rate: float = 0.0  # events per second; 0 = as fast as possible
    exit_when_done: bool = False
    name: str = "memory"
    fed: int = 0

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        begin = loop.time()
        for event in self.events:
            if stop.is_set():
                return
            sink(self.app_id, event)
            self.fed += 1
            if self.rate:
                delay = begin + self.fed / self.rate - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif self.fed % 512 == 0:
                await asyncio.sleep(0)  # let deliveries run
        if not self.exit_when_done:
            await stop.wait()


@dataclass
class RecordingTransport:
    """A transport that keeps what it is sent; `fail` makes it fail with that reason, as the
    kind of failure the reason belongs to (dropped, never sent, or unconfirmed); `script`
    says how the next attempts end, one item each (a failure to raise, or None: delivered),
    before `fail` applies. `tried` holds every event of every attempt, in order."""

    name: str = "memory"
    sent: list[Envelope] = field(default_factory=list)
    fail: DropReason | NotSentReason | UnconfirmedReason | None = None
    delay: float = 0.0
    closed: bool = False
    attempts: int = 0
    script: list[TransportFailure | None] = field(default_factory=list)
    tried: list[Envelope] = field(default_factory=list)

    async def send(self, batch: Sequence[Envelope]) -> None:
        self.attempts += 1
        self.tried.extend(batch)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.script:
            outcome = self.script.pop(0)
            if outcome is not None:
                raise outcome
            self.sent.extend(batch)
            return
        match self.fail:
            case None:
                self.sent.extend(batch)
            case "connect" | "tls" | "closed" | "unavailable" | "buffer_full" as reason:
                raise NotSent(reason, "configured to fail")
            case "timeout" | "network" | "interrupted" as reason:
                raise Unconfirmed(reason, "configured to fail")
            case "http_429" | "http_500" | "http_502" | "http_503" | "http_504" as reason:
                raise NotStored(int(reason.removeprefix("http_")), "configured to fail")
            case reason:
                raise DeliveryError(reason, "configured to fail")

    async def aclose(self) -> None:
        self.closed = True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the real daemon with a MemorySource (used by process-level tests and the demo)."""
    from agent.commands.run import run_daemon
    from agent.service.control.connections import ControlLimits

    defaults = ControlLimits()
    parser = argparse.ArgumentParser(prog="python -m agent.testing")
    parser.add_argument("--config", required=True)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--exit-when-done", action="store_true")
    parser.add_argument("--control-idle-timeout", type=float, default=defaults.idle_timeout)
    parser.add_argument("--control-max-connections", type=int, default=defaults.max_connections)
    args = parser.parse_args(argv)
    events = list(sample_run_events(args.events))

    def factory(_config: Any, _daemon: Any) -> MemorySource:
        return MemorySource(events, rate=args.rate, exit_when_done=args.exit_when_done)

    limits = ControlLimits(args.control_idle_timeout, args.control_max_connections)
    return run_daemon(args.config, factory, limits)


if __name__ == "__main__":
    sys.exit(main())
