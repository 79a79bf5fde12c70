"""structlog setup: JSON lines for journald, console on a terminal, secrets scrubbed."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
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


def configure(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog once per process; safe to call again on reload."""
    stream = stream or sys.stdout
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=stream.isatty())
        if console
        else structlog.processors.JSONRenderer()
    )
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
