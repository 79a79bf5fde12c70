"""The real daemon on an in-memory source whose events are made as they are fed, so a
ten-minute run at 1,000 events per second holds one event at a time, not 600,000:

    python -m tests.reliability.memagent --config FILE --events N [--rate R] [--exit-when-done]

Unlike `python -m agent.testing` (which builds the whole list first), memory stays flat
whatever N is, which is what a soak measures.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from agent.commands.run import run_daemon
from agent.testing import MemorySource, sample_run_events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.memagent")
    parser.add_argument("--config", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--exit-when-done", action="store_true")
    args = parser.parse_args(argv)

    def factory(_config: Any, _daemon: Any) -> MemorySource:
        return MemorySource(
            sample_run_events(args.events), rate=args.rate, exit_when_done=args.exit_when_done
        )

    return run_daemon(args.config, factory)


if __name__ == "__main__":
    sys.exit(main())
