"""File-system events for event-log directories: a wake-up when a log appears or grows.

`DirectoryWatch` watches the event-log directories and each rolling log's directory with
inotify, on the event loop's reader callback (no thread, no polling). Any event sets the
wake-up; a new entry in an event-log directory, or a queue overflow (events were lost),
also asks for a rescan. Where inotify is unavailable (`available` is False) the caller
falls back to its poll interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import structlog

log = structlog.get_logger("agent.spark")


class DirectoryWatch:
    """inotify watches on directories; `wake` is set on every change."""

    def __init__(self, roots: Collection[str], wake: asyncio.Event) -> None:
        self._roots = roots  # the event-log directories: a new entry there means a new log
        self._wake = wake
        self._inotify: Any = None
        self._watches: dict[int, str] = {}
        self._watched: set[str] = set()
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
        """Watch a directory (idempotent); a failure is logged and polling covers it."""
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
            if event.mask & flags.Q_OVERFLOW or (
                event.mask & (flags.CREATE | flags.MOVED_TO)
                and self._watches.get(event.wd) in self._roots
            ):
                self.rescan = True  # a new log, or events were lost: rescan now
            if event.mask & flags.IGNORED:
                path = self._watches.pop(event.wd, None)
                if path is not None:
                    self._watched.discard(path)
        self._wake.set()
