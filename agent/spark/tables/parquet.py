"""The schema Spark wrote into a parquet dataset's footer, read from one of its files on a
local file system: what a scan's pruned `ReadSchema` leaves out.

Spark keeps the written schema, as its own JSON, in the footer's key-value metadata under
`org.apache.spark.sql.parquet.row.metadata`. The footer (`<FileMetaData><length:4>PAR1` at
the file's end) is Thrift's compact protocol; only `key_value_metadata` (field 5) is decoded,
every other field skipped. A dataset directory is read through the first of its parquet
files by name (`part-...`); a directory of partitions only (`k=v/`) or files another writer
made (no Spark schema) tell nothing. Bounded: regular files only, the footer read up to
`_MAX_FOOTER_BYTES` and walked in place (no value copied out but the schema), Thrift nesting
and sizes checked against the bytes there are, the schema read only up to
`_MAX_SCHEMA_BYTES` and within `SCHEMA_BUDGET`; what a version of a file tells is cached.
Blocking: call it from a worker thread.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from agent.spark.plan.syntax.schema import Field
from agent.spark.tables.fields import fields_size, spark_schema
from agent.spark.tables.filecache import FileCache, version_of

_SPARK_SCHEMA: Final = b"org.apache.spark.sql.parquet.row.metadata"
_MAGIC: Final = b"PAR1"
_MAX_FOOTER_BYTES: Final = 16 * 1024 * 1024
_MAX_SCHEMA_BYTES: Final = 4 * 1024 * 1024  # as much as a Delta commit holding a schema
_MAX_ENTRIES: Final = 10_000  # directory entries looked at for a data file
_MAX_NESTING: Final = 64
# Thrift compact protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12


def parquet_schema(
    path: str, cache: FileCache[tuple[Field, ...] | None]
) -> tuple[Field, ...] | None:
    """The schema Spark wrote into the footer of the parquet file at `path` (or of the
    first parquet file of the directory at `path`), None when it tells none."""
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode):
        found = _first_file(path)
        if found is None:
            return None
        path = found
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size < 12:
            return None
        return cache.get(version_of(path, info), lambda: _schema(fd, info.st_size))
    finally:
        os.close(fd)


def _first_file(directory: str) -> str | None:
    names: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if not entry.name.startswith(("_", ".")) and entry.name.endswith(".parquet"):
                names.append(entry.name)
            if len(names) >= _MAX_ENTRIES:
                break
    return os.path.join(directory, min(names)) if names else None


def _schema(fd: int, size: int) -> tuple[tuple[Field, ...] | None, int]:
    """The schema in the footer of the open file of `size` bytes (None: none or unreadable),
    and the bytes it keeps (with its place in a cache)."""
    try:
        footer = _footer(fd, size)
        text = _key_value(footer, _SPARK_SCHEMA) if footer is not None else None
        if text is None or len(text) > _MAX_SCHEMA_BYTES:
            return None, 768
        fields = spark_schema(str(text, "utf-8"))
    except ValueError:
        return None, 768
    return fields, 768 + fields_size(fields)


def _footer(fd: int, size: int) -> bytes | None:
    tail = os.pread(fd, 8, size - 8)
    length = int.from_bytes(tail[:4], "little")
    if tail[4:] != _MAGIC or length > min(_MAX_FOOTER_BYTES, size - 12):
        return None
    footer = os.pread(fd, length, size - 8 - length)
    return footer if len(footer) == length else None


def _key_value(footer: bytes, wanted: bytes) -> memoryview | None:
    """The value of key `wanted` in a FileMetaData's `key_value_metadata`."""
    reader = _Compact(footer)
    for field_id, kind in reader.fields():
        if field_id != 5 or kind != _LIST:
            reader.skip(kind, 0)
            continue
        size, element = reader.collection()
        for _ in range(size):
            if element != _STRUCT:
                reader.skip(element, 0)
                continue
            key = value = None
            for inner_id, inner in reader.fields():
                if inner == _BINARY and inner_id in (1, 2):
                    data = reader.binary()
                    key, value = (data, value) if inner_id == 1 else (key, data)
                else:
                    reader.skip(inner, 1)
            if key is not None and key.tobytes() == wanted:
                return value
        return None
    return None


class _Compact:
    """Just enough of Thrift's compact protocol to walk a struct and skip what is not read."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)  # values are views into the footer, not copies
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError("parquet footer ends early")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("parquet footer has an overlong integer")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def advance(self, count: int) -> None:
        if count < 0 or self.pos + count > len(self.data):
            raise ValueError("parquet footer ends early")
        self.pos += count

    def binary(self) -> memoryview:
        length = self.varint()
        start = self.pos
        self.advance(length)
        return self.data[start : self.pos]

    def collection(self) -> tuple[int, int]:
        """A list's or set's (size, element type)."""
        header = self.byte()
        size = header >> 4
        if size == 15:
            size = self.varint()
        if size > len(self.data) - self.pos:  # every element takes at least a byte
            raise ValueError("parquet footer lists more elements than it has bytes")
        return size, header & 0x0F

    def fields(self) -> _Fields:
        return _Fields(self)

    def skip(self, kind: int, depth: int) -> None:
        if depth > _MAX_NESTING:
            raise ValueError("parquet footer nested too deep")
        if kind in (_TRUE, _FALSE):
            return
        if kind == _BYTE:
            self.advance(1)
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.advance(8)
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            size, element = self.collection()
            for _ in range(size):
                if element in (_TRUE, _FALSE):  # a boolean element is a byte of its own
                    self.advance(1)
                else:
                    self.skip(element, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4, depth + 1)
                    self.skip(types & 0x0F, depth + 1)
        elif kind == _STRUCT:
            for _, inner in self.fields():
                self.skip(inner, depth + 1)
        else:
            raise ValueError(f"parquet footer has unknown Thrift type {kind}")


class _Fields:
    """The (field id, type) headers of one struct, up to its stop byte."""

    def __init__(self, reader: _Compact) -> None:
        self.reader = reader
        self.last = 0

    def __iter__(self) -> _Fields:
        return self

    def __next__(self) -> tuple[int, int]:
        header = self.reader.byte()
        if header == 0:
            raise StopIteration
        delta = header >> 4
        self.last = self.last + delta if delta else self.reader.zigzag()
        return self.last, header & 0x0F
