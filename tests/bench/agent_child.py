"""The real daemon fed by a streaming in-memory source, for the memory benchmark.

    python -m tests.bench.agent_child --config FILE --events N [--start-delay S]

`python -m agent.testing` prepares its events as a list, which for a million events would
measure the list, not the agent. Here the events come from a generator, one at a time, after
`--start-delay` seconds (so the idle footprint can be sampled first); everything else is the
daemon as `lineage-agent run` starts it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.source import Sink
from agent.testing import MemorySource, sample_run_events


@dataclass
class StreamingSource:
    """`count` sample events from a generator, fed as fast as the pipeline takes them."""

    count: int
    delay: float
    name: str = "memory"

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        try:
            await asyncio.wait_for(stop.wait(), self.delay)
            return
        except TimeoutError:
            pass
        await MemorySource(sample_run_events(self.count)).run(sink, stop)


def main(argv: Sequence[str] | None = None) -> int:
    from agent.commands.run import run_daemon

    parser = argparse.ArgumentParser(prog="python -m tests.bench.agent_child")
    parser.add_argument("--config", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--start-delay", type=float, default=0.0)
    args = parser.parse_args(argv)

    def factory(_config: Any, _daemon: Any) -> StreamingSource:
        return StreamingSource(args.events, args.start_delay)

    return run_daemon(args.config, factory)


if __name__ == "__main__":
    sys.exit(main())
