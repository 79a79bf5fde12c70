"""Every exception the agent raises across a module boundary, in one tree.

    AgentError
    ├── ConfigError              a config file that cannot be used (file, line and key named)
    ├── StartError               the agent refuses to start as configured (key, token, transport)
    ├── KeyFileError             a key file or key text that cannot be used
    ├── SignatureError           an event that failed verification (`reason` says why)
    ├── StateError               the state database cannot be opened
    ├── ControlError             a control request answered with ok: false
    ├── ReplayError              a `replay` log argument or output file that cannot be used
    ├── ReadBackError            events cannot be read back from Marquez (`verify --marquez`)
    ├── DeliveryError            a batch that did not reach its transport (`reason`: DropReason)
    ├── CanonicalizationError    a value with no RFC 8785 form (also a ValueError)
    └── CodecError               event-log decoding
        ├── UnknownCodec         a codec name Spark does not write
        ├── CodecUnavailable     a codec whose library is not installed
        └── CorruptStream        bytes that are not a valid stream (`offset`, `partial`)

`cli.py` alone turns them into exit codes: ConfigError and StartError are 78 (EX_CONFIG), so
that systemd's RestartPreventExitStatus=78 stops a restart loop.
"""

from __future__ import annotations

from typing import Literal, get_args

#: Why an event did not reach a transport: the `reason` label of the drop counters.
DropReason = Literal[
    "http_4xx",  # the collector refused the event (400, 401, 403, 413, ...)
    "http_5xx",  # the collector failed (500, 503, ...)
    "timeout",  # no full answer within the per-request timeout
    "connect",  # refused or unreachable before anything was sent
    "network",  # reset or broken mid-request
    "tls",  # certificate did not verify
    "write_error",  # the file transport could not write (disk full, permission, size limit)
    "queue_full",  # the bounded queue was full when the event was offered
    "shutdown",  # still queued when the drain deadline passed, or its transport was removed
    "invalid",  # the event could not be serialized or signed (it is logged, never shipped)
    "internal",  # a transport raised something other than DeliveryError (a bug; logged)
]
DROP_REASONS: tuple[DropReason, ...] = get_args(DropReason)


class AgentError(Exception):
    """The root of every error the agent raises on purpose; the message is for people."""


class ConfigError(AgentError):
    """A configuration file that cannot be used, with file, line and key in the message."""


class StartError(AgentError):
    """The agent refuses to start as configured; the message says what to fix."""


class KeyFileError(AgentError):
    """A key file or key text cannot be used; the message says which and why."""


class SignatureError(AgentError):
    """An event failed verification."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StateError(AgentError):
    """The state database cannot be used; the message says which file and what to do."""


class ControlError(AgentError):
    """A request the agent answers with ok: false; the message is shown to the operator."""


class ReplayError(AgentError):
    """A log argument or an output file that cannot be used; the message names it."""


class ReadBackError(AgentError):
    """Marquez cannot be reached or did not answer as Marquez does; the message says which."""


class DeliveryError(AgentError):
    """A batch was not delivered; nothing of it will be sent again."""

    def __init__(self, reason: DropReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: DropReason = reason
        self.detail = detail


class CanonicalizationError(AgentError, ValueError):
    """The value has no RFC 8785 form; the message names the problem and its JSON Pointer."""


class CodecError(AgentError):
    """An event-log stream that cannot be decoded."""


class UnknownCodec(CodecError):
    """A codec name Spark does not write."""


class CodecUnavailable(CodecError):
    """A codec Spark writes, whose decoding library is not installed."""


class CorruptStream(CodecError):
    """Input that is not a valid stream of the codec; `offset` is where that showed."""

    def __init__(self, detail: str, *, offset: int, partial: bytes = b"") -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset
        self.partial = partial
