"""What the commands' parsers share: the default config file, bounded durations written as the
config writes them, and the options that find a running agent's control socket."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeAlias

DEFAULT_CONFIG = "/etc/lineage-agent/config.yaml"
#: The `lineage-agent` command's subcommands, as a module that adds one (`register`) gets them.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: What runs a subcommand: its arguments in, its exit status out.
Command: TypeAlias = Callable[[argparse.Namespace], int]


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


def duration_option(
    parser: argparse.ArgumentParser, flag: str, *, maximum: float, default: float, help: str
) -> None:
    """A `DURATION` option from 0 to `maximum` seconds (`seconds_argument`)."""
    parser.add_argument(
        flag, type=seconds_argument(maximum), default=default, metavar="DURATION", help=help
    )


def socket_options(parser: argparse.ArgumentParser) -> None:
    """`--config` and `--socket`: where the running agent's control socket is found."""
    parser.add_argument(
        "--config", "-c", default=DEFAULT_CONFIG, help="config file naming the control socket"
    )
    parser.add_argument("--socket", help="control socket path (instead of --config)")
