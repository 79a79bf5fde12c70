"""`./run peer`: the agent side by side with the OpenLineage Spark listener.

    python -m tests.peer [--shapes NAME ...] [--no-cost] [--compare-only | --replay-agent]
                         [--markdown]

Runs every shape of `shapes.py` once with the listener in the driver and the agent watching
the event logs (`sidebyside.py`), compares the two outputs execution by execution
(`compare.py`), classifies every difference (`classify.py`), measures the cost of both on
Spark (`cost.py`) and writes `build/peer/report.json`. `--compare-only` compares the outputs
of the last run again (after a change to the comparison or the classes); `--replay-agent`
also translates the last run's event logs again with the current agent (after a change to
the agent; a few seconds, no Spark); `--markdown`
prints docs/peer.md's tables from the last report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from tests.peer import report, sidebyside
from tests.peer.shapes import by_name

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "peer"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.peer")
    parser.add_argument("--shapes", nargs="*", help="only these shapes")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost rounds")
    parser.add_argument("--compare-only", action="store_true", help="compare the last outputs")
    parser.add_argument(
        "--replay-agent", action="store_true", help="the last run's logs through today's agent"
    )
    parser.add_argument("--markdown", action="store_true", help="print the tables of docs/peer.md")
    args = parser.parse_args(argv)
    if args.markdown:
        print(report.markdown(json.loads((BUILD / "report.json").read_text())))
        return 0
    began = time.monotonic()
    raw = BUILD / "outputs.json"
    previous: dict[str, Any] = {}
    if (BUILD / "report.json").exists():
        previous = json.loads((BUILD / "report.json").read_text())
    if args.compare_only or args.replay_agent:
        outputs = sidebyside.load(raw)
        if args.replay_agent:
            outputs = sidebyside.replay_agent(outputs, BUILD / "work")
    else:
        work = BUILD / "work"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        outputs = sidebyside.run(by_name(args.shapes), work)
        sidebyside.save(outputs, raw)
    result = report.build(outputs)
    result["defects"] = report.defects(result, outputs)
    result["spark_seconds"] = outputs.spark_seconds
    if args.compare_only or args.replay_agent or args.no_cost:
        if "cost" in previous:
            result["cost"] = previous["cost"]
    else:
        from tests.peer import cost

        result["cost"] = cost.run(BUILD / "cost")
    if args.compare_only or args.replay_agent:  # the run's own wall time stays: only compared
        result["seconds"] = previous.get("seconds")
        result["compare_seconds"] = round(time.monotonic() - began, 1)
    else:
        result["seconds"] = round(time.monotonic() - began, 1)
    (BUILD / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        json.dumps(
            {"summary": result["summary"], "cost": result.get("cost", {}).get("ratios")}, indent=2
        )
    )
    print(f"report: {BUILD / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
