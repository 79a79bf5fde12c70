"""Find the Spark applications in an event-log directory, in both of Spark's layouts
(`layout`): on a local file system, one `os.scandir` of the directory, one stat per
single-file log, one scandir plus stats per rolling directory. One application that cannot be
read becomes a LogRef whose `error` says why; it never stops the scan of the others.
Only an unreadable top directory raises (OSError), since then nothing can be scanned.

A directory given as a URL (s3a://, gs://, abfss://, hdfs://) is read through `stores` with
the same rules: one listing of the directory, one more per rolling directory, except for
those `skip` names (applications already finished: a store's listing costs requests).
Objects have no device or inode: `dev` is 0 and `ino` is `stores.identity` of the URL.
"""

from __future__ import annotations

import os
import stat as stat_module
from collections.abc import Container
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from agent.fsutil import file_kind
from agent.spark.eventlog import stores
from agent.spark.eventlog.layout import (
    APPSTATUS_PREFIX,
    EVENTS_PREFIX,
    IN_PROGRESS,
    ROLLING_PREFIX,
    EventFile,
    LogRef,
    failed,
    ignored,
    parse_events_name,
    parse_single_name,
    pick,
    rolling_ref,
    single_ref,
    special,
)

STORE_LISTINGS: Final = 8  # rolling directories on a store listed at once


def scan(directory: str | os.PathLike[str], skip: Container[str] = frozenset()) -> list[LogRef]:
    """Every application logged in `directory`, sorted by key: one `os.scandir` of the
    directory, one stat per single-file log, one scandir plus stats per rolling directory.
    On a store, rolling directories whose key is in `skip` are not listed (nor returned)."""
    if stores.is_url(str(directory)):
        return _scan_store(str(directory), skip)
    found: dict[str, LogRef] = {}
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if ignored(entry.name):
                continue
            ref = _from_entry(entry)
            if ref is not None:
                found[ref.key] = pick(found[ref.key], ref) if ref.key in found else ref
    return [found[key] for key in sorted(found)]


def restat(ref: LogRef) -> LogRef | None:
    """The same application's log as it is now, or None when it no longer exists.

    A single in-progress file that was renamed at completion is found under its final name.
    """
    remote = stores.is_url(ref.path)
    if ref.layout == "rolling":
        return _rolling_store(ref.path, ref.key) if remote else _rolling(ref.path, ref.key)
    for path in (ref.path, ref.path.removesuffix(IN_PROGRESS)):
        if remote:
            entry = stores.stat(path)
            if entry is not None:
                return _single_store(entry)
            continue
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        return _single(path, stat)
    return None


def _from_entry(entry: os.DirEntry[str]) -> LogRef | None:
    try:
        if entry.is_dir():
            if entry.name.startswith(ROLLING_PREFIX):
                return _rolling(entry.path, entry.name.removeprefix(ROLLING_PREFIX))
            return failed(
                entry.name,
                "rolling",
                entry.path,
                f"not an event log directory (expected a name starting with {ROLLING_PREFIX!r})",
            )
        return _single(entry.path, entry.stat())
    except FileNotFoundError:
        return None  # removed while scanning, or a dangling link
    except OSError as error:
        return failed(entry.name, "single", entry.path, f"cannot stat: {error.strerror}")


def _single(path: str, stat: os.stat_result) -> LogRef:
    key, codec, in_progress, compacted = parse_single_name(os.path.basename(path))
    if not stat_module.S_ISREG(stat.st_mode):
        return special(key, "single", path, f"not a regular file ({file_kind(stat.st_mode)})")
    identity = (stat.st_size, stat.st_mtime_ns, stat.st_dev, stat.st_ino)
    return single_ref(key, path, codec, in_progress, compacted, identity)


