"""Event logs on a shared store (S3, GCS, Azure, HDFS) through fsspec, as blocking calls.

Every function here blocks on the network and is called from a worker thread (discovery and
reading already run there), never from the event loop. Each request is bounded as a whole,
not per read: on S3, GCS and Azure (asynchronous libraries) the request, its retry, its first
byte and its whole body must come within `deadline()` seconds (`configure`), or the request
is cancelled and fails as a StoreError, so a store that drips its answer a byte at a time
holds one listing for that long and no longer. A listing on S3 is paged by the agent itself
(`pages`): each LIST page is one request with its own deadline, so a large prefix is never
cut short by the deadline of the whole. WebHDFS (blocking `requests`) has the connect and
read timeouts below, per read.

Credentials come from each library's standard chain (for S3: the `AWS_*` variables,
`AWS_PROFILE`, instance roles, `AWS_ENDPOINT_URL` for S3-compatible stores); the agent never
reads, logs or passes them, and `redact` takes the password out of a URL before
it reaches a log line.

Objects have no inode: a file's identity (the `ino` of a position) is a hash of its URL
without `.inprogress`, so the rename Spark does at completion (a copy on object stores, a
real rename on HDFS) keeps the reading position, as the same inode does on a local disk.
Listings are never cached (fsspec's directory cache would hide new parts).

`requests()` counts the requests made per kind (list pages, head, get) for the
`lineage_eventlog_store_requests_total` metric.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import fsspec
import fsspec.asyn

from agent.spark.eventlog import filesystems
from agent.spark.eventlog.filesystems import StoreError as StoreError

REQUEST_DEADLINE: Final = 30.0  # seconds for a whole request (spark.store_request_timeout)
LIST_PAGE: Final = 1000  # names per LIST request (S3's, GCS's and WebHDFS' page)

Request = Literal["list", "head", "get"]
_counts: Counter[str] = Counter()
_counts_lock = threading.Lock()
_deadline = REQUEST_DEADLINE


def configure(request_timeout: float) -> None:
    """The deadline of each whole request from now on (`spark.store_request_timeout`)."""
    global _deadline
    _deadline = request_timeout


def deadline() -> float:
    return _deadline


@dataclass(frozen=True, slots=True)
class Entry:
    """One listed object or directory (a common prefix on object stores)."""

    name: str  # the last part of the URL
    url: str
    is_dir: bool
    size: int
    mtime_ns: int  # 0 for directories of object stores, which have no time


def is_url(path: str) -> bool:
    """`path` names a directory or file on a shared store (a URL Spark writes logs to)."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.lower() in filesystems.SCHEMES


