"""The event-log directories, listed off the event loop; each one that is missing or cannot
be listed is logged once, and again when it comes back. Each entry whose name Spark does not
write is counted and logged once (`eventlog_file_ignored`): it changes no application. A
listing names at most `layout.MAX_LEFT_OUT` of them, so a directory full of decoys costs
the log and the memory of that many per look."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

import structlog

from agent.spark.eventlog import stores
from agent.spark.eventlog.discovery import Listing, listing
from agent.spark.eventlog.layout import LogRef

log = structlog.get_logger("agent.spark")

MAX_IGNORED_REMEMBERED: Final = 100_000  # paths logged as ignored before the memory resets


class Directories:
    """The configured event-log directories and which of them cannot be listed now."""

    def __init__(
        self, paths: Sequence[str], on_ignored: Callable[[], object] = lambda: None
    ) -> None:
        self.paths = tuple(paths)
        self.missing: set[str] = set()  # not listable at the last look (logged once)
        self.on_ignored = on_ignored
        self.ignored: set[str] = set()  # entries Spark did not name, already logged
        self.failed: dict[str, OSError] = {}  # why each directory failed at the last look
        self.settled: dict[str, str] = {}  # each store directory's `Listing.settled`

    async def list(
        self,
        finished: Collection[str] = frozenset(),
        since_ns: int = 0,
        start_after: Mapping[str, str] | None = None,
    ) -> dict[str, list[LogRef]]:
        """The logs of each directory that can be listed now. In a thread: a directory on a
        slow or hung mount must not hold up the deliveries, the control socket or SIGTERM.
        `finished` (keys `<directory>/<name>`) spares a store the listing of rolling
        directories of applications already finished; single-file logs on a store last
        written before `since_ns` are passed over; a directory in `start_after` on a
        resumable store is listed after that name."""
        after = start_after or {}
        listed = await asyncio.to_thread(_list_all, self.paths, finished, since_ns, after)
        found: dict[str, list[LogRef]] = {}
        for directory, scanned in listed.items():
            if isinstance(scanned, OSError):
                self._unlistable(directory, scanned)
                self.failed[directory] = scanned
                continue
            self.failed.pop(directory, None)
            if directory in self.missing:
                self.missing.discard(directory)
                log.info("eventlog_dir_found", directory=directory)
            self._ignore(scanned.ignored)
            self.settled[directory] = scanned.settled
            found[directory] = scanned.refs
        return found

    def _ignore(self, paths: Sequence[str]) -> None:
        for path in paths:
            if path in self.ignored:
                continue
            if len(self.ignored) >= MAX_IGNORED_REMEMBERED:
                self.ignored.clear()
            self.ignored.add(path)
            self.on_ignored()
            log.info(
                "eventlog_file_ignored",
                path=stores.redact(path),
                detail="not a name Spark gives an event log: no application's state changes",
            )

    def _unlistable(self, directory: str, error: OSError) -> None:
        if directory in self.missing:
            return
        if isinstance(error, FileNotFoundError):
            log.warning(
                "eventlog_dir_missing", directory=directory, detail="waiting for it to appear"
            )
        else:
            log.error(
                "eventlog_dir_unreadable",
                directory=directory,
                error=error.strerror or str(error),
            )
        self.missing.add(directory)


def _list_all(
    directories: Sequence[str],
    finished: Collection[str],
    since_ns: int,
    start_after: Mapping[str, str],
) -> dict[str, Listing | OSError]:
    """Each directory's logs, or why it cannot be listed (blocking I/O)."""
    listed: dict[str, Listing | OSError] = {}
    for directory in directories:
        skip: set[str] = set()
        if stores.is_url(directory):
            prefix = f"{directory.rstrip('/')}/"
            skip = {key[len(prefix) :] for key in finished if key.startswith(prefix)}
        try:
            listed[directory] = listing(directory, skip, since_ns, start_after.get(directory, ""))
        except OSError as error:
            listed[directory] = error
    return listed
