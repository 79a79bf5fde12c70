"""The `lineage-agent` command; the only place that picks exit codes.

Exit codes: 0 ok, 1 a check failed (verify, replay) or the agent's source died (run: systemd
restarts it), 2 usage, 78 (EX_CONFIG) configuration or start-up refusal, so that systemd's
RestartPreventExitStatus=78 stops a restart loop, 130 interrupted. `exec` exits with its
command's status (128 + N when signal N killed it), 126 / 127 when the command cannot be run
or is not found, as a shell does.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent import __version__

if TYPE_CHECKING:
    from agent.config.model import AgentConfig
    from agent.service.control.connections import ControlLimits
    from agent.service.daemon import SourceFactory
    from agent.source import Source, SourceContext

EX_OK = 0
EX_FAILED = 1
EX_USAGE = 2
EX_NOT_EXECUTABLE = 126  # `exec`: the command was found but cannot be run, as a shell says
EX_NOT_FOUND = 127  # `exec`: no such command
EX_CONFIG = 78
EX_INTERRUPTED = 130
DEFAULT_CONFIG = "/etc/lineage-agent/config.yaml"
#: `job stop --grace`: default and largest seconds between SIGTERM and SIGKILL; the same bounds
#: as the control socket's (agent.service.control.server), repeated so --help needs no import.
STOP_GRACE = 10.0
MAX_STOP_GRACE = 3600.0


def _err(message: str) -> None:
    print(f"lineage-agent: {message}", file=sys.stderr)


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
            _err(message)
        return EX_CONFIG
    logs.configure(config.logging.level, config.logging.format)
    daemon = Daemon(config, source_factory or default_source)
    if control_limits is not None:
        daemon.control_limits = control_limits
    try:
        outcome = asyncio.run(daemon.run())
    except StartError as error:
        import structlog

        structlog.get_logger("agent.daemon").error("start_refused", error=str(error))
        _err(str(error))
        return EX_CONFIG
    return EX_OK if outcome == "stopped" else EX_FAILED


def _cmd_run(args: argparse.Namespace) -> int:
    return run_daemon(args.config)


def _cmd_config_check(args: argparse.Namespace) -> int:
    """The file, then every check `run` makes before it opens anything (agent.service.preflight);
    what only the service's user or environment can tell is printed as a note after `ok`.
    Every problem of the file is printed, each with file:line where the key is in the file
    and a hint where there is one; `--syntax-only` reads the file and nothing else."""
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
            lines = located.lines
            _config_errors([_located(args.file, lines, e) for e in checked.errors], hint_for)
            return EX_CONFIG
        notes += checked.notes
    print("ok")
    for key, origin in located.config.origins:  # settings from the client's conventions
        print(f"from: {key}: {origin}")
    for note in notes:
        print(f"note: {note}")
    return EX_OK


def _located(source: str, lines: Mapping[str, int], message: str) -> str:
    """`FILE:LINE: key: ...` for a check's message that starts with a key of the file
    (`FILE: key: ...` when the key is not in the file: its default was checked)."""
    key = message.partition(": ")[0]
    line = lines.get(key) or lines.get(key.partition("[")[0])
    return f"{source}:{line}: {message}" if line else f"{source}: {message}"


def _config_errors(messages: Sequence[str], hint_for: Callable[[str], str | None]) -> None:
    for message in messages:
        _err(message)
        hint = hint_for(message)
        if hint is not None:
            _err(f"hint: {hint}")


def _cmd_keygen(args: argparse.Namespace) -> int:
    from agent.delivery.signing import generate_key_file, key_id, public_key_text
    from agent.errors import KeyFileError

    try:
        verify_key = generate_key_file(args.out)
    except KeyFileError as error:
        _err(str(error))
        return EX_FAILED
    print(f"wrote {args.out} (mode 0600)")
    print(f"public key: {public_key_text(verify_key)}")
    print(f"key id: {key_id(verify_key)}")
    return EX_OK


def _cmd_pubkey(args: argparse.Namespace) -> int:
    from agent.delivery.signing import key_id, load_signing_key, public_key_text
    from agent.errors import KeyFileError

    try:
        verify_key = load_signing_key(args.key).verify_key
    except KeyFileError as error:
        _err(str(error))
        return EX_CONFIG
    if args.id:
        print(key_id(verify_key))
    else:
        # The key alone on stdout, so that `--public-key "$(lineage-agent pubkey --key K)"`
        # works; the id goes to stderr, where a person still sees it.
        print(public_key_text(verify_key))
        print(f"key id: {key_id(verify_key)}", file=sys.stderr)
    return EX_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    """`verify FILE...` or `verify --marquez URL`: 1 when an event fails or Marquez cannot be
    read to the end (the problems found until then are printed), 2 for bad arguments."""
    from agent.delivery.signing import load_verify_key
    from agent.delivery.verify import verify_files
    from agent.errors import KeyFileError, ReadBackError

    if bool(args.files) == bool(args.marquez):
        _err("verify: give event FILEs or --marquez URL" + (", not both" if args.files else ""))
        return EX_USAGE
    if args.namespace is not None and not args.marquez:
        _err("verify: --namespace goes with --marquez URL")
        return EX_USAGE
    try:
        trusted = [load_verify_key(key) for key in args.public_key]
    except KeyFileError as error:
        _err(str(error))
        return EX_USAGE
    from agent.commands.views import printable

    if args.files:
        report = verify_files(args.files, trusted)
        # A file name or a bad event's fault may carry control characters; shown escaped.
        print("\n".join(printable(line) for line in report.lines()))
        _private_key_hints(args.public_key, trusted, {p.reason for p in report.problems})
        return EX_OK if report.passed else EX_FAILED
    from agent.commands.marquez import marquez_base, verify_marquez

    try:
        marquez_base(args.marquez)
    except ReadBackError as error:
        _err(str(error))
        return EX_USAGE
    try:
        report = verify_marquez(
            args.marquez,
            trusted,
            namespace=args.namespace,
            # What Marquez gave back may carry control characters too.
            on_problem=lambda problem: print(printable(problem), flush=True),
        )
    except ReadBackError as error:
        _err(printable(str(error)))
        return EX_FAILED
    print(report.lines()[-1])
    return EX_OK if report.passed else EX_FAILED


def _private_key_hints(given: Sequence[str], trusted: Sequence[Any], reasons: set[str]) -> None:
    """Tell on stderr which --public-key is in fact a private key without the header (its
    seed signs the events `verify` found under an unknown keyId); never quotes key text."""
    import os

    from agent.delivery.signing import key_id_as_seed

    for name, key in zip(given, trusted, strict=True):
        as_seed = key_id_as_seed(key)
        if f"unknown keyId {as_seed}" in reasons:
            shown = name if os.path.exists(name) else "a --public-key text"
            _err(
                f"verify: {shown} is the private key of the events' keyId {as_seed}, not a "
                "public key; give its public key instead, as `lineage-agent pubkey --key FILE` "
                "prints it"
            )


def _socket_path(args: argparse.Namespace) -> str:
    if args.socket:
        return str(args.socket)
    from agent.config.loader import load_config

    return load_config(args.config).control_socket


def _ask(args: argparse.Namespace, payload: dict[str, Any], timeout: float = 30.0) -> int:
    """Send one control request; print the answer as a table or JSON."""
    import json

    from agent.commands import views
    from agent.errors import ConfigError, ControlError
    from agent.service.control.client import request

    try:
        answer = request(_socket_path(args), payload, timeout)
    except ConfigError as error:
        _err(str(error))
        return EX_CONFIG
    except (ControlError, OSError) as error:
        _err(str(error))
        return EX_FAILED
    if not answer.get("ok"):
        # The agent's words may quote a log or a driver (an application id, Spark's answer).
        _err(views.printable(answer.get("error")))
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


def _cmd_status(args: argparse.Namespace) -> int:
    return _ask(args, {"command": "status"})


def _cmd_describe(args: argparse.Namespace) -> int:
    return _ask(args, {"command": "describe", "app_id": args.app_id})


def _cmd_job_stop(args: argparse.Namespace) -> int:
    payload = {
        "command": "job_stop",
        "app_id": args.app_id,
        "reason": args.reason,
        "grace": args.grace,
    }
    return _ask(args, payload, timeout=args.grace + 30)


def _cmd_exec(args: argparse.Namespace) -> int:
    """`exec`: the command's own status; the agent's problems are told on stderr, never
    change the status and never keep the command from running."""
    from agent.commands.exec_command import command_of, execute

    command = command_of(args)
    if not command:
        _err("exec: no command given: lineage-agent exec [--config FILE] -- COMMAND...")
        return EX_USAGE
    try:
        return execute(args, command, _socket_path)
    except FileNotFoundError:
        _err(f"exec: {command[0]}: command not found")
        return EX_NOT_FOUND
    except PermissionError:
        _err(f"exec: {command[0]}: permission denied")
        return EX_NOT_EXECUTABLE


def _cmd_replay(args: argparse.Namespace) -> int:
    """`replay`: 2 when a log or file could not be handled, 1 when a run failed or an event
    was dropped, else 0 (see `replay --help`)."""
    from agent.commands.replay_command import execute, render
    from agent.errors import ConfigError, KeyFileError, ReplayError, StartError

    try:
        report = execute(args)
    except (ConfigError, StartError) as error:
        _err(str(error))
        return EX_CONFIG
    except (ReplayError, KeyFileError) as error:
        _err(str(error))
        return EX_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EX_INTERRUPTED
    if report.errors:
        code = EX_USAGE
    else:
        code = EX_OK if report.passed and not (report.dropped or report.unconfirmed) else EX_FAILED
    print(render(report, code, as_json=args.json))
    return code


def seconds_argument(maximum: float) -> Callable[[str], float]:
    """An argparse type: a duration from 0 to `maximum` written as the config writes them
    (`30s`, `5m`, `1h`, `500ms`, or a bare number of seconds) for `job stop --grace` and
    `exec --retry-for`; anything else, `nan` and `inf` included, is a usage error."""

    def seconds(text: str) -> float:
        from agent.config.kinds import duration_text, parse_duration

        value = parse_duration(text)
        if value is None or not (math.isfinite(value) and 0 <= value <= maximum):
            raise argparse.ArgumentTypeError(
                f"expected a duration from 0 to {duration_text(maximum)} (like 30s or 5m), "
                f"got {text!r}"
            )
        return value

    return seconds


def _control_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", "-c", default=DEFAULT_CONFIG, help="config file naming the control socket"
    )
    parser.add_argument("--socket", help="control socket path (instead of --config)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lineage-agent",
        description="OpenLineage lineage for Spark from outside the JVM.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the agent in the foreground (systemd runs this)")
    run.add_argument("--config", "-c", default=DEFAULT_CONFIG, help="YAML config file")
    run.set_defaults(func=_cmd_run)

    config = sub.add_parser("config", help="configuration commands")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    check = config_sub.add_parser(
        "check",
        help="validate a config file and everything `run` checks before it starts",
        description="Read the file and make every check `run` makes before it opens sockets "
        "and files: the signing key, the http endpoints, bearer token and CA bundle, the "
        "events file's directory. Prints `ok` (exit 0) or every problem found, each with "
        "file:line and a hint where there is one (exit 78); what only the service's user, "
        "environment or node can tell (a key still to be made, a file this user may not "
        "read, a token variable not set here, a missing event-log directory, an endpoint "
        "that does not answer from here) follows `ok` as `note: ...` lines.",
    )
    check.add_argument(
        "file",
        nargs="?",
        default=DEFAULT_CONFIG,
        help=f"YAML config file (default {DEFAULT_CONFIG}, as for run)",
    )
    check.add_argument(
        "--syntax-only",
        action="store_true",
        help="check the file alone (keys, values, lines), touching no other file, no "
        "environment and no network: for CI",
    )
    check.add_argument(
        "--root",
        metavar="DIR",
        help="look for the files the config names below DIR (a tree staged for an image)",
    )
    check.set_defaults(func=_cmd_config_check)

    keygen = sub.add_parser("keygen", help="create this node's Ed25519 signing key")
    keygen.add_argument("--out", required=True, help="private key file to create (mode 0600)")
    keygen.set_defaults(func=_cmd_keygen)

    pubkey = sub.add_parser(
        "pubkey",
        help="print the public key of a private key on stdout (its key id on stderr)",
        description="Print the base64 public key alone on stdout, ready for "
        '`verify --public-key "$(lineage-agent pubkey --key K)"`, and the key id on stderr; '
        "--id prints the key id alone on stdout instead.",
    )
    pubkey.add_argument("--key", required=True, help="the private key file")
    pubkey.add_argument(
        "--id", action="store_true", help="print the key id (sha256:...) instead of the key"
    )
    pubkey.set_defaults(func=_cmd_pubkey)

    verify = sub.add_parser(
        "verify",
        help="verify signed events in JSON or JSON-lines files, or read back from Marquez",
        description="Check every event's signature against the trusted public keys: the "
        "events of FILEs (JSON, JSON lines, rotated events.jsonl.<n>), or with --marquez every "
        "event Marquez holds, read back through its API (GET /api/v1/events/lineage). Prints "
        "one line per event that fails (unsigned, unknown keyId, does not verify), then a "
        "summary. Exit 0 when all verify, 1 when one fails or Marquez cannot be read to the "
        "end, 2 for bad arguments or keys.",
    )
    verify.add_argument("files", nargs="*", metavar="FILE")
    verify.add_argument(
        "--marquez",
        metavar="URL",
        help="Marquez's address (http://host:5000, or the agent's .../api/v1/lineage endpoint)",
    )
    verify.add_argument(
        "--namespace",
        metavar="NS",
        help="with --marquez: only the events of jobs in namespace NS",
    )
    verify.add_argument(
        "--public-key",
        action="append",
        required=True,
        metavar="KEY",
        help="trusted public key: a file or the base64 text `pubkey` prints (repeatable)",
    )
    verify.set_defaults(func=_cmd_verify)

    status = sub.add_parser("status", help="state, queues, drops and applications of the agent")
    _control_args(status)
    status.set_defaults(func=_cmd_status)

    describe = sub.add_parser(
        "describe", help="one application: runs, datasets, events, deliveries, lineage errors"
    )
    describe.add_argument("app_id", metavar="APP_ID")
    _control_args(describe)
    describe.set_defaults(func=_cmd_describe)

    job = sub.add_parser("job", help="act on a Spark application running on this node")
    job_sub = job.add_subparsers(dest="job_command", required=True, metavar="ACTION")
    stop = job_sub.add_parser(
        "stop", help="stop the application (SIGTERM, then SIGKILL); its runs end ABORT"
    )
    stop.add_argument("app_id", metavar="APP_ID")
    stop.add_argument(
        "--reason",
        default="stopped with lineage-agent job stop",
        help="recorded with the stop and carried by the ABORT events",
    )
    stop.add_argument(
        "--grace",
        type=seconds_argument(MAX_STOP_GRACE),
        default=STOP_GRACE,
        metavar="DURATION",
        help="time between SIGTERM and SIGKILL, like 30s or 5m (a bare number is seconds), "
        f"0 to 1h (default {STOP_GRACE:g}s)",
    )
    _control_args(stop)
    stop.set_defaults(func=_cmd_job_stop)

    from agent.commands.exec_command import register as register_exec

    register_exec(sub, _cmd_exec, seconds_argument)

    from agent.commands.replay_command import register

    register(sub, _cmd_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
