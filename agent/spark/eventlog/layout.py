"""Find the Spark applications in an event-log directory, in both of Spark's layouts.

Layouts (Spark sanitizes `<name>` = appId[_attemptId]: lower case, no dots, so the first dot
starts the extensions):
    single   <name>[.<codec>][.inprogress]; Spark renames it without `.inprogress` at stop,
             so the same inode carries on under the final name.
    rolling  eventlog_v2_<name>/ holding events_<N>_<name>[.<codec>][.compact] and an empty
             appstatus_<name>[.inprogress]; the application is complete once the appstatus
             file lost `.inprogress`. Each events_N file is its own compressed stream, and
             once events_N+1 exists events_N is final. The History Server may replace the
             oldest files by a lossy events_<N>_<name>[.<codec>].compact holding 1..N: reading
             starts at the last compact file, and indices from there on must be contiguous.

Dot-files (Hadoop's `.<file>.crc` checksums) and `*.crc` are ignored. One application that
cannot be read (unknown codec, missing appstatus, a gap in the indices, an unreadable
directory, an event file that is a FIFO, socket or device) becomes a LogRef whose `error` says
why (`special` for the kinds of file Spark never writes, which are never opened); it never
stops the scan of the others.
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
from dataclasses import dataclass, replace
from typing import Final, Literal

from agent.fsutil import file_kind
from agent.spark.eventlog import stores
from agent.spark.eventlog.codecs import CODECS

Layout = Literal["single", "rolling"]

ROLLING_PREFIX: Final = "eventlog_v2_"
EVENTS_PREFIX: Final = "events_"
APPSTATUS_PREFIX: Final = "appstatus_"
IN_PROGRESS: Final = ".inprogress"
COMPACT: Final = ".compact"

_COMPRESSED: Final = frozenset(CODECS) - {"none"}
STORE_LISTINGS: Final = 8  # rolling directories on a store listed at once


@dataclass(frozen=True, slots=True)
class EventFile:
    """One file of events, as it was when stat'ed."""

    path: str
    index: int  # N of events_N (rolling); 0 for a single-file log
    size: int
    mtime_ns: int
    dev: int
    ino: int
    compacted: bool = False


@dataclass(frozen=True, slots=True)
class LogRef:
    """One application's event log, as found by `scan` or `restat`.

    `key` is the sanitized `<name>` (appId[_attemptId] as Spark wrote it; the real ids are in
    ApplicationStart). `path` is the single file or the rolling directory. `files` are the
    event files to read, in order (empty when `error` is set). `size` sums their sizes and
    `mtime_ns` is the latest modification among them and the appstatus file.
    """

    key: str
    layout: Layout
    path: str
    codec: str
    files: tuple[EventFile, ...]
    complete: bool
    size: int
    mtime_ns: int
    compacted: bool = False
    error: str | None = None
    special: bool = False  # the error is an event file that is not a regular file

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


def scan(directory: str | os.PathLike[str], skip: Container[str] = frozenset()) -> list[LogRef]:
    """Every application logged in `directory`, sorted by key: one `os.scandir` of the
    directory, one stat per single-file log, one scandir plus stats per rolling directory.
    On a store, rolling directories whose key is in `skip` are not listed (nor returned)."""
    if stores.is_url(str(directory)):
        return _scan_store(str(directory), skip)
    found: dict[str, LogRef] = {}
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if _ignored(entry.name):
                continue
            ref = _from_entry(entry)
            if ref is not None:
                found[ref.key] = _pick(found[ref.key], ref) if ref.key in found else ref
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


def parse_single_name(name: str) -> tuple[str, str, bool, bool]:
    """(key, codec or the unknown extension, in progress, compacted) of a single-file name."""
    compacted = name.endswith(COMPACT)
    name = name.removesuffix(COMPACT)
    in_progress = name.endswith(IN_PROGRESS)
    name = name.removesuffix(IN_PROGRESS)
    key, _, extensions = name.partition(".")
    return key, extensions or "none", in_progress, compacted


def _ignored(name: str) -> bool:
    return name.startswith(".") or name.endswith(".crc")


def _from_entry(entry: os.DirEntry[str]) -> LogRef | None:
    try:
        if entry.is_dir():
            if entry.name.startswith(ROLLING_PREFIX):
                return _rolling(entry.path, entry.name.removeprefix(ROLLING_PREFIX))
            return _failed(
                entry.name,
                "rolling",
                entry.path,
                f"not an event log directory (expected a name starting with {ROLLING_PREFIX!r})",
            )
        return _single(entry.path, entry.stat())
    except FileNotFoundError:
        return None  # removed while scanning, or a dangling link
    except OSError as error:
        return _failed(entry.name, "single", entry.path, f"cannot stat: {error.strerror}")


