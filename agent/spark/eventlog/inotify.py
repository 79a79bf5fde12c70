"""File-system events for event-log directories: a wake-up when a log appears or grows.

`DirectoryWatch` watches the event-log directories and each rolling log's directory with
inotify, on the event loop's reader callback (no thread, no polling). Any event sets the
wake-up; a new entry in an event-log directory, or a queue overflow (events were lost),
also asks for a rescan. Spark makes a rolling log's directory empty and writes its first
file a moment later: a listing between the two finds no application yet, so such a new
directory is watched at once and its first entries ask for a rescan too, until the
caller follows it. Where inotify is unavailable (`available` is False) the caller falls
back to its poll interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import structlog

from agent.spark.eventlog import names

log = structlog.get_logger("agent.spark")


class DirectoryWatch:
    """inotify watches on directories; `wake` is set on every change."""

    def __init__(self, roots: Collection[str], wake: asyncio.Event) -> None:
        self._roots = roots  # the event-log directories: a new entry there means a new log
        self._wake = wake
        self._inotify: Any = None
        self._watches: dict[int, str] = {}
        self._watched: set[str] = set()
        # New rolling-log directories not followed yet: an entry made in one asks a rescan.
        self._fresh: set[str] = set()
        self.rescan = False  # set when a new log may have appeared or events were lost

    @property
    def available(self) -> bool:
        return self._inotify is not None

    def start(self, loop: asyncio.AbstractEventLoop, poll_interval: float) -> None:
        """Start watching; on failure log it once and stay unavailable."""
        from inotify_simple import INotify

        try:
            self._inotify = INotify(nonblocking=True)
        except OSError as error:
            log.warning(
                "inotify_unavailable",
                error=error.strerror,
                detail=f"polling every {poll_interval:g}s",
            )
            return
        loop.add_reader(self._inotify.fileno(), self._on_events)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._inotify is not None:
            loop.remove_reader(self._inotify.fileno())
            self._inotify.close()
            self._inotify = None

    def watch(self, path: str) -> None:
        """Watch a directory (idempotent); a failure is logged and polling covers it. A
        rolling log's directory watched this way is followed: its entries ask no rescan."""
        self._fresh.discard(path)
        if self._inotify is None or path in self._watched:
            return
        from inotify_simple import flags

        mask = (
            flags.CREATE
            | flags.MODIFY
            | flags.MOVED_TO
            | flags.CLOSE_WRITE
            | flags.DELETE
            | flags.MOVED_FROM
        )
        try:
            wd = self._inotify.add_watch(path, mask)
        except OSError as error:
            log.warning("inotify_watch_failed", path=path, error=error.strerror)
            return
        self._watches[wd] = path
        self._watched.add(path)

    def _on_events(self) -> None:
        from inotify_simple import flags

        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            events = []
        for event in events:
            where = self._watches.get(event.wd)
            created = event.mask & (flags.CREATE | flags.MOVED_TO)
            if event.mask & flags.Q_OVERFLOW or (
                created and (where in self._roots or where in self._fresh)
            ):
                self.rescan = True  # a new log, or events were lost: rescan now
            if (
                created
                and event.mask & flags.ISDIR
                and where is not None
                and where in self._roots
                and names.rolling(event.name) is not None
            ):
                # Watched before the rescan lists it: whatever Spark writes in it after this
                # event is seen, and what it wrote before, the rescan lists.
                fresh = f"{where.rstrip('/')}/{event.name}"
                self.watch(fresh)
                if fresh in self._watched:
                    self._fresh.add(fresh)
            if event.mask & flags.IGNORED:
                path = self._watches.pop(event.wd, None)
                if path is not None:
                    self._watched.discard(path)
                    self._fresh.discard(path)
        self._wake.set()
