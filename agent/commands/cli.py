"""The `lineage-agent` command: its argument parser, and `main`, which runs the command chosen.

The commands themselves, and the exit codes they pick (`exits`), are in `run` (run, config
check, replay), `keys` (keygen, pubkey, verify) and `control` (status, describe, job stop,
exec); each imports what it needs only when it runs, so that `--help` loads little.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agent import __version__
from agent.commands.arguments import DEFAULT_CONFIG, duration_option, socket_options
from agent.commands.control import cmd_describe, cmd_exec, cmd_job_stop, cmd_status
from agent.commands.keys import cmd_keygen, cmd_pubkey, cmd_verify
from agent.commands.run import cmd_config_check, cmd_config_extras, cmd_replay, cmd_run

#: `job stop --grace`: default and largest seconds between SIGTERM and SIGKILL; the same bounds
#: as the control socket's (agent.service.control.handlers), repeated so --help needs no import.
STOP_GRACE = 10.0
MAX_STOP_GRACE = 3600.0


def _control_args(parser: argparse.ArgumentParser) -> None:
    socket_options(parser)
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
    run.set_defaults(func=cmd_run)

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
    check.set_defaults(func=cmd_config_check)
    extras = config_sub.add_parser(
        "extras",
        help="the agent's extras the stores of spark.event_log_dirs need (for install.sh)",
        description="Read the file alone and print the extras (s3, gcs, azure) that bring the "
        "libraries of the stores its spark.event_log_dirs name, comma-separated; an empty "
        "line when it names none. Exit 78 when the file is not a valid config.",
    )
    extras.add_argument("file", nargs="?", default=DEFAULT_CONFIG, help="YAML config file")
    extras.add_argument(
        "--missing", action="store_true", help="only those whose library is not installed here"
    )
    extras.set_defaults(func=cmd_config_extras)

    keygen = sub.add_parser("keygen", help="create this node's Ed25519 signing key")
    keygen.add_argument("--out", required=True, help="private key file to create (mode 0600)")
    keygen.set_defaults(func=cmd_keygen)

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
    pubkey.set_defaults(func=cmd_pubkey)

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
    verify.set_defaults(func=cmd_verify)

    status = sub.add_parser("status", help="state, queues, drops and applications of the agent")
    _control_args(status)
    status.set_defaults(func=cmd_status)

    describe = sub.add_parser(
        "describe", help="one application: runs, datasets, events, deliveries, lineage errors"
    )
    describe.add_argument("app_id", metavar="APP_ID")
    _control_args(describe)
    describe.set_defaults(func=cmd_describe)

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
    duration_option(
        stop,
        "--grace",
        maximum=MAX_STOP_GRACE,
        default=STOP_GRACE,
        help="time between SIGTERM and SIGKILL, like 30s or 5m (a bare number is seconds), "
        f"0 to 1h (default {STOP_GRACE:g}s)",
    )
    _control_args(stop)
    stop.set_defaults(func=cmd_job_stop)

    from agent.commands.exec_command import register as register_exec

    register_exec(sub, cmd_exec)

    from agent.commands.replay_command import register

    register(sub, cmd_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