def _rolling(path: str, key: str) -> LogRef | None:
    """Read one eventlog_v2_ directory; None when it no longer exists."""
    statuses: list[bool] = []  # complete? per appstatus file seen
    files: list[EventFile] = []
    codecs: set[str] = set()
    mtime_ns = 0
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if ignored(name) or not (
                    name.startswith(APPSTATUS_PREFIX) or name.startswith(EVENTS_PREFIX)
                ):
                    continue
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue  # the appstatus rename, seen half-way
                mtime_ns = max(mtime_ns, stat.st_mtime_ns)
                if name.startswith(APPSTATUS_PREFIX):
                    statuses.append(not name.endswith(IN_PROGRESS))
                    continue
                if not stat_module.S_ISREG(stat.st_mode):
                    kind = file_kind(stat.st_mode)
                    return special(key, "rolling", path, f"{name}: not a regular file ({kind})")
                index, codec, compacted = parse_events_name(name)
                if index is None:
                    return failed(key, "rolling", path, f"bad event file name {name!r}")
                codecs.add(codec)
                files.append(
                    EventFile(
                        entry.path,
                        index,
                        stat.st_size,
                        stat.st_mtime_ns,
                        stat.st_dev,
                        stat.st_ino,
                        compacted,
                    )
                )
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as error:
        return failed(key, "rolling", path, f"cannot list directory: {error.strerror}")

    return rolling_ref(path, key, statuses, files, codecs, mtime_ns)


# -- logs on a store ---------------------------------------------------------------------------


def _scan_store(directory: str, skip: Container[str]) -> list[LogRef]:
    found: dict[str, LogRef] = {}
    refs: list[LogRef | None] = []
    rolling: list[tuple[str, str]] = []  # (url, key) of the directories to list
    for entry in sorted(stores.listdir(directory), key=lambda e: e.name):
        if ignored(entry.name):
            continue
        if not entry.is_dir:
            refs.append(_single_store(entry))
        elif not entry.name.startswith(ROLLING_PREFIX):
            refs.append(
                failed(
                    entry.name,
                    "rolling",
                    entry.url,
                    "not an event log directory "
                    f"(expected a name starting with {ROLLING_PREFIX!r})",
                )
            )
        elif (key := entry.name.removeprefix(ROLLING_PREFIX)) not in skip:
            rolling.append((entry.url, key))
    # A LIST per rolling directory: a few at once, as their cost is the store's latency.
    with ThreadPoolExecutor(STORE_LISTINGS, thread_name_prefix="eventlog-list") as pool:
        refs.extend(pool.map(lambda item: _rolling_store(*item), rolling))
    for ref in refs:
        if ref is not None:
            found[ref.key] = pick(found[ref.key], ref) if ref.key in found else ref
    return [found[key] for key in sorted(found)]


def _single_store(entry: stores.Entry) -> LogRef:
    key, codec, in_progress, compacted = parse_single_name(entry.name)
    identity = (entry.size, entry.mtime_ns, 0, stores.identity(entry.url))
    return single_ref(key, entry.url, codec, in_progress, compacted, identity)


def _rolling_store(url: str, key: str) -> LogRef | None:
    """One eventlog_v2_ directory on a store (one listing); None when it no longer exists."""
    try:
        entries = stores.listdir(url)
    except FileNotFoundError:
        return None
    statuses: list[bool] = []
    files: list[EventFile] = []
    codecs: set[str] = set()
    mtime_ns = 0
    for entry in entries:
        name = entry.name
        if entry.is_dir or ignored(name):
            continue
        if name.startswith(APPSTATUS_PREFIX):
            statuses.append(not name.endswith(IN_PROGRESS))
            mtime_ns = max(mtime_ns, entry.mtime_ns)
            continue
        if not name.startswith(EVENTS_PREFIX):
            continue
        index, codec, compacted = parse_events_name(name)
        if index is None:
            return failed(key, "rolling", url, f"bad event file name {name!r}")
        codecs.add(codec)
        mtime_ns = max(mtime_ns, entry.mtime_ns)
        ino = stores.identity(entry.url)
        files.append(EventFile(entry.url, index, entry.size, entry.mtime_ns, 0, ino, compacted))
    return rolling_ref(url, key, statuses, files, codecs, mtime_ns)
