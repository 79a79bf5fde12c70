"""Dataset and job naming, following the OpenLineage naming conventions, and the
OpenLineage dataset objects (with their standard facets) built from what a plan names.

Datasets (https://openlineage.io/docs/spec/naming), location -> namespace, name:

* ``/p``, ``file:/p``, ``file:///p`` -> ``file``, ``/p``; ``file://host/p`` -> ``file://host``
* ``hdfs://nn:8020/p`` -> ``hdfs://nn:8020``, ``/p`` (likewise any ``scheme://authority/p``)
* ``s3a://b/k``, ``s3n://b/k``, ``s3://b/k`` -> ``s3://b``, ``k``; ``gs://b/k`` -> ``gs://b``
* ``abfs[s]://c@a.dfs.core.windows.net/p`` -> ``abfss://c@a.dfs.core.windows.net``, ``p``
  (``wasb[s]`` -> ``wasbs``)
* ``jdbc:postgresql://h/db`` + ``s.t`` -> ``postgres://h:5432``, ``db.s.t``;
  ``jdbc:mysql://h/db`` + ``t`` -> ``mysql://h:3306``, ``db.t``

Trailing slashes are dropped, and trailing Hive-style partition directories (``k=v``) are
trimmed so a read of one partition names the table's dataset, as the OpenLineage Spark
integration's default dataset-name trimmer does. JDBC credentials and URL parameters never
reach a name.

Catalog tables are named by their location; the table itself is a ``symlinks`` entry of type
TABLE whose namespace is the Hive metastore (``hive://host:port``) when one is configured,
else the warehouse location (``file:/warehouse``), else the catalog name.

Jobs are ``{app}.{command}.{output}`` where ``app`` and ``command`` are normalized the way the
integration's ``NameNormalizer`` does (``MyXMLApp`` -> ``my_xml_app``) and ``output`` is the
table (``db_table``) or the last two directories of the output path (``data_out``).

Written datasets carry a ``columnLineage`` facet when their plan's column lineage was
followed (`lineage`), its input fields named like the input datasets and bounded by
`columnfacet`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from agent.facets import PRODUCER
from agent.spark.translate.columnfacet import DEFAULT_MAX_FIELDS, column_lineage_facets

if TYPE_CHECKING:  # plans imports this module
    from agent.spark.plan.datasets import DatasetRef
    from agent.spark.plan.schema import Field

UNKNOWN_NAMESPACE: Final = "unknown"
_OL: Final = "https://openlineage.io/spec/facets/"
DATASET_FACET_URLS: Final = {
    "schema": _OL + "1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
    "dataSource": _OL + "1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
    "symlinks": _OL + "1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
    "lifecycleStateChange": _OL
    + "1-0-1/LifecycleStateChangeDatasetFacet.json#/$defs/LifecycleStateChangeDatasetFacet",
    "inputStatistics": _OL
    + "1-0-0/InputStatisticsInputDatasetFacet.json#/$defs/InputStatisticsInputDatasetFacet",
    "outputStatistics": _OL
    + "1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet",
}
_STAT_FIELDS: Final = {"rows": "rowCount", "bytes": "size", "files": "fileCount"}
#: Writes whose query runs as a nested execution (a `feeds_write` reference).
_FED_WRITES: Final = frozenset(
    {"SaveIntoDataSourceCommand", "AppendDataExecV1", "OverwriteByExpressionExecV1"}
)

_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?://(?P<authority>[^/]*))?(?P<path>.*)$")
_OBJECT_STORES: Final = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "abfs": "abfss",
    "abfss": "abfss",
    "wasb": "wasbs",
    "wasbs": "wasbs",
}
_JDBC_DEFAULTS: Final = {"postgres": "5432", "mysql": "3306"}


@dataclass(frozen=True, slots=True, order=True)
class DatasetName:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class TableIdent:
    """A catalog table as Spark prints it: `catalog`.`database`.`table` (catalog optional)."""

    table: str
    database: str | None = None
    catalog: str | None = None

    @property
    def qualified(self) -> str:
        """`database.table` (or `table`): the symlink name the integration uses."""
        return f"{self.database}.{self.table}" if self.database else self.table


@functools.lru_cache(maxsize=4096)  # the same few command and application names, per event
def normalize(text: str) -> str:
    """Snake-case a Spark application or plan-node name, as the OpenLineage integration does.

    Non-word characters at both ends go, accents are stripped, camelCase and acronym
    boundaries become word breaks, and every run of other characters becomes one `_`.
    """
    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text, flags=re.ASCII), flags=re.ASCII)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    plain = "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M"))
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", plain)
    words = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", words)
    words = re.sub(r"(\d)([A-Z])", r"\1 \2", words)
    return re.sub(r"[^a-zA-Z0-9]+", "_", words.lower())


def from_location(location: str) -> DatasetName:
    """Name the dataset stored at a Hadoop path or URI (see the module table)."""
    location = location.strip()
    if not location:
        raise ValueError("empty dataset location")
    match = _URI.match(location)
    if match is None or len(match["scheme"]) == 1:  # no scheme, or a Windows drive letter
        return DatasetName("file", _trim_path(location.replace("\\", "/"), keep_root=True))
    scheme = match["scheme"].lower()
    authority = match["authority"] or ""
    path = match["path"]
    if scheme == "file":
        namespace = f"file://{authority}" if authority and authority != "localhost" else "file"
        return DatasetName(namespace, _trim_path(path, keep_root=True))
    if scheme in _OBJECT_STORES:
        return DatasetName(
            f"{_OBJECT_STORES[scheme]}://{authority}", _trim_path(path, keep_root=False)
        )
    namespace = f"{scheme}://{authority}" if authority else scheme
    return DatasetName(namespace, _trim_path(path, keep_root=True))


def _trim_path(path: str, *, keep_root: bool) -> str:
    """Drop trailing slashes and trailing `key=value` partition directories."""
    parts = [p for p in path.split("/") if p]
    while len(parts) > 1 and parts[-1].count("=") == 1:
        parts.pop()
    if not parts:
        return "/"
    joined = "/".join(parts)
    return "/" + joined if keep_root and path.startswith("/") else joined


def from_jdbc(url: str, table: str) -> DatasetName:
    """Name a JDBC table: `jdbc:postgresql://h:p/db` + `s.t` -> (`postgres://h:p`, `db.s.t`)."""
    uri = re.sub(r"^jdbc:", "", url.strip(), flags=re.IGNORECASE)
    parts = [p for p in table.split(".") if p]
    match = re.match(
        r"^(?P<scheme>[A-Za-z][\w+:]*?)://(?P<authority>[^/?;]*)/?(?P<database>[^?;/]*)", uri
    )
    if match is None or not match["authority"]:
        return DatasetName(_strip_credentials(uri), ".".join(parts))
    scheme = match["scheme"].lower()
    # `postgresql`, `mysql:loadbalance`, `mysql+srv` name the same kinds of servers
    if scheme.startswith("postgres"):
        scheme = "postgres"
    elif scheme.startswith("mysql"):
        scheme = "mysql"
    authority = match["authority"].rsplit("@", 1)[-1].lower()
    default_port = _JDBC_DEFAULTS.get(scheme)
    if default_port:
        authority = ",".join(
            host if re.search(r":\d+$", host) else f"{host}:{default_port}"
            for host in authority.split(",")
        )
    database = match["database"]
    if database and not (scheme == "mysql" and len(parts) >= 2):
        parts.insert(0, database)
    return DatasetName(f"{scheme}://{authority}", ".".join(parts))


def _strip_credentials(uri: str) -> str:
    """A JDBC url without `user:password@`, `user/password@` (Oracle) or parameters."""
    uri = re.sub(r"//[^/@]*@", "//", uri)
    uri = re.sub(r"[\w%.$-]+/[\w%.$-]*@", "@", uri)
    return re.sub(r"[?;].*$", "", uri)


def datasource_uri(namespace: str) -> str | None:
    """The `dataSource` facet's uri for a namespace, or None when it is not a URI."""
    if namespace == "file":
        return "file:///"
    return namespace if _URI.match(namespace) and "://" in namespace else None


