"""The retry rules alone: the backoff's waits, `Retry-After` in both of its forms, how many
retries the client's settings allow, and the notes `config check` prints about them."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from agent.config.model import HttpConfig, LineageConfig, RetryConfig
from agent.delivery.retry import (
    Backoff,
    DeliveryPolicy,
    Tries,
    delivery_policy,
    retries_of,
    retry_after,
    retry_notes,
)
from agent.errors import NotStored

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def test_backoff_doubles_from_the_factor_up_to_the_cap() -> None:
    """Without jitter the n-th retry waits factor * 2**(n-1), never more than the cap."""
    backoff = Backoff(factor=0.5, cap=30.0, jitter=0.0)
    assert [backoff.wait(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_backoff_jitter_adds_at_most_its_seconds_within_the_cap() -> None:
    """Jitter adds between 0 and `jitter` seconds, and the cap still holds."""
    backoff = Backoff(factor=0.5, cap=3.0, jitter=1.0)
    waits = [backoff.wait(1) for _ in range(200)]
    assert all(0.5 <= w <= 1.5 for w in waits)
    assert len(set(waits)) > 1
    assert all(backoff.wait(5) == 3.0 for _ in range(20))


def test_retry_after_wins_within_the_cap() -> None:
    """A collector's Retry-After replaces the backoff, capped, never negative."""
    backoff = Backoff(factor=0.5, cap=30.0, jitter=1.0)
    assert backoff.wait(1, 7.0) == 7.0
    assert backoff.wait(1, 3600.0) == 30.0
    assert backoff.wait(3, -5.0) == 0.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("5", 5.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        (format_datetime(datetime(2026, 3, 1, 12, 0, 42, tzinfo=UTC), usegmt=True), 42.0),
        ("Sun, 01 Mar 2026 11:59:00 GMT", 0.0),  # a date already past: at once
        ("soon", None),
        ("-3", None),
        ("1.5", None),
        ("Sun, 01 Mar 2026 12:00:42", None),  # no zone: unreadable
        ("", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(header: str, seconds: float | None) -> None:
    """Retry-After as seconds or an HTTP date (RFC 9110, 10.2.3); anything else is None."""
    assert retry_after(header, NOW) == seconds


def test_a_not_stored_answer_carries_its_status_and_drop_reason() -> None:
    """NotStored names its own drop reason for the five statuses, http_4xx/5xx else."""
    assert NotStored(503, "HTTP 503").reason == "http_503"
    assert NotStored(429, "HTTP 429", 2.0).retry_after == 2.0
    assert NotStored(507, "HTTP 507").reason == "http_5xx"
    assert NotStored(408, "HTTP 408").reason == "http_4xx"


def test_tries_count_retries_up_to_the_policys() -> None:
    """A batch is retried `retries` times at most, each wait doubling."""
    tries = Tries(DeliveryPolicy(retries=2, backoff=Backoff(0.1, 1.0, 0.0), resend_terminal=True))
    error = NotStored(500, "HTTP 500")
    assert [tries.not_stored(error) for _ in range(3)] == [0.1, 0.2, None]


@pytest.mark.parametrize(
    ("retry", "retries"),
    [
        (RetryConfig(), 10),
        (RetryConfig(total=3), 3),
        (RetryConfig(total=10, status=2), 2),
        (RetryConfig(total=1, status=5), 1),
        (RetryConfig(allowed_methods=("GET", "HEAD")), 0),
        (RetryConfig(allowed_methods=("post",)), 10),
    ],
)
def test_retries_follow_urllib3s_counters(retry: RetryConfig, retries: int) -> None:
    """total, lowered by status; none when POST is not an allowed method."""
    assert retries_of(retry) == retries


def test_the_policy_is_http_only() -> None:
    """Retries and the terminal resend are the HTTP transport's; file and kafka get none."""
    lineage = LineageConfig(
        transport=("http", "file"),
        http=HttpConfig(endpoint="http://localhost:5000/api/v1/lineage"),
    )
    http = delivery_policy(lineage, "http")
    assert (http.retries, http.resend_terminal, http.backoff) == (10, True, Backoff(0.5, 30, 1))
    assert delivery_policy(lineage, "file") == DeliveryPolicy(retries=0)
    off = LineageConfig(http=lineage.http, resend_unconfirmed_terminal=False)
    assert delivery_policy(off, "http").resend_terminal is False


def test_notes_say_read_and_connect_retries_are_not_made() -> None:
    """`read` and `connect` are accepted and each gets one line saying why it is not used."""
    http = HttpConfig(endpoint="http://x/api/v1/lineage", retry=RetryConfig(read=5, connect=5))
    assert retry_notes(http) == [
        "lineage.http.retry.read: the agent makes no read retries: a request that may have"
        " been stored is never sent again (at-most-once)",
        "lineage.http.retry.connect: not needed: a request that never left stays queued and"
        " goes when the collector answers again",
    ]
    assert retry_notes(HttpConfig(endpoint="http://x/api/v1/lineage")) == []
