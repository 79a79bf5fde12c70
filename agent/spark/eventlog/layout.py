"""Spark's two layouts of an event log, and what makes a `LogRef` of what a listing found.

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

Listing code recognises these by the names Spark writes (`names`); what it passes here is
Spark-named. Dot-files (Hadoop's `.<file>.crc` checksums) and `*.crc` are ignored. One
application that cannot be read (an unknown codec in a path given explicitly, missing
appstatus, a gap in the indices, an unreadable directory, an event file that is a FIFO,
socket or device) becomes a LogRef whose `error` says why (`special` for the kinds of file
Spark never writes, which are never opened). The same
rules serve local directories and stores (`discovery` lists both). No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from itertools import islice
from typing import Final, Literal

from agent.spark.eventlog.codecs import CODECS

Layout = Literal["single", "rolling"]

ROLLING_PREFIX: Final = "eventlog_v2_"
IN_PROGRESS: Final = ".inprogress"
COMPACT: Final = ".compact"

_COMPRESSED: Final = frozenset(CODECS) - {"none"}


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
    ignored: tuple[str, ...] = ()  # paths in its directory whose names Spark does not write

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)


def parse_single_name(name: str) -> tuple[str, str, bool, bool]:
    """(key, codec or the unknown extension, in progress, compacted) of a single-file name."""
    compacted = name.endswith(COMPACT)
    name = name.removesuffix(COMPACT)
    in_progress = name.endswith(IN_PROGRESS)
    name = name.removesuffix(IN_PROGRESS)
    key, _, extensions = name.partition(".")
    return key, extensions or "none", in_progress, compacted


def ignored(name: str) -> bool:
    return name.startswith(".") or name.endswith(".crc")


def single_ref(
    key: str,
    path: str,
    codec: str,
    in_progress: bool,
    compacted: bool,
    stat: tuple[int, int, int, int],
) -> LogRef:
    """A single-file log from its name's parts and its `(size, mtime_ns, dev, ino)`."""
    error = _codec_error(codec)
    if error:
        return failed(key, "single", path, error, codec=codec)
    size, mtime_ns, dev, ino = stat
    file = EventFile(path, 0, size, mtime_ns, dev, ino, compacted)
    return LogRef(
        key=key,
        layout="single",
        path=path,
        codec=codec,
        files=(file,),
        complete=not in_progress,
        size=size,
        mtime_ns=mtime_ns,
        compacted=compacted,
    )


def rolling_ref(
    path: str,
    key: str,
    statuses: list[bool],
    files: list[EventFile],
    codecs: set[str],
    mtime_ns: int,
    left_out: list[str] | None = None,
) -> LogRef:
    """The rolling log from what its directory listed: files, appstatus names, codecs, and
    the entries whose names Spark does not write (`left_out`)."""
    others = tuple(left_out or ())
    complete = any(statuses)
    if len(codecs) > 1:
        mixed = "event files use different codecs: " + ", ".join(sorted(codecs))
        return failed(key, "rolling", path, mixed, ignored=others)
    codec = next(iter(codecs), "none")
    ordered, compacted, gap = _order(files)
    problem = _codec_error(codec)
    if problem is None and files and not statuses:
        problem = "no appstatus file"
    if problem is None and complete and not files:
        problem = "complete, but no event files"
    problem = problem or gap
    if problem:
        return failed(key, "rolling", path, problem, codec=codec, ignored=others)
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
        ignored=others,
    )


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


def failed(
    key: str,
    layout: Layout,
    path: str,
    error: str,
    *,
    codec: str = "none",
    ignored: tuple[str, ...] = (),
) -> LogRef:
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
        ignored=ignored,
    )


def special(key: str, layout: Layout, path: str, error: str) -> LogRef:
    """A FIFO, socket or device where an event file should be: refused, never opened."""
    return replace(failed(key, layout, path, error), special=True)


def pick(first: LogRef, second: LogRef) -> LogRef:
    """One LogRef per key: the completion rename of a single file can be seen half-way, with
    both names listed; the complete one is the truth. A rolling directory holding nothing
    Spark wrote (no event file, no appstatus) yields to a log that has files. Anything else
    is a real conflict."""
    for empty, other in ((first, second), (second, first)):
        if _hollow(empty) and other.files:
            return other
    if first.complete != second.complete and first.layout == second.layout == "single":
        return first if first.complete else second
    return replace(
        first, files=(), error=f"two event logs for one application: {first.path} and {second.path}"
    )


def _hollow(ref: LogRef) -> bool:
    return ref.layout == "rolling" and not ref.files and not ref.complete and ref.error is None


HOLLOW: Final = "nothing Spark wrote"  # a rolling directory with decoys only: no application
MAX_LEFT_OUT: Final = 1000  # paths of entries left out that one listing reports, at most


@dataclass(frozen=True, slots=True)
class Listing:
    """What one scan of a directory found: the applications, and the paths of the entries
    whose names Spark does not write (left out)."""

    refs: list[LogRef]
    ignored: tuple[str, ...] = ()
    # Where resumable: the last name of the listing's longest decided prefix (`storescan`).
    settled: str = ""


def decoys_only(path: str, key: str, left_out: list[str]) -> LogRef | None:
    """A rolling directory holding nothing Spark wrote (Spark writes its appstatus file
    right after the directory): no application yet. Its decoys are still reported."""
    if not left_out:
        return None
    return replace(failed(key, "rolling", path, HOLLOW), ignored=tuple(left_out))


def leave_out(left_out: list[str], paths: Iterable[str]) -> None:
    """`paths` added to the entries `left_out`, which hold MAX_LEFT_OUT at most."""
    left_out.extend(islice(paths, max(0, MAX_LEFT_OUT - len(left_out))))