def redact(url: str) -> str:
    """The URL without a password in its userinfo (abfss' `container@account` stays)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def identity(url: str) -> int:
    """A stable stand-in for an inode: the same for a file and its `.inprogress` name."""
    digest = hashlib.blake2b(url.removesuffix(".inprogress").encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2  # fits SQLite's signed 64-bit INTEGER


def requests() -> dict[str, int]:
    """Calls made to stores since the start, per kind."""
    with _counts_lock:
        return {kind: _counts[kind] for kind in ("list", "head", "get")}


def _count(kind: Request, requests: int = 1) -> None:
    with _counts_lock:
        _counts[kind] += requests


def resumable(url: str) -> bool:
    """A listing of `url` can start after a name (`pages`' start_after): S3 only."""
    return filesystems.protocol(url) == "s3"


def lists_deep(url: str) -> bool:
    """`url` can be listed whole, every object under it at any depth in one key-ordered
    listing (`pages`' deep): S3 only."""
    return filesystems.protocol(url) == "s3"


def child(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def listdir(url: str) -> list[Entry]:
    """The entries directly under the directory `url` (all its `pages`)."""
    return [entry for page in pages(url) for entry in page]


def pages(url: str, start_after: str = "", *, deep: bool = False) -> Iterator[list[Entry]]:
    """The entries directly under the directory `url`, a page at a time as each arrives
    (names after `start_after` only, where the store can skip: S3); FileNotFoundError when it
    does not exist (an empty prefix on object stores), StoreError when the store cannot
    answer, or not within the deadline. `deep` (where `lists_deep`): every object at any depth,
    in key order, each named by its path under `url` (`eventlog_v2_x/events_1_x`), and no
    directories."""
    fs, path = filesystems.resolve(url)
    base = path.rstrip("/")
    seen = False
    if deep and not lists_deep(url):
        raise ValueError(f"{redact(url)} cannot be listed at every depth")
    listed = _s3_pages(fs, base, start_after, not deep) if resumable(url) else _whole(fs, path)
    for found in listed:
        entries = []
        for item in found:
            full = str(item["name"])
            name = full[len(base) + 1 :] if deep else full.rstrip("/").rpartition("/")[2]
            if full.rstrip("/") == base or not name or name.endswith("/"):
                continue  # the directory itself, or a directory marker (an empty `dir/`)
            is_dir = item.get("type") == "directory"
            size = int(item.get("size") or 0)
            entries.append(Entry(name, child(url, name), is_dir, size, _mtime_ns(item)))
        found = []  # one page held at a time: let this one go before the next request
        seen = seen or bool(entries)
        yield entries
        entries = []
    if not seen and not start_after and not _exists_dir(fs, path):
        raise FileNotFoundError(2, "no such directory", redact(url))


def _whole(fs: Any, path: str) -> Iterator[list[dict[str, Any]]]:
    """The library's own listing (it pages through it: GCS, Azure, WebHDFS), as one page."""
    try:
        found = _call(fs, "ls", path, detail=True)
    except FileNotFoundError:
        _count("list")
        raise
    except Exception as error:
        _count("list")
        raise _unavailable(error) from None
    # S3, GCS and WebHDFS answer 1,000 names a page.
    _count("list", max(1, -(-len(found) // LIST_PAGE)))
    yield found


def _s3_pages(
    fs: Any, path: str, start_after: str, delimited: bool = True
) -> Iterator[list[dict[str, Any]]]:
    """LIST pages of `path/` on S3, one request (with its deadline) per page; `delimited`:
    the names directly under it, its subdirectories as common prefixes."""
    bucket, _, key = path.partition("/")
    prefix = f"{key}/" if key else ""
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if delimited:
        request["Delimiter"] = "/"
    request["MaxKeys"] = LIST_PAGE
    if start_after:
        request["StartAfter"] = prefix + start_after
    while True:
        _count("list")
        try:
            page = _call(fs, "call_s3", "list_objects_v2", **request)
        except FileNotFoundError:
            raise
        except Exception as error:
            raise _unavailable(error) from None
        found: list[dict[str, Any]] = [
            {"name": f"{bucket}/{p['Prefix']}", "type": "directory"}
            for p in page.get("CommonPrefixes", ())
        ]
        for item in page.get("Contents", ()):
            found.append(
                {
                    "name": f"{bucket}/{item['Key']}",
                    "type": "file",
                    "size": item.get("Size", 0),
                    "LastModified": item.get("LastModified"),
                }
            )
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        page = {}  # one page held at a time: let this one go before the next request
        yield found
        found = []
        if not token:
            return
        request.pop("StartAfter", None)
        request["ContinuationToken"] = token


def stat(url: str) -> Entry | None:
    """The file `url` as it is now; None when it does not exist."""
    fs, path = filesystems.resolve(url)
    _count("head")
    try:
        item = _call(fs, "info", path)
    except FileNotFoundError:
        return None
    except Exception as error:
        raise _unavailable(error) from None
    name = url.rstrip("/").rpartition("/")[2]
    is_dir = item.get("type") == "directory"
    return Entry(name, url, is_dir, int(item.get("size") or 0), _mtime_ns(item))


def read_range(url: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of the file `url` (fewer at its end); FileNotFoundError when gone."""
    fs, path = filesystems.resolve(url)
    _count("get")
    try:
        if filesystems.protocol(url) == "webhdfs":
            # WebHDFS' OPEN itself: fsspec's file object stops at the NameNode's length,
            # which leaves out what Spark flushed into a block still being written.
            return bytes(fs._call("OPEN", path=path, offset=start, length=end - start).content)
        return bytes(_call(fs, "cat_file", path, start=start, end=end))
    except FileNotFoundError:
        raise
    except RuntimeError as error:
        if "out of the range" in str(error):  # WebHDFS' answer to an offset at the end
            return b""
        raise _unavailable(error) from None
    except Exception as error:
        raise _unavailable(error) from None


class RemoteFile:
    """A file on a store read by ranged GETs from an offset. An object (S3, GCS, Azure) is
    visible only once written whole, so the size it was listed with is final and reading
    it costs its GETs alone. A file on HDFS grows while Spark writes it, and the length the
    NameNode reports lags what Spark flushed (the open block's bytes are only on the
    DataNodes), so there every read asks for the next bytes whatever the listed size: one
    GET per look at a file being written."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.offset = 0
        self.known_size = size
        self.growing = filesystems.protocol(url) == "webhdfs"

    def read(self, size: int) -> bytes:
        if self.offset >= self.known_size and not self.growing:
            return b""
        end = self.offset + size if self.growing else min(self.offset + size, self.known_size)
        try:
            data = read_range(self.url, self.offset, end)
        except FileNotFoundError:
            return b""  # renamed or removed: the reader looks at the log again
        self.offset += len(data)
        self.known_size = max(self.known_size, self.offset)
        return data

    def seek(self, offset: int) -> None:
        self.offset = offset

    def size(self) -> int:
        return self.known_size

    def follow(self, url: str) -> None:
        """The file now has this URL (its completion rename): read on from there."""
        self.url = url

    def close(self) -> None:
        """Nothing is held open between requests."""


# -- file systems ------------------------------------------------------------------------------


def _call(fs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """One call of the file system, bounded as a whole where the library is asynchronous:
    it runs on fsspec's own event loop and is cancelled at the deadline (FSTimeoutError)."""
    if getattr(fs, "async_impl", False):
        call = getattr(fs, f"_{method}")
        return fsspec.asyn.sync(fs.loop, call, *args, timeout=_deadline, **kwargs)
    return getattr(fs, method)(*args, **kwargs)


def _exists_dir(fs: Any, path: str) -> bool:
    _count("head")
    try:
        return bool(_call(fs, "isdir", path))
    except Exception as error:
        raise _unavailable(error) from None


def _mtime_ns(item: dict[str, Any]) -> int:
    for key in ("LastModified", "mtime", "updated", "last_modified", "modificationTime"):
        value = item.get(key)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1e9)
        if isinstance(value, int | float):  # WebHDFS: milliseconds
            return int(value * 1_000_000) if key == "modificationTime" else int(value * 1e9)
        if isinstance(value, str) and value:
            try:
                return int(datetime.fromisoformat(value).timestamp() * 1e9)
            except ValueError:
                continue
    return 0


def _unavailable(error: Exception) -> StoreError:
    """The store's error as a StoreError whose text names no credential."""
    if isinstance(error, StoreError):
        return error
    if isinstance(error, asyncio.TimeoutError):  # fsspec's FSTimeoutError is one
        return StoreError(
            f"no whole answer within {_deadline:g} s (spark.store_request_timeout): the "
            "request was cancelled"
        )
    return StoreError(f"{type(error).__name__}: {redact(str(error))}")
