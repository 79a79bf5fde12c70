"""`run` (the daemon in the foreground), `config check` (what `run` checks before it starts) and
`replay` (event logs to signed events without the daemon). `run_daemon` is the one door to
`agent.service.daemon`: nothing else builds the daemon."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from agent.commands.exits import (
    EX_CONFIG,
    EX_FAILED,
    EX_INTERRUPTED,
    EX_OK,
    EX_USAGE,
    say,
)

if TYPE_CHECKING:
    from agent.config.model import AgentConfig
    from agent.service.control.connections import ControlLimits
    from agent.service.daemon import SourceFactory
    from agent.source import Source, SourceContext


def default_source(config: AgentConfig, context: SourceContext) -> Source:
    from agent.spark.follow.source import SparkSource

    return SparkSource.from_config(config, context)


def run_daemon(
    config_path: str,
    source_factory: SourceFactory | None = None,
    control_limits: ControlLimits | None = None,
) -> int:
    """Load the config and run the agent until SIGTERM; the exit code for the process.
    `control_limits` replaces the control socket's (tests make them small)."""
    from agent.config.loader import load_config
    from agent.errors import ConfigError, StartError
    from agent.service.daemon import Daemon
    from agent.telemetry import logs

    try:
        config = load_config(config_path)
    except ConfigError as error:
        for message in error.messages:
            say(message)
        return EX_CONFIG
    logs.configure(config.logging.level, config.logging.format)
    daemon = Daemon(config, source_factory or default_source)
    if control_limits is not None:
        daemon.control_limits = control_limits
    try:
        import asyncio  # here: the other commands start without it

        outcome = asyncio.run(daemon.run())
    except StartError as error:
        import structlog

        structlog.get_logger("agent.daemon").error("start_refused", error=str(error))
        say(str(error))
        return EX_CONFIG
    return EX_OK if outcome == "stopped" else EX_FAILED


def cmd_run(args: argparse.Namespace) -> int:
    return run_daemon(args.config)


def cmd_config_check(args: argparse.Namespace) -> int:
    """The file, then every check `run` makes before it opens anything (agent.service.preflight);
    what only the service's user or environment can tell is printed as a note after `ok`.
    Every problem of the file is printed, each with file:line where the key is in the file
    and a hint where there is one; `--syntax-only` reads the file and nothing else."""
    from agent.config.client import differences
    from agent.config.loader import load_located
    from agent.errors import ConfigError
    from agent.service.preflight import check_startup, connect_error, hint_for, relative_note

    try:
        # Syntax only: the file alone, not the OpenLineage client's variables or files.
        located = load_located(args.file, {} if args.syntax_only else None)
    except ConfigError as error:
        _config_errors(error.messages, hint_for)
        return EX_CONFIG
    notes = [relative_note(key, text, located) for key, text in located.relative.items()]
    if not args.syntax_only:
        checked = check_startup(
            located.config,
            service=False,
            root=args.root,
            # A staged tree is checked for another machine: this one's network says nothing.
            reachable=connect_error if args.root is None else None,
        )
        if checked.errors:
            lines, origins = located.lines, dict(located.config.origins)
            _config_errors(
                [_located(args.file, lines, e, origins) for e in checked.errors], hint_for
            )
            return EX_CONFIG
        notes += checked.notes
    print("ok")
    for key, origin in located.config.origins:  # settings from the client's conventions
        print(f"from: {key}: {origin}")
    for line in differences(located.config.lineage, located.config.origins):
        print(f"differs: {line}")
    for note in notes:
        print(f"note: {note}")
    return EX_OK


def _located(
    source: str, lines: Mapping[str, int], message: str, origins: Mapping[str, str]
) -> str:
    """`FILE:LINE: key: ...` for a check's message that starts with a key of the file
    (`FILE: key: ...` when the key is not in the file: its default was checked); a setting
    taken from the client's conventions is named where it was written there instead."""
    key = message.partition(": ")[0]
    origin = origins.get(key) or next(
        (where for name, where in origins.items() if name.startswith(key + ".")), None
    )
    if origin is not None and key not in lines:
        return f"{origin}: {message}"
    line = lines.get(key) or lines.get(key.partition("[")[0])
    return f"{source}:{line}: {message}" if line else f"{source}: {message}"


def cmd_config_extras(args: argparse.Namespace) -> int:
    """The extras (pyproject's optional dependencies) the stores the file's event-log
    directories are on need, comma-separated: what deploy/install.sh installs."""
    import importlib.util

    from agent.config.loader import load_located
    from agent.errors import ConfigError
    from agent.service.preflight import hint_for
    from agent.spark.eventlog import stores
    from agent.spark.eventlog.storage import filesystems

    try:
        located = load_located(args.file, {})  # the file alone, as --syntax-only reads it
    except ConfigError as error:
        _config_errors(error.messages, hint_for)
        return EX_CONFIG
    urls = [d for d in located.config.spark.event_log_dirs if stores.is_url(d)]
    needed = {
        extra
        for extra, package in (
            (filesystems.EXTRAS.get(p), filesystems.PACKAGES[p])
            for p in map(filesystems.protocol, urls)
        )
        if extra is not None and not (args.missing and importlib.util.find_spec(package))
    }
    print(",".join(sorted(needed)))
    return EX_OK


def _config_errors(messages: Sequence[str], hint_for: Callable[[str], str | None]) -> None:
    for message in messages:
        say(message)
        hint = hint_for(message)
        if hint is not None:
            say(f"hint: {hint}")


def cmd_replay(args: argparse.Namespace) -> int:
    """`replay`: 2 when a log or file could not be handled, 1 when a run failed or an event
    was dropped, else 0 (see `replay --help`)."""
    from agent.commands.replay_command import execute, render
    from agent.errors import ConfigError, KeyFileError, ReplayError, StartError

    try:
        report = execute(args)
    except (ConfigError, StartError) as error:
        say(str(error))
        return EX_CONFIG
    except (ReplayError, KeyFileError) as error:
        say(str(error))
        return EX_USAGE
    except KeyboardInterrupt:
        say("interrupted")
        return EX_INTERRUPTED
    if report.errors:
        code = EX_USAGE
    else:
        code = EX_OK if report.passed and not (report.dropped or report.unconfirmed) else EX_FAILED
    print(render(report, code, as_json=args.json))
    return code
