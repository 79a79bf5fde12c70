"""The event-log directories, listed off the event loop; each one that is missing or cannot
be listed is logged once, and again when it comes back."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

import structlog

from agent.spark.eventlog import stores
from agent.spark.eventlog.discovery import scan
from agent.spark.eventlog.layout import LogRef

log = structlog.get_logger("agent.spark")


class Directories:
    """The configured event-log directories and which of them cannot be listed now."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(paths)
        self.missing: set[str] = set()  # not listable at the last look (logged once)

    async def list(self, finished: Collection[str] = frozenset()) -> dict[str, list[LogRef]]:
        """The logs of each directory that can be listed now. In a thread: a directory on a
        slow or hung mount must not hold up the deliveries, the control socket or SIGTERM.
        `finished` (keys `<directory>/<name>`) spares a store the listing of rolling
        directories of applications already finished."""
        listed = await asyncio.to_thread(_list_all, self.paths, finished)
        found: dict[str, list[LogRef]] = {}
        for directory, refs in listed.items():
            if isinstance(refs, OSError):
                self._unlistable(directory, refs)
                continue
            if directory in self.missing:
                self.missing.discard(directory)
                log.info("eventlog_dir_found", directory=directory)
            found[directory] = refs
        return found

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
    directories: Sequence[str], finished: Collection[str]
) -> dict[str, list[LogRef] | OSError]:
    """Each directory's logs, or why it cannot be listed (blocking I/O)."""
    listed: dict[str, list[LogRef] | OSError] = {}
    for directory in directories:
        skip: set[str] = set()
        if stores.is_url(directory):
            prefix = f"{directory.rstrip('/')}/"
            skip = {key[len(prefix) :] for key in finished if key.startswith(prefix)}
        try:
            listed[directory] = scan(directory, skip)
        except OSError as error:
            listed[directory] = error
    return listed
