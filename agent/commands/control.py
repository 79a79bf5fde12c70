"""The commands that talk to a running agent through its control socket: `status`,
`describe`, `job stop`, and `exec` (which tells the agent how its command ended)."""

from __future__ import annotations

import argparse
from typing import Any

from agent.commands.exits import (
    EX_CONFIG,
    EX_FAILED,
    EX_NOT_EXECUTABLE,
    EX_NOT_FOUND,
    EX_OK,
    EX_USAGE,
    say,
)


def socket_path(args: argparse.Namespace) -> str:
    """The control socket: `--socket`, or the one the config file names."""
    if args.socket:
        return str(args.socket)
    from agent.config.loader import load_config

    return load_config(args.config).control_socket


def ask(args: argparse.Namespace, payload: dict[str, Any], timeout: float = 30.0) -> int:
    """Send one control request; print the answer as a table or JSON."""
    import json

    from agent.commands import views
    from agent.errors import ConfigError, ControlError
    from agent.service.control.client import request

    try:
        answer = request(socket_path(args), payload, timeout)
    except ConfigError as error:
        say(str(error))
        return EX_CONFIG
    except (ControlError, OSError) as error:
        say(str(error))
        return EX_FAILED
    if not answer.get("ok"):
        # The agent's words may quote a log or a driver (an application id, Spark's answer).
        say(views.printable(answer.get("error")))
        return EX_FAILED
    answer.pop("ok")
    if args.json:
        print(json.dumps(answer, indent=2))
    elif payload["command"] == "status":
        print(views.status(answer))
    elif payload["command"] == "describe":
        print(views.describe(answer))
    else:
        print(
            views.printable(
                f"stopped {answer['app_id']} (driver pid {', '.join(map(str, answer['pids']))}, "
                f"{answer['signal']}, {answer['seconds']}s); its runs end ABORT: {answer['reason']}"
            )
        )
    return EX_OK


def cmd_status(args: argparse.Namespace) -> int:
    return ask(args, {"command": "status"})


def cmd_describe(args: argparse.Namespace) -> int:
    return ask(args, {"command": "describe", "app_id": args.app_id})


def cmd_job_stop(args: argparse.Namespace) -> int:
    payload = {
        "command": "job_stop",
        "app_id": args.app_id,
        "reason": args.reason,
        "grace": args.grace,
    }
    return ask(args, payload, timeout=args.grace + 30)


def cmd_exec(args: argparse.Namespace) -> int:
    """`exec`: the command's own status; the agent's problems are told on stderr, never
    change the status and never keep the command from running."""
    from agent.commands.exec_command import command_of, execute

    command = command_of(args)
    if not command:
        say("exec: no command given: lineage-agent exec [--config FILE] -- COMMAND...")
        return EX_USAGE
    try:
        return execute(args, command, socket_path)
    except FileNotFoundError:
        say(f"exec: {command[0]}: command not found")
        return EX_NOT_FOUND
    except PermissionError:
        say(f"exec: {command[0]}: permission denied")
        return EX_NOT_EXECUTABLE