def _single(path: str, stat: os.stat_result) -> LogRef:
    key, codec, in_progress, compacted = parse_single_name(os.path.basename(path))
    if not stat_module.S_ISREG(stat.st_mode):
        return _special(key, "single", path, f"not a regular file ({file_kind(stat.st_mode)})")
    error = _codec_error(codec)
    if error:
        return _failed(key, "single", path, error, codec=codec)
    file = EventFile(path, 0, stat.st_size, stat.st_mtime_ns, stat.st_dev, stat.st_ino, compacted)
    return LogRef(
        key=key,
        layout="single",
        path=path,
        codec=codec,
        files=(file,),
        complete=not in_progress,
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        compacted=compacted,
    )


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
                if _ignored(name) or not (
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
                    return _special(key, "rolling", path, f"{name}: not a regular file ({kind})")
                index, codec, compacted = _parse_events_name(name)
                if index is None:
                    return _failed(key, "rolling", path, f"bad event file name {name!r}")
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
        return _failed(key, "rolling", path, f"cannot list directory: {error.strerror}")

    return _rolling_ref(path, key, statuses, files, codecs, mtime_ns)


def _rolling_ref(
    path: str,
    key: str,
    statuses: list[bool],
    files: list[EventFile],
    codecs: set[str],
    mtime_ns: int,
) -> LogRef:
    """The rolling log from what its directory listed: files, appstatus names, codecs."""
    complete = any(statuses)
    if len(codecs) > 1:
        return _failed(
            key, "rolling", path, "event files use different codecs: " + ", ".join(sorted(codecs))
        )
    codec = next(iter(codecs), "none")
    ordered, compacted, gap = _order(files)
    problem = _codec_error(codec)
    if problem is None and files and not statuses:
        problem = "no appstatus file"
    if problem is None and complete and not files:
        problem = "complete, but no event files"
    problem = problem or gap
    if problem:
        return _failed(key, "rolling", path, problem, codec=codec)
    return LogRef(
        key=key,
        layout="rolling",
        path=path,
        codec=codec,
        files=ordered,
        complete=complete,
        size=sum(f.size for f in ordered),
        mtime_ns=mtime_ns,
        compacted=compacted,
    )


def _parse_events_name(name: str) -> tuple[int | None, str, bool]:
    """(index or None if malformed, codec, compacted) of an events_<N>_<name>... file."""
    index, _, rest = name.removeprefix(EVENTS_PREFIX).partition("_")
    key, codec, _, compacted = parse_single_name(rest)
    if not index.isdigit() or not key:
        return None, codec, compacted
    return int(index), codec, compacted


def _order(files: list[EventFile]) -> tuple[tuple[EventFile, ...], bool, str | None]:
    """Files to read in order (from the last compact file on), whether that starts with a
    compact file, and an error when the indices are not contiguous."""
    # A compact file sorts after the plain file of the same index, which it replaces.
    ordered = sorted(files, key=lambda f: (f.index, f.compacted))
    last_compact = max((i for i, f in enumerate(ordered) if f.compacted), default=None)
    if last_compact is not None:
        ordered = ordered[last_compact:]
    indices = [f.index for f in ordered]
    if indices and indices != list(range(indices[0], indices[0] + len(indices))):
        return (), False, f"event files are not contiguous: indices {indices}"
    return tuple(ordered), last_compact is not None, None


def _codec_error(codec: str) -> str | None:
    if codec == "none" or codec in _COMPRESSED:
        return None
    return f"unknown codec {codec!r}"


def _failed(key: str, layout: Layout, path: str, error: str, *, codec: str = "none") -> LogRef:
    return LogRef(
        key=key,
        layout=layout,
        path=path,
        codec=codec,
        files=(),
        complete=False,
        size=0,
        mtime_ns=0,
        error=error,
    )


def _special(key: str, layout: Layout, path: str, error: str) -> LogRef:
    """A FIFO, socket or device where an event file should be: refused, never opened."""
    return replace(_failed(key, layout, path, error), special=True)


def _pick(first: LogRef, second: LogRef) -> LogRef:
    """One LogRef per key: the completion rename of a single file can be seen half-way, with
    both names listed; the complete one is the truth. Anything else is a real conflict."""
    if first.complete != second.complete and first.layout == second.layout == "single":
        return first if first.complete else second
    return replace(
        first, files=(), error=f"two event logs for one application: {first.path} and {second.path}"
    )


# -- logs on a store ---------------------------------------------------------------------------


def _scan_store(directory: str, skip: Container[str]) -> list[LogRef]:
    found: dict[str, LogRef] = {}
    refs: list[LogRef | None] = []
    rolling: list[tuple[str, str]] = []  # (url, key) of the directories to list
    for entry in sorted(stores.listdir(directory), key=lambda e: e.name):
        if _ignored(entry.name):
            continue
        if not entry.is_dir:
            refs.append(_single_store(entry))
        elif not entry.name.startswith(ROLLING_PREFIX):
            refs.append(
                _failed(
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
            found[ref.key] = _pick(found[ref.key], ref) if ref.key in found else ref
    return [found[key] for key in sorted(found)]


def _single_store(entry: stores.Entry) -> LogRef:
    key, codec, in_progress, compacted = parse_single_name(entry.name)
    error = _codec_error(codec)
    if error:
        return _failed(key, "single", entry.url, error, codec=codec)
    ino = stores.identity(entry.url)
    file = EventFile(entry.url, 0, entry.size, entry.mtime_ns, 0, ino, compacted)
    return LogRef(
        key=key,
        layout="single",
        path=entry.url,
        codec=codec,
        files=(file,),
        complete=not in_progress,
        size=entry.size,
        mtime_ns=entry.mtime_ns,
        compacted=compacted,
    )


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
        if entry.is_dir or _ignored(name):
            continue
        if name.startswith(APPSTATUS_PREFIX):
            statuses.append(not name.endswith(IN_PROGRESS))
            mtime_ns = max(mtime_ns, entry.mtime_ns)
            continue
        if not name.startswith(EVENTS_PREFIX):
            continue
        index, codec, compacted = _parse_events_name(name)
        if index is None:
            return _failed(key, "rolling", url, f"bad event file name {name!r}")
        codecs.add(codec)
        mtime_ns = max(mtime_ns, entry.mtime_ns)
        ino = stores.identity(entry.url)
        files.append(EventFile(entry.url, index, entry.size, entry.mtime_ns, 0, ino, compacted))
    return _rolling_ref(url, key, statuses, files, codecs, mtime_ns)
