"""The committed version and the schema of a Delta or Iceberg table, and whether a directory
holds such a table, read from the table's own metadata on a local file system: the
`TableMetadata` the daemon's source and `replay` use.

* Delta: `<table>/_delta_log/<20-digit version>.json`, newest first; a commit's
  `commitInfo.timestamp` (the driver's clock, like the event log's) places it in the run;
  the newest `metaData.schemaString` (Spark's own JSON schema) among those commits is the
  table's schema (none when only a checkpoint holds it).
* Iceberg: the newest `<table>/metadata/*.metadata.json` (`v<N>.metadata.json` of the hadoop
  catalog, `<N>-<uuid>.metadata.json` of the others); its `snapshots[]` carry
  `snapshot-id` and `timestamp-ms`, its `schemas[]` entry of `current-schema-id` the
  columns, with Iceberg's type names turned into Spark's as Spark reads them (`int` ->
  `integer`, `timestamptz` -> `timestamp`, `timestamp` -> `timestamp_ntz`, `list` -> `array`).
* parquet datasets (not tables, but their files' own metadata): `parquet`.

The latest commit inside the run's window is the run's. Bounded: regular files only (no
links, devices or FIFOs), at most `_MAX_COMMITS` Delta commits looked at, each file read up
to its size limit and parsed as a stream within a memory bound whatever it holds
(`spark.tables`), once per version of the file: what a version tells is kept in a bounded
cache (`FileCache`) that a `DiskTableMetadata` shares between the applications that ask it.
Anything unreadable or malformed tells nothing. Blocking: call it from a worker thread.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Final

from agent import linear
from agent.spark.plan.datasets import SchemaSource, TableFormat
from agent.spark.plan.syntax.schema import Field
from agent.spark.tables.delta import Commit, read_commit
from agent.spark.tables.filecache import FileCache, version_of
from agent.spark.tables.iceberg import IcebergMetadata, read_metadata
from agent.spark.tables.parquet import parquet_schema

#: File names in a table's directories (anyone who can write there chooses them).
_DELTA_COMMIT = linear.compile(r"^(\d{20})\.json$")
_ICEBERG_METADATA = linear.compile(r"^v?(\d+)(?:-[0-9a-fA-F-]+)?(?:\.gz)?\.metadata\.json$")
_MAX_COMMITS: Final = 64  # Delta commits read, newest first, before giving up
_MAX_COMMIT_BYTES: Final = 4 * 1024 * 1024
_MAX_METADATA_BYTES: Final = 32 * 1024 * 1024
_MAX_ENTRIES: Final = 100_000  # directory entries listed
_MiB: Final = 1024 * 1024


class DiskTableMetadata:
    """`TableMetadata` from the metadata files of tables on a local file system."""

    def __init__(self) -> None:
        # What each file version told; the bounds keep all three under 48 MiB.
        self.commits: FileCache[Commit] = FileCache(entries=4096, size=8 * _MiB)
        self.iceberg: FileCache[IcebergMetadata | None] = FileCache(entries=256, size=32 * _MiB)
        self.footers: FileCache[tuple[Field, ...] | None] = FileCache(entries=4096, size=8 * _MiB)

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        try:
            if fmt == "delta":
                return self._delta(path, start_ms, end_ms)
            metadata = self._iceberg(path)
            return metadata.committed(start_ms, end_ms) if metadata is not None else None
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return None

    def exists(self, fmt: TableFormat, path: str) -> bool:
        """A Delta table: a commit in `_delta_log`; an Iceberg table: a metadata file in
        `metadata` (a directory the table's catalog wrote when it created the table)."""
        try:
            if fmt == "delta":
                return any(_DELTA_COMMIT.match(n) for n in _names(os.path.join(path, "_delta_log")))
            return any(_ICEBERG_METADATA.match(n) for n in _names(os.path.join(path, "metadata")))
        except (OSError, ValueError):
            return False

    def schema(self, fmt: SchemaSource, path: str, version: str | None) -> tuple[Field, ...] | None:
        at = int(version) if version is not None and version.lstrip("-").isdigit() else None
        try:
            if fmt == "delta":
                return self._delta_schema(path, at)
            if fmt == "parquet":
                return parquet_schema(path, self.footers)
            metadata = self._iceberg(path)
            return metadata.schema(at) if metadata is not None else None
        except (OSError, ValueError, UnicodeDecodeError, RecursionError, KeyError, TypeError):
            return None

    def _delta(self, table: str, start_ms: int, end_ms: int) -> str | None:
        log = os.path.join(table, "_delta_log")
        for version in _commit_versions(log)[:_MAX_COMMITS]:
            commit = self._commit(log, version)
            if commit is None:
                continue
            if commit.timestamp_error is not None:
                raise ValueError(commit.timestamp_error)
            stamp = commit.timestamp
            if stamp is None:
                continue
            if stamp < start_ms:
                return None  # older commits are older still
            if stamp <= end_ms:
                return str(version)
        return None

    def _delta_schema(self, table: str, at: int | None) -> tuple[Field, ...] | None:
        """The newest `metaData.schemaString` among the newest `_MAX_COMMITS` commits (up to
        version `at`, when given)."""
        log = os.path.join(table, "_delta_log")
        versions = _commit_versions(log)
        if at is not None:
            versions = [version for version in versions if version <= at]
        for version in versions[:_MAX_COMMITS]:
            commit = self._commit(log, version)
            if commit is None:
                continue
            if commit.schema_error is not None:
                raise ValueError(commit.schema_error)
            if commit.schema is not None:
                return commit.schema
        return None

    def _commit(self, log: str, version: int) -> Commit | None:
        """What a commit file tells, None when it is no regular file or too large."""
        path = os.path.join(log, f"{version:020d}.json")
        fd = _open(path)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_COMMIT_BYTES:
                return None

            def parse() -> tuple[Commit, int]:
                commit = read_commit(_read(fd, _MAX_COMMIT_BYTES))
                return commit, commit.size

            return self.commits.get(version_of(path, info), parse)
        finally:
            os.close(fd)

    def _iceberg(self, table: str) -> IcebergMetadata | None:
        """What the newest metadata file tells, None when there is none, it is compressed,
        no regular file, too large or unreadable."""
        metadata = os.path.join(table, "metadata")
        found = [
            (int(m[1]), name) for name in _names(metadata) if (m := _ICEBERG_METADATA.match(name))
        ]
        if not found:
            return None
        newest = max(found)[1]
        if newest.endswith(".gz"):
            return None  # compressed metadata: not read here
        path = os.path.join(metadata, newest)
        fd = _open(path)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_METADATA_BYTES:
                return None

            def parse() -> tuple[IcebergMetadata | None, int]:
                with os.fdopen(os.dup(fd), "rb") as file:
                    try:
                        told = read_metadata(_Capped(file, _MAX_METADATA_BYTES))
                    except ValueError:
                        return None, 1024  # unreadable, malformed or a flood: nothing
                return told, told.size if told is not None else 1024

            return self.iceberg.get(version_of(path, info), parse)
        finally:
            os.close(fd)


def _commit_versions(log: str) -> list[int]:
    """The versions of the commits in `log`, newest first."""
    return sorted(
        (int(m[1]) for name in _names(log) if (m := _DELTA_COMMIT.match(name))), reverse=True
    )


def _names(directory: str) -> list[str]:
    """The ASCII names among the first `_MAX_ENTRIES` entries of a directory (not followed
    if it is a link). The files looked for are named in ASCII; another name, perhaps not
    even UTF-8 (Python hands it over with lone surrogates, which RE2 cannot take), is none
    of them."""
    if not stat.S_ISDIR(os.lstat(directory).st_mode):
        return []
    names: list[str] = []
    with os.scandir(directory) as entries:
        for listed, entry in enumerate(entries, 1):
            if entry.name.isascii():
                names.append(entry.name)
            if listed >= _MAX_ENTRIES:
                break
    return names


def _open(path: str) -> int:
    """A descriptor of the file at `path`, not followed if it is a link, never blocking (a
    FIFO opens and is then seen not to be a regular file)."""
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)


def _read(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes of the open file from its start."""
    with os.fdopen(os.dup(fd), "rb") as file:
        return file.read(limit + 1)[:limit]


class _Capped:
    """A file read no further than `limit` bytes: one that grows while it is parsed ends
    there (and is then no JSON), as the reader reads no more of any file."""

    def __init__(self, file: BinaryIO, limit: int) -> None:
        self._file = file
        self._left = limit

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = self._file.read(size)
        self._left -= len(data)
        return data
