"""Find the Spark applications in an event-log directory on a store (S3, GCS, Azure, HDFS)
through `stores`, with the rules `discovery` applies on a local disk, a page of the listing at
a time. Objects have no device or inode: `dev` is 0 and `ino` is `stores.identity` of the URL.

On S3 the directory is listed at every depth in one listing (`scan_deep`): a rolling
directory's files come with the listing. Elsewhere it is one listing of the directory, and
one more per rolling directory not in `skip` (applications already finished: a store's
listing costs requests).
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Final

from agent.spark.eventlog import layout, names, stores
from agent.spark.eventlog.layout import HOLLOW, EventFile, Listing, LogRef, ignored, leave_out

STORE_LISTINGS: Final = 8  # rolling directories on a store listed at once


def scan_store(directory: str, skip: Container[str], since_ns: int, start_after: str) -> Listing:
    """The listing of a directory on a store, taken page by page as each arrives: what it
    keeps is the applications it returns, never the whole listing (a bucket may hold
    millions of objects), nor more than MAX_LEFT_OUT names of entries it left out.

    Where the store is resumable it also finds `Listing.settled`, the last name of the longest
    prefix of the listing (in the store's order, `stores.order`) whose every entry is
    decided: an application already finished (in `skip`), a log past the horizon, or a name
    Spark does not write. Only a prefix is safe: names are in lexical order, not time order.
    Application ids sort by time within one cluster and one scheme only
    (`application_<clusterStart>_` of two YARN clusters, `app-` beside `local-`, random
    Kubernetes `spark-` ids, a YARN sequence past 9999), so a live or undecided application
    may sort before a finished one; stopping at the first undecided entry never passes over
    one that is there now."""
    if stores.lists_deep(directory):
        return _scan_deep(directory, skip, since_ns, start_after)
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
                    leave_out(left_out, (entry.url,))
                elif entry.mtime_ns >= since_ns:  # older: past the horizon, passed over
                    decided = single.key in skip
                    refs.append(single_store(entry))
                open_prefix = open_prefix and decided
                if open_prefix:
                    settled = order(entry)
                elif not decided and order(entry) <= settled:
                    # Listed out of order (an emulator may give a page prefixes from later
                    # on): the point goes back to where this listing started.
                    settled = start_after
            page = []  # one page held at a time
            listed = pool.map(lambda item: rolling_store(*item), rolling)
            refs.extend(ref for ref in listed if ref is not None)
    for ref in refs:
        leave_out(left_out, ref.ignored)
        if ref.error != HOLLOW:
            found[ref.key] = layout.pick(found[ref.key], ref) if ref.key in found else ref
    return Listing([found[key] for key in sorted(found)], tuple(left_out), settled)


def _scan_deep(directory: str, skip: Container[str], since_ns: int, start_after: str) -> Listing:
    """`scan_store` from one listing of every object under the directory (S3 without a
    delimiter): a rolling directory's files arrive with it, so none costs a request of its
    own and its age is known as it is listed; one past `since_ns` is passed over like a
    single-file log. The objects of one directory are contiguous in key order, so what is
    held at a time is one page and one rolling directory's entries."""
    found: dict[str, LogRef] = {}
    left_out: list[str] = []
    scan = _DeepScan(directory, skip, since_ns, start_after)
    for page in stores.pages(directory, start_after, deep=True):
        for entry in page:
            scan.add(entry)
        page = []  # one page held at a time
    scan.close_group()
    for ref in scan.refs:
        leave_out(left_out, ref.ignored)
        if ref.error != HOLLOW:
            found[ref.key] = layout.pick(found[ref.key], ref) if ref.key in found else ref
    leave_out(left_out, scan.left_out)
    return Listing([found[key] for key in sorted(found)], tuple(left_out), scan.settled)


class _DeepScan:
    """The state of `_scan_deep` between entries: the group (top-level directory) being
    listed, the applications found, and the decided prefix."""

    def __init__(self, directory: str, skip: Container[str], since_ns: int, after: str) -> None:
        self.directory = directory
        self.skip = skip
        self.since_ns = since_ns
        self.refs: list[LogRef] = []
        self.left_out: list[str] = []
        self.settled = after
        self.open_prefix = True
        self.group = ""  # the top-level directory whose objects are arriving
        self.key: str | None = None  # its application, when gathered
        self.entries: list[stores.Entry] = []
        self.nested = ""  # the last directory inside the group left out
        # A listing that starts inside a directory (the point is the last name of a decided
        # one) shows only its later objects: they pass by, as that directory was decided.
        self.partial = after.partition("/")[0] if "/" in after else ""
        self.last = ""  # the group's last name, its place in the key order

    def add(self, entry: stores.Entry) -> None:
        top, slash, rest = entry.name.partition("/")
        if not slash:
            self.close_group()
            self._single(entry)
            return
        if top != self.group:
            self.close_group()
            self._open_group(top)
        self.last = entry.name
        if self.key is None:
            return
        inner, deeper, _ = rest.partition("/")
        if deeper:  # a directory inside a rolling directory: Spark writes none
            if inner != self.nested:
                leave_out(self.left_out, (stores.child(stores.child(self.directory, top), inner),))
            self.nested = inner
            return
        self.entries.append(replace(entry, name=rest))

    def _open_group(self, top: str) -> None:
        self.group, self.entries, self.nested = top, [], ""
        self.key = None if ignored(top) or top == self.partial else names.rolling(top)
        if self.key is None and not (ignored(top) or top == self.partial):
            leave_out(self.left_out, (stores.child(self.directory, top),))
        elif self.key in self.skip:
            self.key = None  # finished: its objects pass by unread

    def close_group(self) -> None:
        if not self.group:
            return
        decided = True
        if self.key is not None:
            url = stores.child(self.directory, self.group)
            ref = rolling_entries(url, self.key, self.entries)
            newest = max((entry.mtime_ns for entry in self.entries), default=0)
            if ref is not None and ref.error == HOLLOW:  # nothing Spark wrote: only its decoys
                leave_out(self.left_out, ref.ignored)
                decided = newest < self.since_ns
            elif ref is not None and (ref.error or newest >= self.since_ns):
                decided = False
                self.refs.append(ref)
        self._decide(decided, self.last)
        self.group, self.key, self.entries = "", None, []

    def _single(self, entry: stores.Entry) -> None:
        decided = True
        if ignored(entry.name):
            pass
        elif (single := names.single(entry.name)) is None:
            leave_out(self.left_out, (entry.url,))
        elif entry.mtime_ns >= self.since_ns:  # older: past the horizon, passed over
            decided = single.key in self.skip
            self.refs.append(single_store(entry))
        self._decide(decided, entry.name)

    def _decide(self, decided: bool, name: str) -> None:
        self.open_prefix = self.open_prefix and decided
        if self.open_prefix:
            self.settled = name


def single_store(entry: stores.Entry) -> LogRef:
    key, codec, in_progress, compacted = layout.parse_single_name(entry.name)
    identity = (entry.size, entry.mtime_ns, 0, stores.identity(entry.url))
    return layout.single_ref(key, entry.url, codec, in_progress, compacted, identity)


def rolling_store(url: str, key: str) -> LogRef | None:
    """One eventlog_v2_ directory on a store (one listing, taken a page at a time); None
    when it no longer exists."""
    try:
        return rolling_entries(url, key, (entry for page in stores.pages(url) for entry in page))
    except FileNotFoundError:
        return None


def rolling_entries(url: str, key: str, entries: Iterable[stores.Entry]) -> LogRef | None:
    """The rolling log of the directory `url` from its listed entries, taken as they come;
    None when it holds nothing at all."""
    statuses: list[bool] = []
    files: list[EventFile] = []
    codecs: set[str] = set()
    left_out: list[str] = []
    mtime_ns = 0
    for entry in entries:
        name = entry.name
        if ignored(name):
            continue
        status = None if entry.is_dir else names.appstatus(name, key)
        events = None if entry.is_dir or status is not None else names.events(name, key)
        if status is None and events is None:
            leave_out(left_out, (entry.url,))
            continue
        mtime_ns = max(mtime_ns, entry.mtime_ns)
        if events is None:
            statuses.append(bool(status))
            continue
        codecs.add(events.codec)
        ino = stores.identity(entry.url)
        files.append(
            EventFile(entry.url, events.index, entry.size, entry.mtime_ns, 0, ino, events.compacted)
        )
    if not statuses and not files:
        return layout.decoys_only(url, key, left_out)
    return layout.rolling_ref(url, key, statuses, files, codecs, mtime_ns, left_out)