def parse_table_ident(text: str) -> TableIdent | None:
    """Parse `` `spark_catalog`.`db`.`t` ``, ``db.t`` or ``t``; None if it is not one."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    text = text.strip()
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1 : i + 2] == "`":  # escaped backtick inside a quoted part
                current.append("`")
                i += 1
            else:
                quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(current))
            current = []
        elif not quoted and not (ch.isalnum() or ch in "_$-"):
            return None
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    if quoted or not 1 <= len(parts) <= 3 or not all(parts):
        return None
    if len(parts) == 3:
        return TableIdent(parts[2], parts[1], parts[0])
    if len(parts) == 2:
        return TableIdent(parts[1], parts[0])
    return TableIdent(parts[0])


def default_table_location(warehouse: str, table: TableIdent) -> str:
    """Where the session catalog puts a managed table: `wh/t` or `wh/db.db/t`."""
    root = warehouse.rstrip("/")
    if table.database in (None, "default"):
        return f"{root}/{table.table}"
    return f"{root}/{table.database}.db/{table.table}"


def table_symlink_namespace(
    warehouse: str | None, metastore_uri: str | None, catalog: str | None
) -> str:
    """Namespace of a catalog table's symlink: metastore, else warehouse, else catalog name."""
    if metastore_uri:
        first = metastore_uri.split(",")[0].strip()
        match = _URI.match(first)
        if match and match["authority"]:
            return f"hive://{match['authority']}"
    if warehouse:
        located = from_location(warehouse)
        if located.namespace == "file":
            return f"file:{located.name}"
        separator = "" if located.name.startswith("/") else "/"
        return f"{located.namespace}{separator}{located.name}"
    return catalog or "spark_catalog"


