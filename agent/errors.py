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
    ├── TransportFailure         a transport's send that did not end in delivery
    │   ├── DeliveryError        refused or failed for good: dropped (`reason`: DropReason)
    │   │   └── NotStored        the collector said it did not store it (`status`,
    │   │                        `retry_after`): tried again, dropped after the last attempt
    │   ├── NotSent              provably never left (`reason`: NotSentReason): stays queued
    │   └── Unconfirmed          may have reached the collector (`reason`: UnconfirmedReason)
    ├── CanonicalizationError    a value with no RFC 8785 form (also a ValueError)
    └── CodecError               event-log decoding
        ├── UnknownCodec         a codec name Spark does not write
        ├── CodecUnavailable     a codec whose library is not installed
        └── CorruptStream        bytes that are not a valid stream (`offset`, `partial`)

The commands alone turn them into exit codes: ConfigError and StartError are 78 (EX_CONFIG), so
that systemd's RestartPreventExitStatus=78 stops a restart loop.
"""

from __future__ import annotations

from typing import Literal, get_args

#: Why an event will never reach a transport: the `reason` label of the drop counters.
DropReason = Literal[
    "http_4xx",  # the collector refused the event (400, 401, 403, 413, ...)
    "http_5xx",  # the collector failed (501, 505, ...: a 5xx not in the retried list)
    "http_429",  # too many requests, answered to the last attempt
    "http_500",  # internal error (a database restarting behind Marquez), to the last attempt
    "http_502",  # bad gateway (a proxy with no upstream), to the last attempt
    "http_503",  # unavailable, to the last attempt
    "http_504",  # gateway timeout, to the last attempt
    "write_error",  # the file transport could not write (disk full, permission, size limit)
    "too_large",  # larger than the Kafka producer's or the broker's message size limit
    "refused",  # the Kafka broker refused the event for good (authorization, topic, policy)
    "queue_full",  # the bounded queue was full when the event was offered
    "shutdown",  # still queued when the drain deadline passed, or its transport was removed
    "invalid",  # the event could not be serialized or signed (it is logged, never shipped)
    "internal",  # a transport raised something other than a TransportFailure (a bug; logged)
    "lease_lost",  # another agent took its application before it left (a shared state)
    "spool_full",  # the spool of what has not left was at its size bound (`lineage.spool`)
    "transport_removed",  # kept in the spool for a transport the config no longer has
]
DROP_REASONS: tuple[DropReason, ...] = get_args(DropReason)
#: Why a request provably never left: its events stay queued and go when the collector
#: answers again (not a delivery attempt, so at-most-once allows it).
NotSentReason = Literal[
    "connect",  # refused, unreachable, unresolvable, or no connection within the timeout
    "tls",  # the TLS handshake failed (certificate, protocol): nothing of the request was sent
    "closed",  # the collector closed the connection before it asked for the request's body
    "unavailable",  # a Kafka broker answered that it wrote nothing (no leader, too few replicas)
    "buffer_full",  # the Kafka producer's own buffer was full: the event was not taken
]
NOT_SENT_REASONS: tuple[NotSentReason, ...] = get_args(NotSentReason)
#: Why a request that left has no answer: the collector may have stored its events, so they
#: are never sent again, and count apart from drops (`lineage_events_unconfirmed_total`).
UnconfirmedReason = Literal[
    "timeout",  # no complete answer within the per-request timeout
    "network",  # the connection broke after the request began to leave
    "shutdown",  # still in flight when the drain deadline cancelled it
    "interrupted",  # in flight when the agent was killed: found so in the spool at its start
]
UNCONFIRMED_REASONS: tuple[UnconfirmedReason, ...] = get_args(UnconfirmedReason)


class AgentError(Exception):
    """The root of every error the agent raises on purpose; the message is for people."""


class ConfigError(AgentError):
    """A configuration file that cannot be used, with file, line and key in the message;
    one line per problem when the file has several (`messages`)."""

    def __init__(self, *messages: str) -> None:
        super().__init__("\n".join(messages))
        self.messages: tuple[str, ...] = messages


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


class TransportFailure(AgentError):
    """A send that did not end in delivery; the subclass says what became of the batch."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.detail = detail


class DeliveryError(TransportFailure):
    """A batch was refused or failed for good: dropped, never sent again."""

    def __init__(self, reason: DropReason, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason: DropReason = reason


#: The statuses with a drop reason of their own: what a collector answers when it did not
#: store a request and may store it later (the retried statuses by default).
NOT_STORED_STATUSES: tuple[int, ...] = (429, 500, 502, 503, 504)


def status_reason(status: int) -> DropReason:
    """The drop reason of an HTTP answer `status`: its own for the not-stored ones, else
    `http_4xx` or `http_5xx`."""
    if status in NOT_STORED_STATUSES:
        return f"http_{status}"  # type: ignore[return-value]
    return "http_5xx" if status >= 500 else "http_4xx"


class NotStored(DeliveryError):
    """The collector answered that it did not store the batch (429, 500, 502, 503, 504 unless
    configured otherwise): the pipeline tries it again after a backoff (`retry_after`: the
    seconds the collector asked for, if it did) and drops it with `reason` after the last
    attempt. Transports raise it; they never retry themselves."""

    def __init__(self, status: int, detail: str, retry_after: float | None = None) -> None:
        super().__init__(status_reason(status), detail)
        self.status = status
        self.retry_after = retry_after


class NotSent(TransportFailure):
    """Nothing of the request left (no connection, no TLS session): the batch may go again."""

    def __init__(self, reason: NotSentReason, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason: NotSentReason = reason


class Unconfirmed(TransportFailure):
    """The request left but no answer came: the collector may have the batch; never resent."""

    def __init__(self, reason: UnconfirmedReason, detail: str) -> None:
        super().__init__(reason, detail)
        self.reason: UnconfirmedReason = reason


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
