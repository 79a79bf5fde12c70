"""Event logs on a shared store (S3, GCS, Azure, HDFS) through fsspec, as blocking calls.

Every function here blocks on the network and is called from a worker thread (discovery and
reading already run there), never from the event loop. Each request is bounded as a whole,
not per read: its connection, its retry, its first byte and its whole body must come within
`deadline()` seconds (`configure`), or the request is cancelled and fails as a StoreError,
so a store that drips its answer a byte at a time holds one listing for that long and no
longer. S3, GCS and Azure (asynchronous libraries) are cancelled on fsspec's loop; WebHDFS'
blocking session has its socket shut at the deadline (`storage.bounded`).

A listing is paged by the agent itself on every store (`pages`, `storage.listings`): each
page is one request with its own deadline, processed before the next is asked for, so what
a listing holds is one page, never the prefix, and a large prefix is never cut short by the
deadline of the whole. On S3, GCS and HDFS it can start after a name (`resumable`), which
the resume point of a directory uses; Azure has no such start (its continuation marker is
opaque), so there a listing always starts from the beginning.

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

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent.spark.eventlog.storage import filesystems, listings
from agent.spark.eventlog.storage.calls import (
    StoreError as StoreError,
)
from agent.spark.eventlog.storage.calls import (
    call,
    count,
    unavailable,
)
from agent.spark.eventlog.storage.calls import configure as configure
from agent.spark.eventlog.storage.calls import deadline as deadline
from agent.spark.eventlog.storage.calls import (
    redact as redact,
)
from agent.spark.eventlog.storage.calls import requests as requests


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


def identity(url: str) -> int:
    """A stable stand-in for an inode: the same for a file and its `.inprogress` name."""
    digest = hashlib.blake2b(url.removesuffix(".inprogress").encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2  # fits SQLite's signed 64-bit INTEGER


def resumable(url: str) -> bool:
    """A listing of `url` can start after a name (`pages`' start_after): S3, GCS and HDFS,
    not Azure (`listings`)."""
    return filesystems.protocol(url) in listings.RESUMABLE


def lists_deep(url: str) -> bool:
    """`url` can be listed at every depth in one key-ordered listing (`pages`' deep): S3."""
    return filesystems.protocol(url) in listings.DEEP


def order(url: str, entry: Entry) -> str:
    """The entry's place in the listing order of its store (where `pages` resumes): on an
    object store a directory is its keys' prefix, `name/`; on HDFS its bare name."""
    slash = entry.is_dir and listings.directory_order(filesystems.protocol(url))
    return f"{entry.name}/" if slash else entry.name


def child(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def listdir(url: str) -> list[Entry]:
    """The entries directly under the directory `url` (all its `pages`)."""
    return [entry for page in pages(url) for entry in page]


def pages(url: str, start_after: str = "", *, deep: bool = False) -> Iterator[list[Entry]]:
    """The entries directly under the directory `url`, a page at a time as each arrives
    (names after `start_after` only, where the store can skip: `resumable`);
    FileNotFoundError when it does not exist (an empty prefix on object stores), StoreError
    when the store cannot answer, or not within the deadline. `deep` (where `lists_deep`):
    every object at any depth, in key order, each named by its path under `url`
    (`eventlog_v2_x/events_1_x`), and no directories."""
    fs, path = filesystems.resolve(url)
    protocol = filesystems.protocol(url)
    base = path.rstrip("/")
    seen = False
    after = start_after if protocol in listings.RESUMABLE else ""
    for found in listings.pages(fs, protocol, path, after, deep=deep):
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
    if not seen and not after and not _exists_dir(fs, path):
        raise FileNotFoundError(2, "no such directory", redact(url))


def stat(url: str) -> Entry | None:
    """The file `url` as it is now; None when it does not exist."""
    fs, path = filesystems.resolve(url)
    count("head")
    try:
        item = call(fs, "info", path)
    except FileNotFoundError:
        return None
    except Exception as error:
        raise unavailable(error) from None
    name = url.rstrip("/").rpartition("/")[2]
    is_dir = item.get("type") == "directory"
    return Entry(name, url, is_dir, int(item.get("size") or 0), _mtime_ns(item))


def read_range(url: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of the file `url` (fewer at its end); FileNotFoundError when gone."""
    fs, path = filesystems.resolve(url)
    count("get")
    try:
        if filesystems.protocol(url) == "webhdfs":
            # WebHDFS' OPEN itself: fsspec's file object stops at the NameNode's length,
            # which leaves out what Spark flushed into a block still being written.
            return bytes(fs._call("OPEN", path=path, offset=start, length=end - start).content)
        return bytes(call(fs, "cat_file", path, start=start, end=end))
    except FileNotFoundError:
        raise
    except RuntimeError as error:
        if "out of the range" in str(error):  # WebHDFS' answer to an offset at the end
            return b""
        raise unavailable(error) from None
    except Exception as error:
        raise unavailable(error) from None


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


def _exists_dir(fs: Any, path: str) -> bool:
    count("head")
    try:
        return bool(call(fs, "isdir", path))
    except Exception as error:
        raise unavailable(error) from None


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
