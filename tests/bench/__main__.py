"""Run the benchmarks and write the JSON report.

    python -m tests.bench [NAME ...] [--smoke] [--work DIR] [--out FILE]

Without names every benchmark runs, in the order below. Each prints its result as one JSON
line on stdout when it ends; progress and a summary table go to stderr. The report
(`build/bench/report.json` by default) is rewritten after every benchmark, so an interrupted
run keeps what it measured. `--smoke` runs tiny sizes (seconds each; the figures mean
nothing, it proves the harness works). Large inputs (the big Spark event log, the 5,000-log
directory) are cached in the work folder and reused by later runs.

Exit status: 0 when every benchmark ran (whether or not it met its targets), 1 when one
failed to run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.telemetry import logs
from tests.bench.harness import DEFAULT_WORK, Context, Result, machine

BENCHMARKS = {
    "shipping": "tests.bench.shipping",
    "shipping_kafka": "tests.bench.shipping_kafka",
    "canonical": "tests.bench.canonical",
    "ingest": "tests.bench.ingest",
    "latency": "tests.bench.latency",
    "overhead": "tests.bench.overhead",
    "memory": "tests.bench.memory",
    "scale": "tests.bench.scale",
    "state": "tests.bench.state",
    "stores": "tests.bench.stores",
    "stores_endless": "tests.bench.stores:run_endless",
    "spool": "tests.bench.spool",
}


def run_one(name: str, context: Context) -> Result:
    """Run a benchmark; a failure becomes a result with `error` set, never an exception."""
    began = time.monotonic()
    try:
        module, _, function = BENCHMARKS[name].partition(":")  # `run` unless named
        result: Result = getattr(importlib.import_module(module), function or "run")(context)
    except Exception:
        result = Result(name, f"python -m tests.bench {name}", error=traceback.format_exc())
    result.seconds = time.monotonic() - began
    if context.smoke:
        result.command += " --smoke"
    return result


def summary(results: Sequence[Result]) -> str:
    rows = [("benchmark / figure", "value", "baseline", "ratio", "target", "met")]
    for result in results:
        if result.error is not None:
            last = result.error.strip().splitlines()[-1]
            rows.append((result.name, "ERROR", last[:60], "", "", ""))
        for figure in result.figures:
            data = figure.as_dict()
            target = data["target"]
            rows.append(
                (
                    f"{result.name}.{figure.name}",
                    f"{data['value']} {figure.unit}",
                    "" if data["baseline_value"] is None else str(data["baseline_value"]),
                    "" if data["ratio"] is None else str(data["ratio"]),
                    "" if target is None else f"{target['on']} {target['op']} {target['bound']}",
                    {True: "yes", False: "NO", None: ""}[figure.met],
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench", description="Run the benchmarks, write the JSON report."
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(BENCHMARKS))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: proves the harness")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="working folder")
    parser.add_argument("--out", type=Path, help="report file (default: WORK/report.json)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    names = args.names or list(BENCHMARKS)
    work: Path = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    out: Path = args.out or work / "report.json"
    report: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m tests.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "smoke": args.smoke,
        "machine_at_start": machine(),
        "benchmarks": [],
    }
    # Agent parts that run in this process log like the daemon, but only warnings, and to
    # stderr: stdout carries the JSON results.
    logs.configure("warning", "json", stream=sys.stderr)
    results: list[Result] = []
    context = Context(work, smoke=args.smoke)
    began = time.monotonic()
    try:
        for name in names:
            print(f"== {name}", file=sys.stderr, flush=True)
            result = run_one(name, context)
            results.append(result)
            print(json.dumps(result.as_dict()), flush=True)
            if result.error:
                print(result.error, file=sys.stderr, flush=True)
            report["benchmarks"].append(result.as_dict())
            report["seconds"] = round(time.monotonic() - began, 1)
            report["machine_at_end"] = machine()
            _write(out, report)
    finally:
        context.close()
    print(summary(results), file=sys.stderr)
    print(f"report: {out} ({report.get('seconds', 0)} s)", file=sys.stderr)
    return 1 if any(r.error for r in results) else 0


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(report, indent=2) + "\n")
    temporary.replace(path)


if __name__ == "__main__":
    sys.exit(main())
