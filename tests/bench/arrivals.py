"""The loopback collector of `tests/collector.py`, noting when each event arrived.

    python -m tests.bench.arrivals --out FILE [--port N]

Prints its lineage URL, serves until SIGTERM or SIGINT, then writes FILE: a JSON list of
{"t": unix seconds when the request was read, "eventType", "eventTime", "job", "jobType",
"runId"} per accepted event, in arrival order. Runs in its own process, like the plain
collector in the throughput benchmark, so the clock it reads is not held up by the agent.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

from tests.collector import Collector, Request


class ArrivalCollector(Collector):
    """A collector that stamps every accepted event with its arrival time."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(201, port=port, record=False)
        self.arrivals: list[dict[str, Any]] = []

    def _accept(self, request: Request) -> bool:
        arrived = time.time()
        if not super()._accept(request):
            return False
        parsed = json.loads(request.content)
        for event in parsed if isinstance(parsed, list) else [parsed]:
            job = event.get("job", {})
            self.arrivals.append(
                {
                    "t": arrived,
                    "eventType": event.get("eventType"),
                    "eventTime": event.get("eventTime"),
                    "job": job.get("name"),
                    "jobType": job.get("facets", {}).get("jobType", {}).get("jobType"),
                    "runId": event.get("run", {}).get("runId"),
                }
            )
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback collector that times arrivals.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    with ArrivalCollector(args.port) as collector:
        print(collector.url, flush=True)
        done.wait()
    args.out.write_text(json.dumps(collector.arrivals))
    print(f"{collector.accepted} events, {collector.connections} connections", flush=True)


if __name__ == "__main__":
    main()