def output_suffix(dataset: DatasetName, table: TableIdent | None) -> str:
    """The job-name suffix for a run's output: `db_table`, else the path's last two parts."""
    if table is not None:
        text = f"{table.database}_{table.table}" if table.database else table.table
    else:
        parts = [p for p in dataset.name.split("/") if p]
        text = "_".join(parts[-2:]) if parts else dataset.name
    return text.replace(".", "_")


def job_name(app: str, command: str | None = None, suffix: str | None = None) -> str:
    """`{app}.{command}.{suffix}` with the absent parts left out."""
    return ".".join(part for part in (app, command, suffix) if part)


# -- OpenLineage datasets -------------------------------------------------------------------

Dataset = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Catalog:
    """Where the session catalog keeps tables (`spark.sql.warehouse.dir`, Hive metastore)."""

    warehouse: str | None = None
    metastore_uris: str | None = None

    def table_location(self, table: TableIdent) -> DatasetName:
        """A table known only by name: its default location, or the table name itself."""
        if self.warehouse:
            return from_location(default_table_location(self.warehouse, table))
        return DatasetName(self.symlink_namespace(table, None), table.qualified)

    def symlink_namespace(self, table: TableIdent, located: DatasetName | None) -> str:
        """Namespace of the table's symlink; without a configured warehouse, a managed
        table's location `<warehouse>/[<db>.db/]<table>` gives the warehouse back."""
        warehouse = self.warehouse
        tail = default_table_location("", table)
        if warehouse is None and located is not None and located.name.endswith(tail):
            root = located.name[: -len(tail)]
            if root and located.namespace == "file":
                warehouse = root
            elif located.namespace != "file":
                warehouse = f"{located.namespace}/{root.lstrip('/')}".rstrip("/")
        return table_symlink_namespace(warehouse, self.metastore_uris, table.catalog)


