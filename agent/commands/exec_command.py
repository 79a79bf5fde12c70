"""`lineage-agent exec`: its arguments, and what it says on stderr about the agent.

The command's status is `exec`'s status; the agent's problems (no config, no agent answering)
are told on stderr after the command's own output and change nothing else (`exec_wrap`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Final

from agent.commands.arguments import Command, Subparsers, duration_option, socket_options
from agent.commands.exec_wrap import report, report_later, run
from agent.errors import AgentError

#: `--retry-for`: default and largest seconds the report is retried when no agent answers.
RETRY_FOR: Final = 600.0
MAX_RETRY_FOR: Final = 86400.0


def register(subparsers: Subparsers, func: Command) -> argparse.ArgumentParser:
    """Add `exec` to the `lineage-agent` command, run by `func`."""
    parser = subparsers.add_parser(
        "exec",
        help="run a Spark program and tell the agent how it ended",
        usage="lineage-agent exec [--config FILE | --socket PATH] [--retry-for DURATION] "
        "-- COMMAND...",
        description="Run COMMAND (spark-submit ..., python job.py) with its signals, stdin, "
        "stdout and stderr passed through, tie the Spark applications it starts to it and tell "
        "the agent how it ended: a command that exits non-zero ends its applications FAIL "
        "with its exit status and the last lines of its stderr. Exits with the command's "
        "status (128 + N when signal N killed it).",
    )
    socket_options(parser)
    duration_option(
        parser,
        "--retry-for",
        maximum=MAX_RETRY_FOR,
        default=RETRY_FOR,
        help="when no agent answers at the end, a detached process retries for this long, "
        f"like 30s or 5m (a bare number is seconds), 0 to {MAX_RETRY_FOR:g}s (default "
        f"{RETRY_FOR:g}s; 0: no retry)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND")
    parser.set_defaults(func=func)
    return parser


def command_of(args: argparse.Namespace) -> list[str]:
    """The command to run: what follows `--` (or the first argument that is not an option)."""
    command = list(args.command)
    return command[1:] if command[:1] == ["--"] else command


def execute(
    args: argparse.Namespace,
    command: list[str],
    socket_of: Callable[[argparse.Namespace], str],
) -> int:
    """Run the command, report its end; the command's status. FileNotFoundError /
    PermissionError when it cannot be started."""
    socket_path: str | None = None
    try:
        socket_path = socket_of(args)
    except (AgentError, OSError) as error:
        _say(f"{error}; the command runs, but the agent is not told how it ends")
    exec_id, ended = run(command, os.environ)
    if socket_path is not None:
        problem = report(socket_path, exec_id, ended)
        if problem is not None and problem[1] and args.retry_for > 0:
            pid = report_later(socket_path, exec_id, ended, args.retry_for)
            _say(
                f"the agent was not told how the command ended ({problem[0]}); process {pid} "
                f"tries again for {args.retry_for:g}s"
            )
        elif problem is not None:
            _say(f"the agent was not told how the command ended ({problem[0]})")
    return ended.status


def _say(message: str) -> None:
    print(f"lineage-agent: exec: {message}", file=sys.stderr)
