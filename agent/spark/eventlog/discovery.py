"""Find the Spark applications in an event-log directory, in both of Spark's layouts
(`layout`): on a local file system, one `os.scandir` of the directory, one stat per
single-file log, one scandir plus stats per rolling directory. One application that cannot be
read becomes a LogRef whose `error` says why; it never stops the scan of the others.
Only an unreadable top directory raises (OSError), since then nothing can be scanned.

A directory given as a URL (s3a://, gs://, abfss://, hdfs://) is read by `storescan` with
the same rules.

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
from collections.abc import Container

from agent.fsutil import file_kind
from agent.spark.eventlog import names, stores, storescan
from agent.spark.eventlog.layout import (
    HOLLOW,
    IN_PROGRESS,
    EventFile,
    Listing,
    LogRef,
    decoys_only,
    failed,
    ignored,
    leave_out,
    parse_single_name,
    pick,
    rolling_ref,
    single_ref,
    special,
)

__all__ = ["Listing", "listing", "restat", "scan"]


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
        return storescan.scan_store(str(directory), skip, since_ns, start_after)
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
                leave_out(left_out, (ref,))
                continue
            leave_out(left_out, ref.ignored)
            if ref.error != HOLLOW:
                found[ref.key] = pick(found[ref.key], ref) if ref.key in found else ref
    return Listing([found[key] for key in sorted(found)], tuple(left_out))


def restat(ref: LogRef) -> LogRef | None:
    """The same application's log as it is now, or None when it no longer exists.

    A single in-progress file that was renamed at completion is found under its final name.
    """
    remote = stores.is_url(ref.path)
    if ref.layout == "rolling":
        return storescan.rolling_store(ref.path, ref.key) if remote else _rolling(ref.path, ref.key)
    for path in (ref.path, ref.path.removesuffix(IN_PROGRESS)):
        if remote:
            entry = stores.stat(path)
            if entry is not None:
                return storescan.single_store(entry)
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
                    leave_out(left_out, (entry.path,))
                    continue
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue  # the appstatus rename, seen half-way
                except OSError as error:
                    if error.errno == errno.ELOOP:
                        leave_out(left_out, (entry.path,))
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
        return decoys_only(path, key, left_out)
    return rolling_ref(path, key, statuses, files, codecs, mtime_ns, left_out)
