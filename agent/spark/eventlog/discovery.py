"""Find the Spark applications in an event-log directory, in both of Spark's layouts
(`layout`): on a local file system, one `os.scandir` of the directory, one stat per
single-file log, one scandir plus stats per rolling directory. One application that cannot be
read becomes a LogRef whose `error` says why; it never stops the scan of the others.
Only an unreadable top directory raises (OSError), since then nothing can be scanned.

A directory given as a URL (s3a://, gs://, abfss://, hdfs://) is read through `stores` with
the same rules: one listing of the directory, one more per rolling directory, except for
those `skip` names (applications already finished: a store's listing costs requests).
Objects have no device or inode: `dev` is 0 and `ino` is `stores.identity` of the URL.

Only the names Spark writes count (`names`): any other file or directory, at the top or
inside a rolling directory, and a Spark-named entry that is a symlink loop, is left out and
named in `Listing.ignored` (the first MAX_LEFT_OUT of them: a directory may hold any number,
and so may each rolling directory), so a decoy (`<appId>.x`, `<appId>.inprogress.bak`, a directory
`<appId>/`) changes no application's state. Each scan derives every application again from
its files as they are.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from collections.abc import Container, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from itertools import islice
from typing import Final

from agent.fsutil import file_kind
from agent.spark.eventlog import names, stores
from agent.spark.eventlog.layout import (
    IN_PROGRESS,
    EventFile,
    LogRef,
    failed,
    ignored,
    parse_single_name,
    pick,
    rolling_ref,
    single_ref,
    special,
)

STORE_LISTINGS: Final = 8  # rolling directories on a store listed at once
MAX_LEFT_OUT: Final = 1000  # paths of entries left out that one listing reports, at most
HOLLOW: Final = "nothing Spark wrote"  # a rolling directory with decoys only: no application


@dataclass(frozen=True, slots=True)
class Listing:
    """What one scan of a directory found: the applications, and the paths of the entries
    whose names Spark does not write (left out)."""

    refs: list[LogRef]
    ignored: tuple[str, ...] = ()
    # Where resumable: the last name of the listing's longest decided prefix (`_scan_store`).
    settled: str = ""


def scan(directory: str | os.PathLike[str], skip: Container[str] = frozenset()) -> list[LogRef]:
    """Every application logged in `directory`, sorted by key (`listing` without what was
    left out)."""
    return listing(directory, skip).refs


def listing(
    directory: str | os.PathLike[str],
    skip: Container[str] = frozenset(),
    since_ns: int = 0,
    start_after: str = "",
) -> Listing:
    """Every application logged in `directory`, sorted by key, and the entries left out:
    one `os.scandir` of the directory, one stat per single-file log, one scandir plus stats
    per rolling directory. On a store, rolling directories whose key is in `skip` are not
    listed (nor returned), nor are single-file logs last written before `since_ns`; where
    the store can (`stores.resumable`), the listing starts after the name `start_after`."""
    if stores.is_url(str(directory)):
        return _scan_store(str(directory), skip, since_ns, start_after)
    found: dict[str, LogRef] = {}
    left_out: list[str] = []
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if ignored(entry.name):
                continue
            ref = _from_entry(entry)
            if ref is None:
                continue
            if isinstance(ref, str):
                _leave_out(left_out, (ref,))
                continue
            _leave_out(left_out, ref.ignored)
            if ref.error != HOLLOW:
                found[ref.key] = pick(found[ref.key], ref) if ref.key in found else ref
    return Listing([found[key] for key in sorted(found)], tuple(left_out))


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


def _from_entry(entry: os.DirEntry[str]) -> LogRef | str | None:
    """The application of a listed entry; its path when Spark does not name entries so (or
    it is a symlink loop); None when it vanished meanwhile."""
    try:
        if entry.is_dir():
            key = names.rolling(entry.name)
            return entry.path if key is None else _rolling(entry.path, key)
        name = names.single(entry.name)
        if name is None:
            return entry.path
        return _single(entry.path, entry.stat())
    except FileNotFoundError:
        return None  # removed while scanning, or a dangling link
    except OSError as error:
        if error.errno == errno.ELOOP:
            return entry.path  # Spark writes no symlinks, let alone loops
        single = names.single(entry.name)
        key = single.key if single is not None else entry.name
        return failed(key, "single", entry.path, f"cannot stat: {error.strerror}")


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
    left_out: list[str] = []
    mtime_ns = 0
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if ignored(name):
                    continue
                status = names.appstatus(name, key)
                events = names.events(name, key) if status is None else None
                if status is None and events is None:
                    _leave_out(left_out, (entry.path,))
                    continue
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue  # the appstatus rename, seen half-way
                except OSError as error:
                    if error.errno == errno.ELOOP:
                        _leave_out(left_out, (entry.path,))
                        continue
                    raise
                mtime_ns = max(mtime_ns, stat.st_mtime_ns)
                if events is None:
                    statuses.append(bool(status))
                    continue
                if not stat_module.S_ISREG(stat.st_mode):
                    kind = file_kind(stat.st_mode)
                    return special(key, "rolling", path, f"{name}: not a regular file ({kind})")
                codecs.add(events.codec)
                files.append(
                    EventFile(
                        entry.path,
                        events.index,
                        stat.st_size,
                        stat.st_mtime_ns,
                        stat.st_dev,
                        stat.st_ino,
                        events.compacted,
                    )
                )
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as error:
        return failed(key, "rolling", path, f"cannot list directory: {error.strerror}")
    if not statuses and not files:
        return _hollow(path, key, left_out)
    return rolling_ref(path, key, statuses, files, codecs, mtime_ns, left_out)


# -- logs on a store ---------------------------------------------------------------------------


def _scan_store(directory: str, skip: Container[str], since_ns: int, start_after: str) -> Listing:
    """The listing of a directory on a store, taken page by page as each arrives: what it
    keeps is the applications it returns, never the whole listing (a bucket may hold
    millions of objects), nor more than MAX_LEFT_OUT names of entries it left out.

    Where the store is resumable it also finds `Listing.settled`, the last name of the longest
    prefix of the listing (in the store's order, `stores.order`) whose every entry is
    decided: an application already finished (in `skip`), a single-file log past the
    horizon, or a name Spark does not write. Only a prefix is safe: names are in lexical
    order, not time order. Application ids sort by time within one cluster and one scheme
    only (`application_<clusterStart>_` of two YARN clusters, `app-` beside `local-`, random
    Kubernetes `spark-` ids, a YARN sequence past 9999), so a live or undecided application
    may sort before a finished one; stopping at the first undecided entry never passes over
    one that is there now."""
    found: dict[str, LogRef] = {}
    refs: list[LogRef] = []
    left_out: list[str] = []
    resumable = stores.resumable(directory)
    order = partial(stores.order, directory)
    start_after = start_after if resumable else ""
    settled, open_prefix = start_after, resumable
    # A LIST per rolling directory, a few at once (their cost is the store's latency), as
    # each page arrives: what waits to be listed is one page's directories, never the
    # listing's (a bucket whose applications all roll holds millions of them).
    with ThreadPoolExecutor(STORE_LISTINGS, thread_name_prefix="eventlog-list") as pool:
        for page in stores.pages(directory, start_after):
            rolling: list[tuple[str, str]] = []  # (url, key) of the page's directories to list
            # A page is a range of names; S3 and GCS give its directories (common prefixes)
            # apart.
            page.sort(key=order)
            for entry in page:
                decided = True
                if ignored(entry.name):
                    pass
                elif (key := names.rolling(entry.name) if entry.is_dir else None) is not None:
                    decided = key in skip
                    if not decided:
                        rolling.append((entry.url, key))
                elif entry.is_dir or (single := names.single(entry.name)) is None:
                    _leave_out(left_out, (entry.url,))
                elif entry.mtime_ns >= since_ns:  # older: past the horizon, passed over
                    decided = single.key in skip
                    refs.append(_single_store(entry))
                open_prefix = open_prefix and decided
                if open_prefix:
                    settled = order(entry)
                elif not decided and order(entry) <= settled:
                    # Listed out of order (an emulator may give a page prefixes from later
                    # on): the point goes back to where this listing started.
                    settled = start_after
            page = []  # one page held at a time
            listed = pool.map(lambda item: _rolling_store(*item), rolling)
            refs.extend(ref for ref in listed if ref is not None)
    for ref in refs:
        _leave_out(left_out, ref.ignored)
        if ref.error != HOLLOW:
            found[ref.key] = pick(found[ref.key], ref) if ref.key in found else ref
    return Listing([found[key] for key in sorted(found)], tuple(left_out), settled)


def _single_store(entry: stores.Entry) -> LogRef:
    key, codec, in_progress, compacted = parse_single_name(entry.name)
    identity = (entry.size, entry.mtime_ns, 0, stores.identity(entry.url))
    return single_ref(key, entry.url, codec, in_progress, compacted, identity)


def _rolling_store(url: str, key: str) -> LogRef | None:
    """One eventlog_v2_ directory on a store (one listing, taken a page at a time); None
    when it no longer exists."""
    statuses: list[bool] = []
    files: list[EventFile] = []
    codecs: set[str] = set()
    left_out: list[str] = []
    mtime_ns = 0
    try:
        for page in stores.pages(url):
            for entry in page:
                name = entry.name
                if ignored(name):
                    continue
                status = None if entry.is_dir else names.appstatus(name, key)
                events = None if entry.is_dir or status is not None else names.events(name, key)
                if status is None and events is None:
                    _leave_out(left_out, (entry.url,))
                    continue
                mtime_ns = max(mtime_ns, entry.mtime_ns)
                if events is None:
                    statuses.append(bool(status))
                    continue
                codecs.add(events.codec)
                ino = stores.identity(entry.url)
                files.append(
                    EventFile(
                        entry.url,
                        events.index,
                        entry.size,
                        entry.mtime_ns,
                        0,
                        ino,
                        events.compacted,
                    )
                )
    except FileNotFoundError:
        return None
    if not statuses and not files:
        return _hollow(url, key, left_out)
    return rolling_ref(url, key, statuses, files, codecs, mtime_ns, left_out)


def _leave_out(left_out: list[str], paths: Iterable[str]) -> None:
    """`paths` added to the entries `left_out`, which hold MAX_LEFT_OUT at most."""
    left_out.extend(islice(paths, max(0, MAX_LEFT_OUT - len(left_out))))


def _hollow(path: str, key: str, left_out: list[str]) -> LogRef | None:
    """A rolling directory holding nothing Spark wrote (Spark writes its appstatus file
    right after the directory): no application yet. Its decoys are still reported."""
    if not left_out:
        return None
    return replace(failed(key, "rolling", path, HOLLOW), ignored=tuple(left_out))
