"""When a batch is sent again: what the collector answered it did not store, and a run's
terminal event whose request got no answer.

A collector that answers 429, 500, 502, 503 or 504 (`lineage.http.retry.status_forcelist`)
says it did not store the request: a database restarting behind Marquez, a proxy with no
upstream, a rate limit. Such a batch is tried again after a capped exponential wait
(`backoff_factor * 2**(n-1)` seconds before the n-th retry, plus up to `backoff_jitter`
seconds drawn at random, at most `backoff_max`; the collector's `Retry-After` instead when
it gives one, within the same cap), at most `total` times (`status` when lower), and dropped
as `http_<status>` after the last. Its lane sends nothing else meanwhile, so the run's later
events wait behind it.

The names are the OpenLineage client's (urllib3's `Retry`), the defaults a daemon's: a
collector that answers 5xx for half a minute loses nothing, where the client's defaults give
up after a few seconds. Retries of a request that may have been stored (urllib3's `read`)
are never made: that is at-most-once. `connect` retries are moot: a request that never left
stays queued anyway.

The one deliberate exception to at-most-once (`lineage.resend_unconfirmed_terminal`, HTTP
only): a run's terminal event (COMPLETE, FAIL, ABORT) whose request left and got no answer is
sent once more, byte-identical, so that a collector killed mid-request does not keep the run
RUNNING for ever. Consumers can de-duplicate by its signature.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Final

from agent.config.model import HttpConfig, LineageConfig, RetryConfig
from agent.delivery.envelope import Envelope
from agent.errors import NotStored

#: A run's last event: the one a collector's run state hangs on.
TERMINAL: Final = frozenset({"COMPLETE", "FAIL", "ABORT"})
#: Seconds a `Retry-After` may ask for before it is read as nonsense (it is capped anyway).
_MAX_RETRY_AFTER: Final = 10**9


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits between attempts of a batch the collector did not store (see the module's
    docstring); `Retry-After` wins, within the cap."""

    factor: float = 0.5
    cap: float = 30.0
    jitter: float = 1.0

    def wait(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before the `retry`-th retry (1 for the first)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.cap)
        base: float = self.factor * 2 ** max(retry - 1, 0)
        if self.jitter:
            base += random.uniform(0.0, self.jitter)
        return min(self.cap, base)


def retry_after(value: str, now: float) -> float | None:
    """Seconds a `Retry-After` header asks for: a number of seconds or an HTTP date (against
    `now`, a Unix time); None when unreadable."""
    text = value.strip()
    if text.isdigit():
        return float(min(int(text[:12]), _MAX_RETRY_AFTER))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(when.timestamp() - now, 0.0)


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """What one transport's delivery sends again: a batch not stored (at most `retries`
    times) and, with `resend_terminal`, a terminal event left unconfirmed (once)."""

    retries: int = 10
    backoff: Backoff = Backoff()
    respect_retry_after: bool = True
    resend_terminal: bool = False
    #: the statuses retried beyond the five `Metrics` shows for http, for the retry
    #: counter's series
    statuses: tuple[int, ...] = ()


def delivery_policy(lineage: LineageConfig, name: str) -> DeliveryPolicy:
    """The policy of transport `name` as configured: HTTP's retry settings and the resend of
    terminal events; the other transports never raise `NotStored` and never resend."""
    http = lineage.http
    if name != "http" or http is None:
        return DeliveryPolicy(retries=0)
    retry = http.retry
    return DeliveryPolicy(
        retries=retries_of(retry),
        backoff=Backoff(retry.backoff_factor, retry.backoff_max, retry.backoff_jitter),
        respect_retry_after=retry.respect_retry_after_header,
        resend_terminal=lineage.resend_unconfirmed_terminal,
        statuses=retry.status_forcelist,
    )


def retries_of(retry: RetryConfig) -> int:
    """How often a batch not stored is tried again: `total`, or `status` when lower; none
    when POST is not among `allowed_methods` (as urllib3 would not retry it)."""
    if "POST" not in (method.upper() for method in retry.allowed_methods):
        return 0
    return retry.total if retry.status is None else min(retry.total, retry.status)


def retry_notes(http: HttpConfig | None) -> list[str]:
    """`config check`'s notes on retry settings the agent accepts and does not act on."""
    if http is None:
        return []
    retry = http.retry
    notes = []
    if retry.read is not None:
        notes.append(
            "lineage.http.retry.read: the agent makes no read retries: a request that may"
            " have been stored is never sent again (at-most-once)"
        )
    if retry.connect is not None:
        notes.append(
            "lineage.http.retry.connect: not needed: a request that never left stays queued"
            " and goes when the collector answers again"
        )
    if "POST" not in {method.upper() for method in retry.allowed_methods}:
        notes.append(
            "lineage.http.retry.allowed_methods: POST is not listed, so no request is retried"
        )
    return notes


class Tries:
    """One batch's history: how often it was retried, and whether it was resent."""

    __slots__ = ("policy", "resent", "retried")

    def __init__(self, policy: DeliveryPolicy) -> None:
        self.policy = policy
        self.retried = 0
        self.resent = False

    def not_stored(self, error: NotStored) -> float | None:
        """Seconds to wait before the batch goes again, or None when no retry is left."""
        if self.retried >= self.policy.retries:
            return None
        self.retried += 1
        after = error.retry_after if self.policy.respect_retry_after else None
        return self.policy.backoff.wait(self.retried, after)

    def resend(self, batch: Sequence[Envelope]) -> list[Envelope]:
        """The terminal events of an unconfirmed batch to send once more (none the second
        time, or when the policy says so)."""
        if not self.policy.resend_terminal or self.resent:
            return []
        again = [envelope for envelope in batch if envelope.event_type in TERMINAL]
        self.resent = bool(again)
        return again
