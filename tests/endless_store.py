"""An S3-compatible endpoint on loopback whose every prefix lists without end: the listing a
bucket of a busy platform gives, generated page by page, for the memory tests and the store
benchmark. Nothing is stored; a page is made when it is asked for.

ListObjectsV2 (`list-type=2`) answers pages of 1,000 keys (or `max-keys`, if fewer), each
truncated with a continuation token, in S3's order (ascending by key), until the listing is
stopped: after `pages` pages served, `seconds` after the first one, or `stop()`. The answer
then made ends the listing (IsTruncated false); from then on the bucket holds the keys
listed so far: a later listing gives them again, and none past them.

The keys are the worst realistic mix for a scan that follows Spark logs, four kinds in turn:
single-file logs of a standalone master's applications (`app-<time>-<NNNN>`, with Spark's
codec and `.inprogress` suffixes) last modified in 2020, past any horizon; decoys beside
them that Spark never writes (`<appId>.x`, `<appId>.inprogress.bak`, a directory
`<appId>/`); and decoys whose keys are as long as S3 allows (1,024 bytes). A page's
application times follow its number, so the keys ascend across pages as S3 lists them.
With `rolling`, every name is instead a rolling log's directory (`eventlog_v2_<appId>/`, a
common prefix), as in a bucket of applications that all roll their logs; listed, or listed
without a delimiter, each holds its first events file and a complete appstatus file of 2020.

Also answered, as S3 does: HeadBucket and GetBucketLocation (any bucket exists), HeadObject
and GetObject (no object exists: 404 NoSuchKey). Anything else is 501 NotImplemented.
Requests are not authenticated: any `AWS_*` credentials do. `.served` counts the LIST pages
answered; `wait_served(n)` blocks until n were.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from typing import Final
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape

from tests.listserver import HEAD, NS, OBJECT, S3Handler, serving

PAGE: Final = 1000  # keys per page, S3's largest
MAX_KEY: Final = 1024  # bytes in an S3 key
EPOCH: Final = datetime(2020, 1, 1, tzinfo=UTC)  # applications of page n start n minutes later
CODECS: Final = ("", ".lz4", ".zstd", ".inprogress", ".snappy.inprogress")
ROLLING_PREFIX: Final = "eventlog_v2_"
_ROLLING: Final = re.compile(r"eventlog_v2_app-[0-9]{14}-[0-9]{4}")


def keys(prefix: str, page: int, *, rolling: bool = False) -> list[tuple[str, bool]]:
    """Page `page`'s names under `prefix`, ascending: (key, is a common prefix)."""
    stamp = (EPOCH + timedelta(minutes=page)).strftime("%Y%m%d%H%M%S")
    if rolling:
        return [(f"{prefix}{ROLLING_PREFIX}app-{stamp}-{n:04d}/", True) for n in range(PAGE)]
    found: list[tuple[str, bool]] = []
    for n in range(PAGE):
        app = f"{prefix}app-{stamp}-{n:04d}"
        kind = n % 4
        if kind < 2:  # a Spark log, past the horizon
            found.append((app + CODECS[n // 4 % len(CODECS)], False))
        elif kind == 2:  # a short decoy: a file or a directory no Spark writes
            found.append((app + (".x", ".inprogress.bak", "/")[n // 4 % 3], n // 4 % 3 == 2))
        else:  # a decoy as long as a key can be
            found.append((app + "-" + "k" * (MAX_KEY - len(app) - 1), False))
    return found


class EndlessStore(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, pages: int | None = None, seconds: float | None = None, *, rolling: bool = False
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.limit_pages = pages
        self.limit_seconds = seconds
        self.rolling = rolling
        self.served = 0
        self.directories_listed = 0
        self.listed_before_the_end: int | None = None  # directories listed by the last page
        self.requests: list[str] = []  # method and path of each request other than a LIST
        self._first: float | None = None
        self._end: tuple[int, int] | None = None  # the position past the last key, once stopped
        self._stopping = False  # `stop()` was called: the next page is the last
        self._changed = threading.Condition()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        """End the listing at the next page asked for."""
        with self._changed:
            self._stopping = True

    @property
    def stopped(self) -> bool:
        """The listing has ended: its final page was made."""
        return self._end is not None

    def wait_served(self, pages: int, timeout: float) -> None:
        """Until `pages` LIST pages were answered; TimeoutError after `timeout` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.served >= pages, timeout):
                raise TimeoutError(f"{self.served} of {pages} LIST pages asked for in {timeout} s")

    def page(self, bucket: str, query: dict[str, str]) -> bytes:
        """The ListObjectsV2 answer to `query`, counted (in `.served` when it is a page of
        the endless listing, in `.directories_listed` when it lists a rolling directory)."""
        prefix = query.get("prefix", "")
        if self.rolling and _ROLLING.fullmatch(prefix.rstrip("/").rpartition("/")[2]):
            self.directories_listed += 1
            return _list_result(bucket, query, _rolling_files(prefix), "")
        size = max(1, min(int(query.get("max-keys", PAGE)), PAGE))
        token = query.get("continuation-token", "")
        # A continuation token says where to go on; without one, StartAfter does.
        after = "" if token else query.get("start-after", "")
        group = _position(token) if token else (_page_of(prefix, after), 0)
        names = keys(prefix, group[0], rolling=self.rolling)
        offset = bisect.bisect_right([key for key, _ in names], after) if after else group[1]
        position = (group[0], offset)
        with self._changed:
            now = time.monotonic()
            self._first = now if self._first is None else self._first
            full = self.limit_pages is not None and self.served + 1 >= self.limit_pages
            late = self.limit_seconds is not None and now - self._first >= self.limit_seconds
            if self._end is None and (full or late or self._stopping):
                self._end = _next(position, len(names), size)  # this answer is the last
                self.listed_before_the_end = self.directories_listed
            end = self._end
        stop = len(names) if end is None or end[0] > position[0] else end[1]
        found = (
            [] if end is not None and position >= end else names[offset : min(stop, offset + size)]
        )
        after_this = _next(position, len(names), len(found) or size)
        more = "" if end is not None and after_this >= end else f"{after_this[0]}:{after_this[1]}"
        body = _list_result(bucket, query, found, more)
        with self._changed:
            self.served += 1
            self._changed.notify_all()
        return body


def _position(token: str) -> tuple[int, int]:
    """Where a continuation token goes on: (page number, index of its next key)."""
    number, _, offset = token.partition(":")
    return int(number), int(offset)


def _next(position: tuple[int, int], names: int, taken: int) -> tuple[int, int]:
    """The position after `taken` names from `position` in a page of `names`."""
    number, offset = position
    return (number, offset + taken) if offset + taken < names else (number + 1, 0)


def _page_of(prefix: str, after: str) -> int:
    """The number of the page that holds the key `after` (0 for any key before them all)."""
    name = after.removeprefix(prefix).removeprefix(ROLLING_PREFIX).removeprefix("app-")
    try:
        stamp = datetime.strptime(name[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return 0
    return max(0, int((stamp.replace(tzinfo=UTC) - EPOCH).total_seconds() // 60))


def _rolling_files(directory: str) -> list[tuple[str, bool]]:
    """What a rolling directory of 2020 holds: its one events file and a complete status."""
    name = directory.rstrip("/").rpartition("/")[2].removeprefix(ROLLING_PREFIX)
    return [(f"{directory}appstatus_{name}", False), (f"{directory}events_1_{name}", False)]


def _list_result(
    bucket: str, query: dict[str, str], found: list[tuple[str, bool]], token: str
) -> bytes:
    """The ListBucketResult document: objects, common prefixes (a directory's key when the
    request has the delimiter `/`, else an object in it), keys URL-encoded if asked."""
    delimiter = query.get("delimiter", "")
    encoded = query.get("encoding-type") == "url"

    def text(key: str) -> str:
        return escape(quote(key, safe="/") if encoded else key)

    listed = delimiter == "/"
    objects = [key for key, folder in found if not folder]
    if not listed:  # a directory's objects in its place (two count as one key of a page)
        objects = [
            inner
            for key, folder in found
            for inner in (
                [k for k, _ in _rolling_files(key)]
                if folder and _ROLLING.fullmatch(key.rstrip("/").rpartition("/")[2])
                else [f"{key}events" if folder else key]
            )
        ]
    contents = "".join(OBJECT.format(key=text(key), size=512 + len(key)) for key in objects)
    common = "".join(
        f"<CommonPrefixes><Prefix>{text(key)}</Prefix></CommonPrefixes>"
        for key, folder in found
        if folder and listed
    )
    fields = [
        f"<Name>{escape(bucket)}</Name><Prefix>{text(query.get('prefix', ''))}</Prefix>",
        f"<KeyCount>{len(found)}</KeyCount><MaxKeys>{query.get('max-keys', PAGE)}</MaxKeys>",
        f"<Delimiter>{text(delimiter)}</Delimiter>" if delimiter else "",
        "<EncodingType>url</EncodingType>" if encoded else "",
        f"<IsTruncated>{'true' if token else 'false'}</IsTruncated>",
        contents,
        common,
        f"<NextContinuationToken>{token}</NextContinuationToken>" if token else "",
    ]
    return f'{HEAD}<ListBucketResult xmlns="{NS}">{"".join(fields)}</ListBucketResult>'.encode()


class _Handler(S3Handler):
    server: EndlessStore

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
        if query.get("list-type") == "2" and not key:
            self.send_xml(200, self.server.page(bucket, query))
            return
        self.server.requests.append(f"GET {self.path}")
        if "location" in query and not key:
            self.send_xml(200, f'{HEAD}<LocationConstraint xmlns="{NS}"/>'.encode())
        elif key:
            self._error(404, "NoSuchKey", "The specified key does not exist.")
        else:
            self._error(501, "NotImplemented", "Only ListObjectsV2 lists this bucket.")

    def do_HEAD(self) -> None:
        self.server.requests.append(f"HEAD {self.path}")
        key = unquote(urlsplit(self.path).path).lstrip("/").partition("/")[2]
        self.send_response(404 if key else 200)
        self.send_header("x-amz-bucket-region", "us-east-1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self) -> None:
        self.server.requests.append(f"PUT {self.path}")
        self._error(501, "NotImplemented", "Nothing is stored here.")

    do_POST = do_DELETE = do_PUT

    def _error(self, status: int, code: str, message: str) -> None:
        body = f"{HEAD}<Error><Code>{code}</Code><Message>{message}</Message></Error>"
        self.send_xml(status, body.encode())


@contextmanager
def running_endless(
    pages: int | None = None, seconds: float | None = None, *, rolling: bool = False
) -> Iterator[EndlessStore]:
    """The endpoint on a free loopback port in a thread, stopped on the way out."""
    with serving(EndlessStore(pages, seconds, rolling=rolling)) as server:
        yield server
