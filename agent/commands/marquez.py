"""Reading RunEvents back from Marquez, for `lineage-agent verify --marquez`.

Marquez serves what it received at `GET /api/v1/events/lineage` (its OpenLineageResource):
`after` (inclusive) and `before` (exclusive) bound the eventTime, `sortDirection` is `asc` or
`desc` (the default), `limit` (default 100) and `offset` page, and the answer is
`{"events": [...], "totalCount": N}`. There is no namespace parameter: `--namespace` filters
here. It orders by eventTime alone, and PostgreSQL promises no order among equal times, so
paging by offset can skip or repeat events that share a time (and shifts when events arrive
meanwhile). Pages are taken by time instead: ascending from `after`, every event earlier than
the last one of a full page is complete; the next page starts at that last time, and a page
whose events all share one time is asked for again twice as large.

Marquez's `before` defaults to 2030; it is always sent, past the latest time the agent writes.
The events Marquez writes back hold nulls and re-formatted times; `agent.delivery.verify`
reads them as the agent signed them (see `agent.delivery.signing`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx
from nacl.signing import VerifyKey

from agent.delivery.verify import (
    Problem,
    VerifyReport,
    event_label,
    parse_strict,
    verify_events,
)
from agent.errors import ReadBackError, SignatureError

EVENTS_PATH: Final = "/api/v1/events/lineage"
#: Marquez's own default page size.
PAGE_SIZE: Final = 100
#: The largest page asked for when that many events share one time; past it, no way on.
MAX_PAGE: Final = 12_800
#: A bound on one audit, far above any Marquez it is meant for: a server that never ends stops.
MAX_EVENTS: Final = 10_000_000
#: One page's answer; Marquez's events are a few KB each.
MAX_ANSWER_BYTES: Final = 256 << 20
TIMEOUT: Final = 30.0
#: `before` of every page: past 9999-12-31T23:59:59.999Z, the latest time the agent writes.
BEFORE: Final = "9999-12-31T23:59:59.999999Z"
_AGENT_ENDPOINT: Final = "/api/v1/lineage"
# What Java's ISO formatters write: date, time, up to 9 fraction digits, Z or an offset.
_TIME: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d(?::\d\d)?)"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND: Final = timedelta(seconds=1)


def marquez_base(url: str) -> str:
    """Marquez's address from `--marquez`: its base URL, or the agent's endpoint
    `.../api/v1/lineage` (the URL the agent ships to); ReadBackError if not http(s)."""
    try:
        parts = urlsplit(url.strip())
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        usable = False
    if not usable:
        raise ReadBackError(
            f"--marquez: expected Marquez's http:// or https:// address, got {_redacted(url)!r}"
        )
    path = parts.path.rstrip("/").removesuffix(_AGENT_ENDPOINT)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def verify_marquez(
    url: str,
    trusted: VerifyKey | Iterable[VerifyKey],
    *,
    namespace: str | None = None,
    on_problem: Callable[[Problem], None] | None = None,
    page_size: int = PAGE_SIZE,
    timeout: float = TIMEOUT,
) -> VerifyReport:
    """Verify every RunEvent Marquez at `url` holds (of job namespace `namespace` if given).

    Problems go to `on_problem` as they are found, each named by `event_label`. Raises
    ReadBackError when Marquez cannot be read to the end; the problems found until then
    were already reported.
    """
    events = read_events(url, page_size=page_size, timeout=timeout)
    if namespace is not None:
        events = (e for e in events if _namespace(e) == namespace)
    return verify_events(((event_label(e), e) for e in events), trusted, on_problem)


def read_events(
    url: str, *, page_size: int = PAGE_SIZE, timeout: float = TIMEOUT
) -> Iterator[Mapping[str, Any]]:
    """Every RunEvent Marquez at `url` serves, oldest first, each once (see the module)."""
    if not 1 <= page_size <= MAX_PAGE:
        raise ValueError(f"page_size must be from 1 to {MAX_PAGE}, got {page_size}")
    base = marquez_base(url)
    who = f"Marquez at {_redacted(base)}"
    with httpx.Client(timeout=timeout, headers={"Accept": "application/json"}) as client:
        pages = _Pages(client, base, who, timeout)
        after, limit, read = 0, page_size, 0
        while True:
            events = pages.get(after, limit)
            times = [_time_key(event, who) for event in events]
            if any(later < earlier for earlier, later in itertools.pairwise(times)):
                raise ReadBackError(f"{who} sent events out of time order")
            if times and times[0] < after:
                raise ReadBackError(f"{who} sent an event older than the `after` it was given")
            if len(events) < limit:  # the last page
                yield from events
                return
            last = times[-1]
            complete = [event for event, time in zip(events, times, strict=True) if time < last]
            if not complete:  # a whole page at one time: ask for more of it
                if limit >= MAX_PAGE:
                    raise ReadBackError(
                        f"{who} holds more than {MAX_PAGE} events at {_format(last)}; "
                        "they cannot be paged through"
                    )
                limit = min(limit * 2, MAX_PAGE)
                continue
            read += len(complete)
            if read > MAX_EVENTS:
                raise ReadBackError(f"stopped after {MAX_EVENTS} events from {who}")
            yield from complete
            after, limit = last, page_size


class _Pages:
    """GET one page of `/api/v1/events/lineage`; every failure is one ReadBackError."""

    def __init__(self, client: httpx.Client, base: str, who: str, timeout: float) -> None:
        self._client = client
        self._url = base + EVENTS_PATH
        self._who = who
        self._timeout = timeout

    def get(self, after: int, limit: int) -> list[Mapping[str, Any]]:
        params = {
            "sortDirection": "asc",
            "after": _format(after),
            "before": BEFORE,
            "limit": str(limit),
            "offset": "0",
        }
        who, request = self._who, f"GET {EVENTS_PATH}"
        try:
            with self._client.stream("GET", self._url, params=params) as answer:
                if answer.status_code != 200:
                    phrase = f" {answer.reason_phrase}" if answer.reason_phrase else ""
                    raise ReadBackError(f"{who} answered {answer.status_code}{phrase} to {request}")
                body = _read(answer, who)
        except httpx.TimeoutException:
            raise ReadBackError(
                f"{who} did not answer {request} within {self._timeout:g}s"
            ) from None
        except httpx.ConnectError as error:
            raise ReadBackError(f"cannot reach {who}: {_cause(error)}") from None
        except httpx.HTTPError as error:
            raise ReadBackError(f"{who} broke off {request}: {_cause(error)}") from None
        try:
            document = parse_strict(body)
        except SignatureError as error:
            raise ReadBackError(
                f"{who} answered {request} with text that is {error.reason}"
            ) from None
        events = document.get("events") if isinstance(document, Mapping) else None
        if not isinstance(events, list):
            raise ReadBackError(f'{who} answered {request} with JSON that has no "events" list')
        return events


def _read(answer: httpx.Response, who: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in answer.iter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ReadBackError(f"{who} answered more than {MAX_ANSWER_BYTES >> 20} MiB for a page")
        chunks.append(chunk)
    return b"".join(chunks)


def _time_key(event: object, who: str) -> int:
    """The event's eventTime in microseconds since the epoch, rounded as PostgreSQL stores
    it: Marquez orders by that."""
    text = event.get("eventTime") if isinstance(event, Mapping) else None
    found = _TIME.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ReadBackError(
            f"{who} sent an event without a date-time eventTime: {event_label(event)}"
        )
    year, month, day, hour, minute, second = map(int, found.groups()[:6])
    fraction, offset = found.group(7, 8)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        raise ReadBackError(f"{who} sent an event with eventTime {text}") from None
    if offset != "Z":
        hours, minutes, *seconds = map(int, offset[1:].split(":"))
        shift = timedelta(hours=hours, minutes=minutes, seconds=sum(seconds))
        moment = moment - shift if offset[0] == "+" else moment + shift
    nanos = int((fraction or "").ljust(9, "0"))
    return (moment - _EPOCH) // _SECOND * 1_000_000 + (nanos + 500) // 1000


def _format(micros: int) -> str:
    """A time as `after` takes it (ZonedDateTime.parse)."""
    seconds, fraction = divmod(micros, 1_000_000)
    moment = _EPOCH + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:06d}Z"


def _namespace(event: Mapping[str, Any]) -> object:
    job = event.get("job")
    return job.get("namespace") if isinstance(job, Mapping) else None


def _cause(error: BaseException) -> str:
    """The operating system's words for a network failure (`Connection refused`), else the
    error's own text."""
    seen: BaseException | None = error
    for _ in range(16):  # chains are short; this only bounds a strange one
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return str(error) or type(error).__name__


def _redacted(url: str) -> str:
    """`url` without user name, password, query and fragment: nothing secret in a message."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "an unparsable URL"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