def describe(ref: DatasetRef, catalog: Catalog) -> tuple[DatasetName, Dataset]:
    """The OpenLineage dataset for a plan reference, with schema / dataSource / symlinks /
    lifecycleStateChange facets; one that cannot be named lands in namespace `unknown`."""
    name: DatasetName | None = None
    if ref.unknown_reason is None:
        try:
            if ref.jdbc is not None:
                name = from_jdbc(*ref.jdbc)
            elif ref.location is not None:
                name = from_location(ref.location)
            elif ref.table is not None:
                name = catalog.table_location(ref.table)
        except ValueError:
            name = None
    if name is None:  # a JDBC table without its url is still named by the table
        label = ref.jdbc[1] if ref.jdbc else ref.node.strip()
        name = DatasetName(UNKNOWN_NAMESPACE, label or "unknown")
    facets: dict[str, Any] = {}
    if ref.fields:
        facets["schema"] = _facet("schema", fields=[_schema_field(f) for f in ref.fields])
    if name.namespace != UNKNOWN_NAMESPACE:
        source = _facet("dataSource", name=name.namespace)
        uri = datasource_uri(name.namespace)
        if uri:
            source["uri"] = uri
        facets["dataSource"] = source
    if ref.table is not None:
        link = {
            "namespace": catalog.symlink_namespace(ref.table, name),
            "name": ref.table.qualified,
            "type": "TABLE",
        }
        facets["symlinks"] = _facet("symlinks", identifiers=[link])
    if ref.lifecycle:
        facets["lifecycleStateChange"] = _facet(
            "lifecycleStateChange", lifecycleStateChange=ref.lifecycle
        )
    dataset: Dataset = {"namespace": name.namespace, "name": name.name}
    if facets:
        dataset["facets"] = facets
    return name, dataset


@dataclass(slots=True)
class RunDatasets:
    """The datasets of one run, merged over the plan nodes and executions that name them."""

    inputs: dict[DatasetName, Dataset] = field(default_factory=dict)
    outputs: dict[DatasetName, Dataset] = field(default_factory=dict)
    tables: dict[DatasetName, TableIdent] = field(default_factory=dict)  # output -> table
    stats: dict[tuple[str, DatasetName], dict[str, int]] = field(default_factory=dict)

    @property
    def first_output_suffix(self) -> str | None:
        """The job-name suffix of the run's first output, if it has one."""
        first = next(iter(self.outputs), None)
        return None if first is None else output_suffix(first, self.tables.get(first))

    def as_lists(self, *, statistics: bool) -> tuple[list[Dataset], list[Dataset]]:
        """`inputs` and `outputs` of a RunEvent; statistics facets on terminal events only."""
        if statistics:
            for role, datasets in (("input", self.inputs), ("output", self.outputs)):
                key = f"{role}Statistics"
                for name, dataset in datasets.items():
                    found = self.stats.get((role, name))
                    if found:
                        values = {_STAT_FIELDS[s]: found[s] for s in _STAT_FIELDS if s in found}
                        dataset[f"{role}Facets"] = {key: _facet(key, **values)}
        return list(self.inputs.values()), list(self.outputs.values())


