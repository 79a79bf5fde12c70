"""The JDBC urls one application's log shows, to name the JDBC tables whose plan node does
not print theirs. Pure.

Spark prints a JDBC url in a V1 write (`SaveIntoDataSourceCommand`'s options, unless
`spark.sql.redaction.options.regex` hides it), never in a read (`Scan JDBCRelation(t)`; a V2
JDBC catalog's scan names its catalog) nor in a write through a V2 JDBC catalog
(`JDBCTable(t, ..., JDBCOptions@hash)`, without the catalog's name). `JdbcUrls` keeps, in
log order:

* the url each table was named with (`learn`): a plan reference that carries its url;
* the V2 JDBC catalogs: `spark.sql.catalog.<name>` = `...JDBCTableCatalog` with its
  `spark.sql.catalog.<name>.url`, from the environment's Spark properties and from the
  `modifiedConfigs` of SQL executions (a catalog configured at run time).

A reference without its url (`resolve`) takes: for a scan of a V2 catalog's table
(`Scan JDBC v1 Relation from v2 scan <catalog>.<table>`), its catalog's url; for a write
through a V2 catalog (its plan names no catalog), the url of the only JDBC catalog, else of
the one catalog whose url the log showed earlier for the same table; for any other, the one
url the log showed earlier for the same table (none, or several: it stays `unknown`).
Resolution happens when a plan is read, so what a run names never changes between its
START and its end; a table read before any event names its url stays `unknown`. Urls are
kept without credentials and parameters (`jdbc_source`): no secret is held, named or logged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.touched.writes import V2_WRITES
from agent.spark.translate.naming import jdbc_source

_CATALOG: Final = "spark.sql.catalog."
_JDBC_CATALOG: Final = "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"


class JdbcUrls:
    """JDBC urls known so far in one application; see the module docstring."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self._props = props  # the application's Spark properties, as the translator keeps them
        self._runtime: dict[str, str] = {}  # `spark.sql.catalog.*` of modifiedConfigs
        self._tables: dict[str, set[str]] = {}  # table (lower case) -> urls it was named with

    def configure(self, modified: object) -> None:
        """Take the catalogs an execution's `modifiedConfigs` configure (latest wins)."""
        if not isinstance(modified, Mapping):
            return
        for key, value in modified.items():
            if isinstance(key, str) and key.startswith(_CATALOG) and isinstance(value, str):
                self._runtime[key] = value

    def learn(self, ref: DatasetRef) -> None:
        """Remember the url a reference names its JDBC table with."""
        if ref.jdbc is not None and ref.jdbc[0] and ref.unknown_reason is None:
            source = jdbc_source(ref.jdbc[0])
            if source:
                self._tables.setdefault(_key(ref.jdbc[1]), set()).add(source)

    def url_of(self, ref: DatasetRef) -> str | None:
        """The url of a JDBC reference printed without one, when the log tells it."""
        if ref.jdbc is None or ref.jdbc[0] or ref.feeds_write:
            return None
        if ref.jdbc_catalog is not None:
            return self.catalog_urls().get(ref.jdbc_catalog)
        urls = self._tables.get(_key(ref.jdbc[1]), set())
        if ref.role == "output" and ref.node.split(" ", 1)[0] in V2_WRITES:
            catalogs = set(self.catalog_urls().values())
            if len(catalogs) == 1:
                return next(iter(catalogs))
            if catalogs:  # the plan names no catalog: the one whose url the table had
                urls = urls & catalogs
        return next(iter(urls)) if len(urls) == 1 else None

    def resolve(self, ref: DatasetRef) -> DatasetRef:
        """The reference with its JDBC url, and those of the scans its column lineage reads,
        filled in from what the log showed; the same reference when nothing changes."""
        url = self.url_of(ref)
        if url is not None and ref.jdbc is not None:
            ref = dataclasses.replace(ref, jdbc=(url, ref.jdbc[1]), unknown_reason=None)
        columns = ref.columns
        if columns is not None:
            inputs = {op: tuple(map(self.resolve, refs)) for op, refs in columns.inputs.items()}
            if inputs != columns.inputs:
                ref = dataclasses.replace(ref, columns=dataclasses.replace(columns, inputs=inputs))
        return ref

    def catalog_urls(self) -> dict[str, str]:
        """The V2 JDBC catalogs configured so far: name -> url without credentials."""
        config = {k: v for k, v in self._props.items() if k.startswith(_CATALOG)}
        config.update(self._runtime)
        found: dict[str, str] = {}
        for key, value in config.items():
            name = key.removeprefix(_CATALOG)
            if "." in name or value != _JDBC_CATALOG:
                continue
            source = jdbc_source(config.get(f"{key}.url", ""))
            if source:
                found[name] = source
        return found


def _key(table: str) -> str:
    """Table names as SQL compares unquoted ones: case-insensitively."""
    return table.strip().lower()
