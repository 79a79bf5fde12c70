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
* parquet datasets (not tables, but their files' own metadata): `parquetmeta`.

The latest commit inside the run's window is the run's. Bounded: regular files only (no
links, devices or FIFOs), at most `_MAX_COMMITS` Delta commits looked at, each file read up
to its size limit; anything unreadable or malformed tells nothing. Blocking: call it from a
worker thread.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Final

from agent import linear
from agent.spark.parquetmeta import parquet_schema
from agent.spark.plan.schema import Field, field_of, spark_struct
from agent.spark.translate.versions import SchemaSource, TableFormat

#: File names in a table's directories (anyone who can write there chooses them).
_DELTA_COMMIT = linear.compile(r"^(\d{20})\.json$")
_ICEBERG_METADATA = linear.compile(r"^v?(\d+)(?:-[0-9a-fA-F-]+)?(?:\.gz)?\.metadata\.json$")
_MAX_COMMITS: Final = 64  # Delta commits read, newest first, before giving up
_MAX_COMMIT_BYTES: Final = 4 * 1024 * 1024
_MAX_METADATA_BYTES: Final = 32 * 1024 * 1024
_MAX_ENTRIES: Final = 100_000  # directory entries listed
_MAX_DEPTH: Final = 32  # nesting of a schema's types
#: Iceberg's primitive type names that Spark reads as another type (the rest are alike).
_ICEBERG_TYPES: Final = {
    "int": "integer",
    "timestamptz": "timestamp",
    "timestamp": "timestamp_ntz",
    "uuid": "string",
    "time": "long",
}


class DiskTableMetadata:
    """`TableMetadata` from the metadata files of tables on a local file system."""

    def committed(self, fmt: TableFormat, path: str, start_ms: int, end_ms: int) -> str | None:
        try:
            if fmt == "delta":
                return _delta(path, start_ms, end_ms)
            return _iceberg(path, start_ms, end_ms)
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
                return _delta_schema(path, at)
            if fmt == "parquet":
                return parquet_schema(path)
            return _iceberg_schema(path, at)
        except (OSError, ValueError, UnicodeDecodeError, RecursionError, KeyError, TypeError):
            return None


def _delta(table: str, start_ms: int, end_ms: int) -> str | None:
    log = os.path.join(table, "_delta_log")
    versions = sorted(
        (int(m[1]) for name in _names(log) if (m := _DELTA_COMMIT.match(name))), reverse=True
    )
    for version in versions[:_MAX_COMMITS]:
        raw = _read(os.path.join(log, f"{version:020d}.json"), _MAX_COMMIT_BYTES)
        if raw is None:
            continue
        stamp = _commit_time(raw)
        if stamp is None:
            continue
        if stamp < start_ms:
            return None  # older commits are older still
        if stamp <= end_ms:
            return str(version)
    return None


def _commit_time(raw: bytes) -> int | None:
    """`commitInfo.timestamp` of a Delta commit file (one action per line)."""
    for line in raw.splitlines():
        if b'"commitInfo"' not in line:
            continue
        action = json.loads(line)
        info = action.get("commitInfo") if isinstance(action, dict) else None
        stamp = info.get("timestamp") if isinstance(info, dict) else None
        if isinstance(stamp, int) and not isinstance(stamp, bool):
            return stamp
    return None


def _delta_schema(table: str, at: int | None) -> tuple[Field, ...] | None:
    """The newest `metaData.schemaString` among the newest `_MAX_COMMITS` commits (up to
    version `at`, when given)."""
    log = os.path.join(table, "_delta_log")
    versions = sorted(
        (int(m[1]) for name in _names(log) if (m := _DELTA_COMMIT.match(name))), reverse=True
    )
    if at is not None:
        versions = [version for version in versions if version <= at]
    for version in versions[:_MAX_COMMITS]:
        raw = _read(os.path.join(log, f"{version:020d}.json"), _MAX_COMMIT_BYTES)
        for line in raw.splitlines() if raw is not None else ():
            if b'"metaData"' not in line:
                continue
            action = json.loads(line)
            meta = action.get("metaData") if isinstance(action, dict) else None
            text = meta.get("schemaString") if isinstance(meta, dict) else None
            if isinstance(text, str):
                return spark_struct(text)
    return None


def _iceberg_schema(table: str, snapshot_id: int | None) -> tuple[Field, ...] | None:
    """The schema of snapshot `snapshot_id` (when given and listed), else the current one,
    from the newest metadata file."""
    document = _iceberg_document(table)
    if not isinstance(document, dict):
        return None
    current = document.get("current-schema-id")
    snapshots = document.get("snapshots") if snapshot_id is not None else None
    for snapshot in snapshots if isinstance(snapshots, list) else []:
        if isinstance(snapshot, dict) and snapshot.get("snapshot-id") == snapshot_id:
            current = snapshot.get("schema-id", current)
    schemas = document.get("schemas")
    for schema in schemas if isinstance(schemas, list) else []:
        if isinstance(schema, dict) and schema.get("schema-id") == current:
            return _iceberg_struct(schema, 0)
    legacy = document.get("schema")  # format version 1 without `schemas`
    return _iceberg_struct(legacy, 0) if isinstance(legacy, dict) else None


def _iceberg_struct(struct: Any, depth: int) -> tuple[Field, ...]:
    return tuple(_iceberg_field(f["name"], f["type"], depth) for f in struct["fields"])


def _iceberg_field(name: str, kind: Any, depth: int) -> Field:
    if depth > _MAX_DEPTH:
        raise ValueError(f"schema nested deeper than {_MAX_DEPTH} levels")
    if not isinstance(name, str):
        raise TypeError(f"field name {name!r} is not a string")
    if isinstance(kind, str):
        if kind.startswith("fixed["):
            return Field(name, "binary")
        return field_of(name, _ICEBERG_TYPES.get(kind, kind))
    form = kind["type"]
    if form == "struct":
        return Field(name, "struct", _iceberg_struct(kind, depth + 1))
    if form == "list":
        return Field(name, "array", (_iceberg_field("_element", kind["element"], depth + 1),))
    if form == "map":
        key = _iceberg_field("key", kind["key"], depth + 1)
        return Field(name, "map", (key, _iceberg_field("value", kind["value"], depth + 1)))
    raise ValueError(f"unknown type {form!r}")


def _iceberg_document(table: str) -> Any:
    """The newest metadata file's JSON, None when there is none or it is compressed."""
    metadata = os.path.join(table, "metadata")
    found = [(int(m[1]), name) for name in _names(metadata) if (m := _ICEBERG_METADATA.match(name))]
    if not found:
        return None
    newest = max(found)[1]
    if newest.endswith(".gz"):
        return None  # compressed metadata: not read here
    raw = _read(os.path.join(metadata, newest), _MAX_METADATA_BYTES)
    return json.loads(raw) if raw is not None else None


def _iceberg(table: str, start_ms: int, end_ms: int) -> str | None:
    document = _iceberg_document(table)
    snapshots = document.get("snapshots") if isinstance(document, dict) else None
    best: tuple[int, int] | None = None
    for snapshot in snapshots if isinstance(snapshots, list) else []:
        if not isinstance(snapshot, dict):
            continue
        stamp, snapshot_id = snapshot.get("timestamp-ms"), snapshot.get("snapshot-id")
        if not (isinstance(stamp, int) and isinstance(snapshot_id, int)):
            continue
        if start_ms <= stamp <= end_ms and (best is None or stamp >= best[0]):
            best = (stamp, snapshot_id)
    return None if best is None else str(best[1])


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


def _read(path: str, limit: int) -> bytes | None:
    """A regular file's bytes, None if it is anything else or larger than `limit`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as file:
            return file.read(limit + 1)[:limit]
    finally:
        os.close(fd)
