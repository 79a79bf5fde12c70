"""structlog setup: JSON lines for journald, console on a terminal, secrets scrubbed.

When stdout is the journal (systemd sets `JOURNAL_STREAM` to the `device:inode` of the
stream it connected; a redirect or pipe made later has another identity), every line starts
with its syslog priority as `<N>` (sd-daemon(3)), which journald strips and records, so that
`journalctl -p warning` shows warnings and errors. Anywhere else lines are plain.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

_SECRETS: set[str] = set()
REDACTED = "[REDACTED]"


def register_secret(value: str | None) -> None:
    """Never let `value` reach a log line, whatever field it hides in."""
    if value and len(value) >= 4:
        _SECRETS.add(value)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        for secret in _SECRETS:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def scrub_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    if not _SECRETS:
        return event_dict
    for key, value in event_dict.items():
        event_dict[key] = _scrub(value)
    return event_dict


#: sd-daemon(3) priorities by structlog level: crit 2, err 3, warning 4, info 6, debug 7.
PRIORITIES = {
    "critical": 2,
    "exception": 3,
    "error": 3,
    "warning": 4,
    "warn": 4,
    "notice": 5,
    "info": 6,
    "debug": 7,
}


def is_journal(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `stream` is the journal stream systemd connected (JOURNAL_STREAM=dev:inode)."""
    device, _, inode = environ.get("JOURNAL_STREAM", "").partition(":")
    try:
        info = os.fstat(stream.fileno())
        return (info.st_dev, info.st_ino) == (int(device), int(inode))
    except (OSError, ValueError, AttributeError):  # no descriptor, or a malformed variable
        return False


def with_priority(renderer: Callable[..., Any]) -> Callable[..., str]:
    """`renderer`, its line prefixed with the `<N>` priority of the event's level."""

    def render(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> str:
        priority = PRIORITIES.get(str(event_dict.get("level", method)), 6)
        return f"<{priority}>{renderer(logger, method, event_dict)}"

    return render


def configure(
    level: str = "info",
    fmt: str = "auto",
    stream: TextIO | None = None,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Configure structlog once per process; safe to call again on reload."""
    stream = stream or sys.stdout
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=stream.isatty())
        if console
        else structlog.processors.JSONRenderer()
    )
    if is_journal(stream, environ):
        renderer = with_priority(renderer)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            scrub_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
