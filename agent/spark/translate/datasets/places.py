"""Where one application's session-catalog tables are, as its log showed them, to name the
statements that print a table's name alone. Pure.

A session-catalog table is the dataset at its location: its default place
(`<warehouse>/[<db>.db/]<table>`) when it is managed, the `LOCATION` it was given when it is
external. DROP, TRUNCATE, ALTER and RENAME (`DropTable`, `TruncateTableCommand`,
`AlterTable…Command`, Delta's V2 forms) and a Hive table's scan print the table's name
alone; writes and reads print where the table is (`InsertIntoHadoopFsRelationCommand
file:<location>, …, <table>`, `Scan parquet <table>` with its `Location`, `HiveTempPath`,
Delta's `CatalogTable`), and so do a CREATE and a CTAS given a `LOCATION`. `TablePlaces`
keeps, in log order, where each table was last shown (`place` learns it) and gives that
location to a later reference that names the table alone, so that DDL names the dataset the
writes named:

* a CREATE or CTAS whose plan shows no location forgets the table's place: the new table
  is managed (a CTAS's insert shows the place again; the session catalog's own CREATE
  TABLE shows nothing at all, see below);
* a RENAME takes the place with it when the table was external; a managed table's place
  (its default one) moves to the new name's default place, as Spark moves its directory.
  Without a known warehouse every place is taken for an external table's;
* a DROP forgets nothing: a later CREATE of that name does.

Resolution happens when a plan is read, like `jdbc`'s: what a run names never changes
between its START and its end. What the log cannot tell: the place of a table no statement
of the application showed, such as a DROP of a table another application created, or of
one created with `CREATE TABLE … LOCATION` (the session catalog's CREATE prints neither its
columns nor its location) and never written or read: it is named at its default place,
right for a managed table, another dataset than the table's for an external one. Tables of
other catalogs (Iceberg's, JDBC's) are left alone. Bounded: the `MAX_TABLES` tables shown
most recently.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Final

from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax.tables import TableIdent, default_table_location
from agent.spark.translate.naming import from_location

#: Tables whose place an application's translator remembers (least recently shown go first).
MAX_TABLES: Final = 4096
_SESSION: Final = "spark_catalog"
_NEW: Final = frozenset({"CREATE", "OVERWRITE"})  # a CREATE, a CTAS, a REPLACE … AS SELECT

Key = tuple[str, str]  # (database, table), as SQL compares unquoted names: lower case


class TablePlaces:
    """Where the session catalog's tables were shown so far; see the module docstring."""

    def __init__(self, props: Mapping[str, str], limit: int = MAX_TABLES) -> None:
        self._props = props  # the application's Spark properties, as the translator keeps them
        self._limit = limit
        self._places: collections.OrderedDict[Key, str] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._places)

    def place(self, ref: DatasetRef) -> DatasetRef:
        """The reference with its table's known location (and a RENAME's previous one), and
        the scans its column lineage reads likewise; what it shows of a place is learnt."""
        ref = self.resolve(ref)
        key = _key(ref.table, ref.format)
        if key is None or ref.feeds_write:
            return ref
        if ref.lifecycle == "RENAME" and ref.previous is not None:
            managed = ref.previous_location is not None and self._managed(
                ref.previous, ref.previous_location
            )
            self._set(key, None if managed else ref.location)
        elif ref.location is not None:
            self._set(key, ref.location)
        elif ref.lifecycle in _NEW:
            self._set(key, None)
        return ref

    def created(self, refs: Iterable[DatasetRef]) -> None:
        """Learn where a run's CTAS put its table: its CTAS names the table alone and the
        insert it runs the path alone; a path other than the table's default place is its
        `LOCATION` when it is the run's only output without a table (as `rundatasets.collect`
        names it)."""
        refs = list(refs)
        untabled = {r.location for r in refs if _path_alone(r)}
        for ref in refs:
            key = _key(ref.table, ref.format)
            if key is None or ref.location is not None or ref.lifecycle not in _NEW:
                continue
            if ref.ddl or not _named_alone(ref) or len(untabled) != 1:
                continue
            (location,) = untabled
            assert ref.table is not None and location is not None
            self._set(key, None if self._managed(ref.table, location) else location)

    def resolve(self, ref: DatasetRef) -> DatasetRef:
        """The reference with what is known of its table's place; the same one when nothing
        is known or it names its location itself (a CREATE never takes an old place)."""
        location, before, columns = ref.location, ref.previous_location, ref.columns
        if location is None and ref.lifecycle not in _NEW and _named_alone(ref):
            if ref.lifecycle == "RENAME" and ref.previous is not None:
                before = self._known(ref.previous, ref.format)
                if before is not None and not self._managed(ref.previous, before):
                    location = before
            else:
                location = self._known(ref.table, ref.format)
        if columns is not None:
            inputs = {op: tuple(map(self.resolve, refs)) for op, refs in columns.inputs.items()}
            if inputs != columns.inputs:
                columns = dataclasses.replace(columns, inputs=inputs)
        if (location, before, columns) == (ref.location, ref.previous_location, ref.columns):
            return ref
        return dataclasses.replace(
            ref, location=location, previous_location=before, columns=columns
        )

    def _known(self, table: TableIdent | None, fmt: str | None) -> str | None:
        key = _key(table, fmt)
        return self._places.get(key) if key is not None else None

    def _set(self, key: Key, location: str | None) -> None:
        self._places.pop(key, None)
        if location is not None:
            self._places[key] = location
            while len(self._places) > self._limit:
                self._places.popitem(last=False)

    def _managed(self, table: TableIdent, location: str) -> bool:
        """Whether `location` is the table's default place in the session's warehouse."""
        warehouse = self._props.get("spark.sql.warehouse.dir")
        if not warehouse:
            return False
        try:
            default = from_location(default_table_location(warehouse, table))
            return from_location(location) == default
        except ValueError:
            return False


def _named_alone(ref: DatasetRef) -> bool:
    """A reference naming a catalog table but neither a path, a JDBC table nor a topic."""
    return (
        ref.table is not None
        and ref.jdbc is None
        and ref.kafka is None
        and ref.unknown_reason is None
        and not ref.feeds_write
    )


def _path_alone(ref: DatasetRef) -> bool:
    """An output named by its path alone (the insert a CTAS runs)."""
    return ref.role == "output" and ref.location is not None and ref.table is None


def _key(table: TableIdent | None, fmt: str | None) -> Key | None:
    """A session-catalog table's key (the current database taken to be `default`, as
    `default_table_location` does); None for any other catalog's table."""
    if table is None or fmt == "iceberg" or table.catalog not in (None, _SESSION):
        return None
    return (table.database or "default").lower(), table.table.lower()