def collect(
    refs: Iterable[tuple[DatasetRef, Mapping[int, int]]],
    catalog: Catalog,
    *,
    column_lineage_max_fields: int = DEFAULT_MAX_FIELDS,
) -> RunDatasets:
    """Merge plan references (with their execution's accumulator values) into a run's datasets.

    A CTAS names only its table; the insert it runs names the table's path. The table goes
    onto that path's dataset (symlink, lifecycle CREATE): the output at the table's default
    location, else the only output without a table of its own (a custom LOCATION).

    Outputs get their `columnLineage` facet (at most `column_lineage_max_fields` input
    fields; 0 leaves it out) from the first reference that carries lineage. A query feeding
    a write of another execution (`feeds_write`) lends its lineage, and its schema if the
    output has none, to the run's only output that writes through such a query.
    """
    run = RunDatasets()
    created: list[DatasetRef] = []
    feeding: list[DatasetRef] = []
    lineages: dict[DatasetName, DatasetRef] = {}
    fed: list[DatasetName] = []  # outputs whose query ran in a nested execution
    for ref, values in refs:
        if ref.feeds_write:
            feeding.append(ref)
            continue
        if not names_dataset(ref):
            created.append(ref)
            continue
        name, dataset = describe(ref, catalog)
        _merge(run.inputs if ref.role == "input" else run.outputs, name, dataset)
        if ref.role == "output":
            if ref.table is not None:
                run.tables.setdefault(name, ref.table)
            if ref.columns is not None:
                lineages.setdefault(name, ref)
            if ref.node.removeprefix("Execute ").split(" ", 1)[0] in _FED_WRITES:
                fed.append(name)
        total = run.stats.setdefault((ref.role, name), {})
        for stat, acc in ref.metrics.items():
            if acc in values:
                total[stat] = total.get(stat, 0) + values[acc]
    for ref in created:
        name, dataset = describe(ref, catalog)
        untabled = [n for n in run.outputs if n not in run.tables]
        target = name if name in run.outputs else untabled[0] if len(untabled) == 1 else None
        if target is None:
            _merge(run.outputs, name, dataset)
            target = name
        else:
            facets = run.outputs[target].setdefault("facets", {})
            for key in ("symlinks", "lifecycleStateChange"):
                facets[key] = dataset["facets"][key]
        if ref.table is not None:
            run.tables[target] = ref.table
    fed = [name for name in dict.fromkeys(fed) if name not in lineages]
    if feeding and len(fed) == 1:
        lineages[fed[0]] = feeding[-1]
        facets = run.outputs[fed[0]].setdefault("facets", {})
        if "schema" not in facets and feeding[-1].fields:
            facets["schema"] = _facet(
                "schema", fields=[_schema_field(f) for f in feeding[-1].fields]
            )
    _column_lineage(run, lineages, catalog, column_lineage_max_fields)
    return run


def _column_lineage(
    run: RunDatasets,
    lineages: Mapping[DatasetName, DatasetRef],
    catalog: Catalog,
    max_fields: int,
) -> None:
    names: dict[int, tuple[str, str]] = {}

    def name_of(ref: DatasetRef) -> tuple[str, str]:
        if id(ref) not in names:
            name = describe(ref, catalog)[0]
            names[id(ref)] = (name.namespace, name.name)
        return names[id(ref)]

    for output, ref in lineages.items():
        if ref.columns is None or output not in run.outputs:
            continue
        found = column_lineage_facets(ref.columns, name_of, max_fields)
        if found:
            run.outputs[output].setdefault("facets", {}).update(found)


def names_dataset(ref: DatasetRef) -> bool:
    """Whether a reference names a dataset by itself: not a CTAS table awaiting its insert,
    not a query feeding another execution's write."""
    return not ref.feeds_write and not (
        ref.role == "output"
        and ref.location is None
        and ref.jdbc is None
        and ref.unknown_reason is None
        and ref.lifecycle == "CREATE"
    )


def _merge(target: dict[DatasetName, Dataset], name: DatasetName, dataset: Dataset) -> None:
    """Union the facets of one dataset seen in several plan nodes; the first of each wins."""
    existing = target.setdefault(name, dataset)
    if existing is not dataset:
        facets = existing.setdefault("facets", {})
        for key, facet in dataset.get("facets", {}).items():
            facets.setdefault(key, facet)


def _schema_field(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name}
    if f.type is not None:
        out["type"] = f.type
    if f.fields:
        out["fields"] = [_schema_field(child) for child in f.fields]
    return out


def _facet(key: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": DATASET_FACET_URLS[key], **fields}
