"""What was read from each version of a metadata file, kept so that a version is parsed once.

Delta commits, Iceberg metadata files and parquet files are written once and never changed
(a new version is a new file), while every event of every run that names a table asks about
it again. A version is the file's identity and its size and times as `fstat` gives them on the
opened file: a file replaced, rewritten or grown is another version. Bounded twice: at most
`entries` versions and at most `size` bytes of what they keep (as the parser estimates it,
the version's key and place in the cache included), the least recently used forgotten first;
what is larger than `size` alone is not kept.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")
#: (path, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)
Version = tuple[str, int, int, int, int, int]


def version_of(path: str, info: os.stat_result) -> Version:
    """The version of the file at `path` whose open descriptor `fstat` gave `info`."""
    return (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class FileCache(Generic[V]):
    """Parsed file versions, most recently used last; safe to share between threads."""

    def __init__(self, *, entries: int, size: int) -> None:
        self.max_entries = entries
        self.max_size = size
        self.size = 0  # bytes kept, as estimated by the parsers
        self.parses = 0  # versions parsed: one per version while it stays cached
        self._kept: OrderedDict[Version, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, version: Version, parse: Callable[[], tuple[V, int]]) -> V:
        """What `parse` made of this version, parsing it now if it is not kept; `parse`
        returns the value and the bytes it keeps."""
        with self._lock:
            kept = self._kept.get(version)
            if kept is not None:
                self._kept.move_to_end(version)
                return kept[0]
            self.parses += 1
        # Parsed outside the lock: another thread may read another table meanwhile (two
        # reading the same new version both parse it; the second result replaces the first).
        value, size = parse()
        with self._lock:
            if size <= self.max_size:
                old = self._kept.pop(version, None)
                self.size += size - (old[1] if old is not None else 0)
                self._kept[version] = (value, size)
                while len(self._kept) > self.max_entries or self.size > self.max_size:
                    _, (_, dropped) = self._kept.popitem(last=False)
                    self.size -= dropped
        return value

    def __len__(self) -> int:
        return len(self._kept)
