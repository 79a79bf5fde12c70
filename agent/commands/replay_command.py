"""The `lineage-agent replay` command: arguments, the report for people, progress on a terminal.

The work itself is `agent.commands.replay`; this module only turns arguments into a call of
`replay` or `replay_send` and their report into text. `run.py` picks the exit status.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Final, TextIO

from agent.commands.arguments import Command, Subparsers
from agent.errors import ReplayError

if TYPE_CHECKING:  # the translator behind them loads when `replay` runs, not for --help
    from agent.commands.replay_report import ReplayReport

_EPILOG = """\
Each LOG is a single-file event log, a rolling eventlog_v2_* directory, or an event-log
directory (every application in it). A log is read as far as it is written: the open runs of
an in-progress log are reported RUNNING, not ended. The agent's state database is neither read
nor written: events the agent already shipped are produced (and sent) again, with the same run
ids and the same bytes.

exit status:
  0   every run ended COMPLETE or is still running
  1   a run ended FAIL or ABORT, or (--send) an event was dropped or unconfirmed
  2   usage: a log that cannot be read, a missing or unusable key, an output file that exists
  78  a configuration error in --config, or a transport that cannot start (EX_CONFIG)
"""
_MIB: Final = 1024 * 1024


def register(subparsers: Subparsers, func: Command) -> argparse.ArgumentParser:
    """Add `replay` to the `lineage-agent` command, run by `func`."""
    parser = subparsers.add_parser(
        "replay",
        help="translate Spark event logs without the daemon; exit 1 if a run failed",
        description="Translate finished or in-progress Spark event logs to signed OpenLineage "
        "RunEvents without the daemon: a summary, JSON-lines files, or sent to the transports.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "logs", nargs="+", metavar="LOG", help="event log file or directory (see below)"
    )
    parser.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        help="agent config: namespace, spark settings, signing key, transports (for --send)",
    )
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write <app_id>.jsonl per application into DIR; existing files are not replaced",
    )
    parser.add_argument(
        "--send", action="store_true", help="send the events through the transports of --config"
    )
    parser.add_argument(
        "--key", metavar="PATH", help="private signing key (default: signing.key_path of --config)"
    )
    parser.add_argument(
        "--namespace",
        metavar="NS",
        help="job namespace (default: spark.namespace, then lineage.namespace of --config)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=func)
    return parser


def execute(args: argparse.Namespace) -> ReplayReport:
    """`lineage-agent replay`: the report. Raises ConfigError or StartError (a config or
    transport that cannot be used), ReplayError or KeyFileError (arguments, logs, keys)."""

    from agent.commands.replay import replay
    from agent.commands.replay_send import replay_send
    from agent.config.loader import load_config
    from agent.config.model import AgentConfig
    from agent.delivery.signing import Signer, load_signing_key

    config = load_config(args.config) if args.config else AgentConfig()
    if args.send and not args.config:
        raise ReplayError("--send needs --config FILE: the transports are configured there")
    key_path = args.key or (config.signing.key_path if args.config else None)
    if key_path is None:
        raise ReplayError("no signing key: give --key PATH, or --config FILE with signing.key_path")
    signer = Signer(load_signing_key(key_path))
    namespace = args.namespace or config.spark.namespace or config.lineage.namespace
    if args.output_dir:
        try:
            os.makedirs(args.output_dir, exist_ok=True)
        except OSError as error:
            raise ReplayError(
                f"{args.output_dir}: cannot create directory: {error.strerror}"
            ) from None
    progress = _ProgressLine(sys.stderr) if sys.stderr.isatty() else None
    try:
        if args.send:
            import asyncio

            from agent.telemetry import logs

            logs.configure("warning", "auto", sys.stderr)  # stdout carries the report only
            report = asyncio.run(
                replay_send(
                    args.logs,
                    config=config,
                    namespace=namespace,
                    signer=signer,
                    output_dir=args.output_dir,
                    progress=progress,
                )
            )
        else:
            report = replay(
                args.logs,
                namespace=namespace,
                signer=signer,
                output_dir=args.output_dir,
                spark=config.spark,
                progress=progress,
            )
    finally:
        if progress is not None:
            progress.clear()
    return report


def render(report: ReplayReport, exit_code: int, *, as_json: bool) -> str:
    """The report as JSON (with the exit status) or as the summary for people."""
    import json

    return json.dumps(report.to_json(exit_code), indent=2) if as_json else summary(report)


def summary(report: ReplayReport) -> str:
    """The report for people: a table of applications, then failures, files, deliveries,
    warnings, errors and a verdict line."""
    from agent.commands.views import printable, table

    apps = report.applications
    rows = [
        [
            a.app_id,
            a.name or "",
            len(a.runs),
            a.application.state if a.application else "-",
            len(a.digests),
            len(a.failed),
            "complete" if a.complete else "in progress",
        ]
        for a in apps
    ]
    parts = [table(["app id", "name", "runs", "state", "events", "failed/aborted", "log"], rows)]
    failed = [(a, r) for a in apps for r in a.failed]
    notes = [f"{r.state:<5}  {a.app_id}  {r.job_name}: {_headline(r.error)}" for a, r in failed]
    notes += [f"wrote {a.output} ({len(a.digests)} events)" for a in apps if a.output]
    for d in report.deliveries:
        reasons = ", ".join(f"{reason} {n}" for reason, n in d.dropped_by_reason.items())
        notes.append(
            f"sent through {d.transport}: {d.delivered} delivered, {d.dropped} dropped"
            + (f" ({reasons})" if reasons else "")
            + (f", {d.unconfirmed} unconfirmed" if d.unconfirmed else "")
        )
    notes += [f"warning: {a.log}: {w}" for a in apps for w in a.warnings]
    notes += [f"error: {e}" for e in report.errors]
    runs = report.runs
    running = sum(1 for r in runs if r.state == "RUNNING")
    counts = (
        f"{len(apps)} application(s), {len(runs)} run(s), "
        f"{sum(len(a.digests) for a in apps)} event(s)"
    )
    if report.errors:
        verdict = f"incomplete: {len(report.errors)} error(s)"
    elif failed:
        verdict = f"failed: {len(failed)} run(s) ended FAIL or ABORT"
    elif report.dropped or report.unconfirmed:
        verdict = f"failed: {report.dropped} event(s) dropped" + (
            f", {report.unconfirmed} unconfirmed" if report.unconfirmed else ""
        )
    else:
        verdict = "passed" + (f" ({running} run(s) still running)" if running else "")
    notes = [printable(note) for note in notes]  # app ids, job names and errors come from logs
    return "\n".join([*parts, "", *notes, *([""] if notes else []), f"{counts}: {verdict}"])


def _headline(text: str | None, limit: int = 160) -> str:
    """The first line of an error message; of a Python traceback, the line that names the
    exception (PySpark puts the whole traceback into the message)."""
    lines = (text or "").strip().splitlines() or [""]
    head, marker = lines[0], "Traceback (most recent call last):"
    raised = [line for line in lines[1:] if line and not line[0].isspace()]
    if head.endswith(marker) and raised:
        head = head.removesuffix(marker) + raised[-1]
    return head if len(head) <= limit else head[: limit - 3] + "..."


class _ProgressLine:
    """`replay: 3/10 logs, 12.5/80.0 MiB` rewritten in place on a terminal, 10 times a second
    at most."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._shown = 0.0
        self._width = 0

    def __call__(self, done: int, total: int, read: int, size: int) -> None:
        now = time.monotonic()
        if now - self._shown < 0.1 and done < total:
            return
        self._shown = now
        text = f"replay: {done}/{total} logs, {read / _MIB:.1f}/{size / _MIB:.1f} MiB"
        self._stream.write("\r" + text.ljust(self._width))
        self._stream.flush()
        self._width = len(text)

    def clear(self) -> None:
        if self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
