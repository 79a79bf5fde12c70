"""What an Iceberg metadata file (`metadata/*.metadata.json`) tells, read in one streaming
pass and kept small: each snapshot's id, commit time and schema id in arrays, the
`current-schema-id`, and every schema of `schemas[]` (and format 1's `schema`) already in
Spark's type names.

The answers are those of the whole document as json.loads made it: the latest snapshot whose
`timestamp-ms` is in a run's window is the run's; the schema of a snapshot is the one its
`schema-id` names (else `current-schema-id`'s), the first of `schemas[]` with that id, else
`schema`; a key given twice counts once, with its last value. Only the memory differs: each
value the answers do not need is skipped as the parser goes past it, a schema is built within
`SCHEMA_BUDGET` and turned into fields at once (fields alike in several schemas kept once),
and a file with more than `MAX_SNAPSHOTS` snapshots or `KEPT_BUDGET` of fields tells nothing.
What only a file that no Iceberg writer wrote holds reads as no snapshot or no schema: a
snapshot or schema id that is no 64-bit integer, a `schema-id` or `current-schema-id` that is
an object or an array.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from agent.spark.plan.syntax.schema import Field, check_field, field_of
from agent.spark.tables.fields import SCHEMA_BUDGET, fields_size
from agent.spark.tables.jsonstream import (
    Budget,
    Event,
    Events,
    JSONError,
    Readable,
    build,
    events,
    finish,
    first_line,
    following,
    skip,
)

#: Snapshots kept of one file: a snapshot as Iceberg writes it takes 200 bytes and more, so a
#: file under the 32 MiB limit holds fewer; past this the file is a flood.
MAX_SNAPSHOTS: Final = 500_000
KEPT_BUDGET: Final = 16 * 1024 * 1024  # the fields of all of a file's schemas
_INT64: Final = range(-(2**63), 2**63)
#: Iceberg's primitive type names that Spark reads as another type (the rest are alike).
_ICEBERG_TYPES: Final = {
    "int": "integer",
    "timestamptz": "timestamp",
    "timestamp": "timestamp_ntz",
    "uuid": "string",
    "time": "long",
}
_SHARED_ENTRY: Final = 104  # a field's entry in the table of fields kept once
_UNSET: Final = object()  # a snapshot without `schema-id`
_NO_MATCH: Final = object()  # a schema id no schema can have


@dataclass(slots=True)
class Snapshots:
    """Snapshots in file order, one entry per array (a tenth of a dict's memory)."""

    ids: array[int] = field(default_factory=lambda: array("q"))
    stamps: array[int] = field(default_factory=lambda: array("q"))  # 0 when not told
    schema_ids: array[int] = field(default_factory=lambda: array("q"))
    #: per snapshot: 1 its timestamp-ms is an integer, 2 its schema-id is, 4 it has
    #: another schema-id
    flags: bytearray = field(default_factory=bytearray)

    def add(self, snapshot_id: object, stamp: object, schema_id: object) -> None:
        if isinstance(snapshot_id, bool) or not (
            isinstance(snapshot_id, int) and snapshot_id in _INT64
        ):
            return  # no question finds it
        if len(self.ids) >= MAX_SNAPSHOTS:
            raise ValueError(f"more than {MAX_SNAPSHOTS} snapshots")
        timed = isinstance(stamp, int) and stamp in _INT64
        typed = isinstance(schema_id, int) and schema_id in _INT64
        self.ids.append(snapshot_id)
        self.stamps.append(stamp if isinstance(stamp, int) and timed else 0)
        self.schema_ids.append(schema_id if isinstance(schema_id, int) and typed else 0)
        self.flags.append(timed | typed << 1 | (schema_id is not _UNSET and not typed) << 2)

    @property
    def size(self) -> int:
        return len(self.ids) * 25


@dataclass(frozen=True, slots=True)
class IcebergMetadata:
    """What the answers need of one metadata file."""

    snapshots: Snapshots
    current_schema: Hashable
    schemas: dict[Hashable, tuple[Field, ...] | None]  # None: unreadable
    legacy: tuple[Field, ...] | None  # format 1's `schema`
    kept: int  # bytes the schemas keep, about

    @property
    def size(self) -> int:
        """Bytes it keeps, about, with its place in a cache."""
        return 1024 + self.snapshots.size + self.kept

    def committed(self, start_ms: int, end_ms: int) -> str | None:
        """The id of the latest snapshot committed between `start_ms` and `end_ms` inclusive
        (of those committed at once, the last listed)."""
        best: tuple[int, int] | None = None
        snapshots = self.snapshots
        for snapshot_id, stamp, flags in zip(
            snapshots.ids, snapshots.stamps, snapshots.flags, strict=True
        ):
            if flags & 1 and start_ms <= stamp <= end_ms and (best is None or stamp >= best[0]):
                best = (stamp, snapshot_id)
        return None if best is None else str(best[1])

    def schema(self, snapshot_id: int | None) -> tuple[Field, ...] | None:
        """The schema of snapshot `snapshot_id` (when given and listed), else the current one."""
        current: Hashable = self.current_schema
        if snapshot_id is not None:
            snapshots = self.snapshots
            for i, listed in enumerate(snapshots.ids):
                if listed == snapshot_id and snapshots.flags[i] & 6:
                    current = snapshots.schema_ids[i] if snapshots.flags[i] & 2 else _NO_MATCH
        if current in self.schemas:
            return self.schemas[current]
        return self.legacy


def read_metadata(source: Readable) -> IcebergMetadata | None:
    """What the metadata file tells; None when it is JSON but not an object. ValueError when
    it is no JSON or a flood."""
    stream = events(source)
    snapshots = Snapshots()
    current: Hashable = None
    schemas: dict[Hashable, tuple[Field, ...] | None] = {}
    legacy: tuple[Field, ...] | None = None
    kept = _Kept()
    try:
        first = following(stream)
        if first[0] != "start_map":
            skip(stream, first)
            finish(stream)
            return None
        for kind, key in stream:
            if kind == "end_map":
                break
            value = following(stream)
            if key == "snapshots":
                snapshots = _snapshots(stream, value)
            elif key == "current-schema-id":
                current = _schema_id(stream, value)
            elif key == "schemas":
                schemas = _schemas(stream, value, kept)
            elif key == "schema":
                legacy = _legacy(stream, value, kept)
            else:
                skip(stream, value)
        finish(stream)
    except JSONError as error:
        raise ValueError(f"not JSON: {first_line(error)}") from None
    return IcebergMetadata(snapshots, current, schemas, legacy, kept.size)


class _Kept:
    """The fields of a file's schemas: alike ones kept once, all within `KEPT_BUDGET`."""

    def __init__(self) -> None:
        self.shared: dict[Field, Field] = {}
        self.size = 0

    def fields(self, document: dict[str, Any]) -> tuple[Field, ...] | None:
        """A schema's fields in Spark's type names, None when unreadable."""
        try:
            fields = _iceberg_struct(document, 0)
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        kept = []
        for f in fields:
            found = self.shared.setdefault(f, f)
            if found is f:
                self.size += _SHARED_ENTRY + fields_size((f,))
                if self.size > KEPT_BUDGET:
                    raise ValueError(f"the schemas take more than {KEPT_BUDGET >> 20} MiB")
            kept.append(found)
        return tuple(kept)


def _objects(stream: Events, first: Event) -> Iterator[Event]:
    """The first event of each object in the array that `first` opens, for the caller to
    read the object whole before asking for the next; anything else is skipped."""
    if first[0] != "start_array":
        skip(stream, first)
        return
    for kind, value in stream:
        if kind == "end_array":
            return
        if kind == "start_map":
            yield kind, value
        else:
            skip(stream, (kind, value))
    raise ValueError("the JSON text ends inside a value")


def _snapshots(stream: Events, first: Event) -> Snapshots:
    found = Snapshots()
    for _ in _objects(stream, first):
        snapshot_id: object = None
        stamp: object = None
        schema_id: object = _UNSET
        for inner, key in stream:
            if inner == "end_map":
                break
            member = following(stream)
            skip(stream, member)
            if key == "snapshot-id":
                snapshot_id = member[1]
            elif key == "timestamp-ms":
                stamp = member[1]
            elif key == "schema-id":
                schema_id = member[1] if member[0] not in ("start_map", "start_array") else None
        found.add(snapshot_id, stamp, schema_id)
    return found


def _schema_id(stream: Events, first: Event) -> Hashable:
    """A schema id as compared: a scalar as it is, an object or array as no schema's."""
    if first[0] in ("start_map", "start_array"):
        skip(stream, first)
        return _NO_MATCH
    value: Hashable = first[1]
    return float(value) if isinstance(value, Decimal) else value


def _schemas(stream: Events, first: Event, kept: _Kept) -> dict[Hashable, tuple[Field, ...] | None]:
    """Each schema of `schemas[]` by its id, the first of each id."""
    found: dict[Hashable, tuple[Field, ...] | None] = {}
    for opened in _objects(stream, first):
        document = build(stream, opened, Budget(SCHEMA_BUDGET, "an Iceberg schema"))
        schema_id = document.get("schema-id")
        if isinstance(schema_id, Hashable) and schema_id not in found:
            found[schema_id] = kept.fields(document)
    return found


def _legacy(stream: Events, first: Event, kept: _Kept) -> tuple[Field, ...] | None:
    """Format 1's `schema`, when it is an object."""
    if first[0] != "start_map":
        skip(stream, first)
        return None
    return kept.fields(build(stream, first, Budget(SCHEMA_BUDGET, "an Iceberg schema")))


def _iceberg_struct(struct: Any, depth: int) -> tuple[Field, ...]:
    return tuple(_iceberg_field(f["name"], f["type"], depth) for f in struct["fields"])


def _iceberg_field(name: str, kind: Any, depth: int) -> Field:
    check_field(name, depth)
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
