"""`python -m tests.faults` (`./run marquez`): arguments, the scenarios in turn, the report."""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.faults.feed import EVENTLOGS, WORKLOAD
from tests.faults.report import render, summary_table
from tests.faults.scenarios import COMMANDS, SCENARIOS, Options, Outcome, run_scenario

_EPILOG = """\
scenarios:
{scenarios}

Each scenario: a fresh namespace, key and state directory; the agent (`lineage-agent run`) as a
child process following a directory into which real PySpark logs are written over
--feed-seconds; the fault at --fault-at of the feed; a bounded wait until the agent is idle;
then Marquez is read back (each run's state, the stored events) and compared with a replay of
the same logs. Commands run with `sh -c`; a command that undoes a fault (db-start, db-resume,
marquez-start) is run at the end of a scenario that was interrupted before it.

docker compose (the repository's docker-compose.marquez.yaml):
  C="docker compose -f docker-compose.marquez.yaml"
  ./run marquez --db-stop "$C stop db" --db-start "$C start db" \\
    --db-pause "$C pause db" --db-resume "$C unpause db" \\
    --marquez-kill "$C kill api" --marquez-stop "$C stop api" --marquez-start "$C start api"

exit status: 0 nothing lost, stored twice or in a wrong state; 1 something was;
2 usage, or a scenario could not run
"""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    scenarios = "\n".join(f"  {s.name:<20} {s.description}" for s in SCENARIOS.values())
    parser = argparse.ArgumentParser(
        prog="./run marquez",
        description="Delivery fault scenarios against a real Marquez on loopback (issue 35).",
        epilog=_EPILOG.format(scenarios=scenarios),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url", default="http://127.0.0.1:5000", help="Marquez API (loopback only)"
    )
    parser.add_argument(
        "--scenarios",
        nargs="+",
        choices=list(SCENARIOS),
        default=list(SCENARIOS),
        metavar="NAME",
        help="scenarios to run, in order (default: all)",
    )
    for name, what in COMMANDS.items():
        parser.add_argument(f"--{name}", metavar="CMD", default="", help=what)
    parser.add_argument("--json", metavar="OUT", help="write the full report as JSON to OUT")
    parser.add_argument(
        "--work", metavar="DIR", help="scenario directories (default: a new one under /tmp)"
    )
    parser.add_argument(
        "--logs",
        nargs="+",
        default=list(WORKLOAD),
        metavar="SAMPLE",
        help="samples of tests/data/eventlogs/ without .jsonl.zst (default: %(default)s)",
    )
    parser.add_argument(
        "--feed-seconds", type=float, default=30.0, help="how long the logs take to be written"
    )
    parser.add_argument("--steps", type=int, default=12, help="parts each log is written in")
    parser.add_argument(
        "--fault-at", type=float, default=0.4, help="share of the feed written before the fault"
    )
    parser.add_argument(
        "--down", type=float, default=5.0, help="seconds the database or Marquez stays down"
    )
    parser.add_argument(
        "--settle", type=float, default=180.0, help="longest wait for the agent to go idle"
    )
    parser.add_argument(
        "--command-timeout", type=float, default=180.0, help="longest a command may take"
    )
    parser.add_argument(
        "--http-timeout", metavar="DURATION", help="the agent's lineage.http.timeout (e.g. 10s)"
    )
    args = parser.parse_args(argv)
    if not is_loopback(args.url):
        parser.error(f"--url must be a loopback address: {args.url}")
    if not 0 <= args.fault_at <= 1:
        parser.error("--fault-at must be between 0 and 1")
    if args.feed_seconds <= 0 or args.steps < 1 or args.down < 0 or args.settle <= 0:
        parser.error("--feed-seconds, --steps and --settle must be positive, --down >= 0")
    missing = [name for name in args.logs if not (EVENTLOGS / f"{name}.jsonl.zst").is_file()]
    if missing:
        parser.error(f"no such sample under {EVENTLOGS}: {', '.join(missing)}")
    return args


def is_loopback(url: str) -> bool:
    """An http(s) URL whose host is localhost or a loopback address."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def options_of(args: argparse.Namespace) -> Options:
    commands = {name: getattr(args, name.replace("-", "_")) for name in COMMANDS}
    stamp = time.strftime("%Y%m%d%H%M%S")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="lineage-faults-"))
    return Options(
        url=args.url,
        commands={name: text for name, text in commands.items() if text},
        logs=args.logs,
        work=work / stamp,
        stamp=stamp,
        feed_seconds=args.feed_seconds,
        steps=args.steps,
        fault_at=args.fault_at,
        down=args.down,
        settle=args.settle,
        command_timeout=args.command_timeout,
        http={"timeout": args.http_timeout} if args.http_timeout else {},
    )


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "scenario": outcome.name,
        "namespace": outcome.namespace,
        "directory": str(outcome.directory),
        "seconds": round(outcome.seconds, 1),
        "skipped": outcome.skipped,
        "comparison": outcome.comparison.to_json() if outcome.comparison else None,
        "accounting": outcome.accounting.to_json() if outcome.accounting else None,
        "extra_runs": outcome.extra_runs,
        "notes": outcome.notes,
    }


def troubled(outcome: Outcome) -> bool:
    """Something lost, stored twice, unexpected or in a wrong state."""
    c = outcome.comparison
    return c is not None and bool(c.missing or c.duplicated or c.unexpected or c.wrong_state)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    options = options_of(args)
    options.work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {options.work}", flush=True)
    outcomes: list[Outcome] = []
    for index, name in enumerate(args.scenarios):
        print(f"-- {name}: running", flush=True)
        try:
            outcome = run_scenario(SCENARIOS[name], options, index)
        except Exception as error:  # one broken scenario does not hide the others' results
            outcome = Outcome(name, "", options.work / name, skipped=f"failed: {error!r}")
        outcomes.append(outcome)
        if outcome.comparison is not None and outcome.accounting is not None:
            print(render(name, outcome.comparison, outcome.accounting, outcome.notes), flush=True)
        else:
            print(f"== {name}: not run: {outcome.skipped}", flush=True)
            for note in outcome.notes:
                print(f"  note: {note}", flush=True)
    rows = [(o.name, o.comparison, o.accounting) for o in outcomes if o.comparison and o.accounting]
    print()
    print(summary_table(rows))
    if args.json:
        report = {
            "url": options.url,
            "stamp": options.stamp,
            "logs": list(options.logs),
            "scenarios": [outcome_json(o) for o in outcomes],
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if any(o.comparison is None for o in outcomes):
        return 2
    return 1 if any(troubled(o) for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
