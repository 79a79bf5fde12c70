"""Dataset and job naming, following the OpenLineage naming conventions.

Datasets (https://openlineage.io/docs/spec/naming), location -> namespace, name:

* ``/p``, ``file:/p``, ``file:///p`` -> ``file``, ``/p``; ``file://host/p`` -> ``file://host``
* ``hdfs://nn:8020/p`` -> ``hdfs://nn:8020``, ``/p`` (likewise any ``scheme://authority/p``)
* ``s3a://b/k``, ``s3n://b/k``, ``s3://b/k`` -> ``s3://b``, ``k``; ``gs://b/k`` -> ``gs://b``
* ``abfs[s]://c@a.dfs.core.windows.net/p`` -> ``abfss://c@a.dfs.core.windows.net``, ``p``
  (``wasb[s]`` -> ``wasbs``)
* ``jdbc:postgresql://h/db`` + ``s.t`` -> ``postgres://h:5432``, ``db.s.t``;
  ``jdbc:mysql://h/db`` + ``t`` -> ``mysql://h:3306``, ``db.t``

* Kafka topic ``t`` on bootstrap servers ``h1:9092,h2:9092`` -> ``kafka://h1:9092``, ``t``
  (``kafka://unknown`` when the servers are not known: a read's plan never names them, and
  `brokers` finds them elsewhere in the application's log only when it names them)

Trailing slashes are dropped, and trailing Hive-style partition directories (``k=v``) are
trimmed so a read of one partition names the table's dataset, as the OpenLineage Spark
integration's default dataset-name trimmer does. JDBC credentials and URL parameters never
reach a name.

Catalog tables are named by their location; the table itself is a ``symlinks`` entry of type
TABLE whose namespace is the Hive metastore (``hive://host:port``) when one is configured,
else the warehouse location (``file:/warehouse``), else the catalog name.

Jobs are ``{app}.{command}.{output}`` where ``app`` and ``command`` are normalized the way the
integration's ``NameNormalizer`` does (``MyXMLApp`` -> ``my_xml_app``) and ``output`` is the
table (``db_table``) or the last two directories of the output path (``data_out``). A
read-only run (an action that writes nothing) is ``{app}.{action}.{input}``: the action
(``count``, ``collect``, ``show``) and what it read, named like an output.

Within one application no two different steps share a job name (`JobNames`): a step is a
name plus what it ran (the plan's command: `collect` and `take` of one DataFrame differ
there) and the datasets it reads and writes. The first step to claim a name keeps it, a
later *different* step with the same name gets ``_2``, ``_3``, ... in the order the steps
first ran; the same step run again (same name, same datasets) is another run of the same
job. A name has at most `MAX_VARIANTS` variants: a long-running application that repeats a
step over ever new inputs (a loop over daily files) runs the 100th and later ones as
``_100``, so its names and the memory they take stay bounded. Programs run their steps in
program order, so the same step of the same program gets the same name on every run, and
Marquez keeps its history.

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agent import linear
from agent.spark.plan.syntax.tables import TableIdent, default_table_location

UNKNOWN_NAMESPACE: Final = "unknown"
KAFKA_UNKNOWN: Final = "kafka://unknown"

#: Locations and urls are stripped: `$` is their end.
_URI = linear.compile(
    r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?://(?P<authority>[^/]*))?(?P<path>.*)$"
)
_JDBC_PREFIX = linear.compile(r"(?i)^jdbc:")
_JDBC_URI = linear.compile(
    rf"^(?P<scheme>[A-Za-z][{linear.WORD}+:]*?)://(?P<authority>[^/?;]*)/?(?P<database>[^?;/]*)"
)
_PORT = linear.compile(r":\d+$")
_USER_INFO = linear.compile(r"//[^/@]*@")
_ORACLE_USER = linear.compile(rf"[{linear.WORD}%.$-]+/[{linear.WORD}%.$-]*@")
_PARAMETERS = linear.compile(r"[?;].*$")
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


def from_kafka(servers: str | None, topic: str) -> DatasetName:
    """A Kafka topic, named after the first of its bootstrap servers (scheme dropped)."""
    first = (servers or "").split(",")[0].strip()
    first = first.split("://", 1)[-1].rstrip("/")
    return DatasetName(f"kafka://{first}" if first else KAFKA_UNKNOWN, topic)


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
    uri = _JDBC_PREFIX.sub("", url.strip())
    parts = [p for p in table.split(".") if p]
    match = _JDBC_URI.match(uri)
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
            host if _PORT.search(host) else f"{host}:{default_port}"
            for host in authority.split(",")
        )
    database = match["database"]
    if database and not (scheme == "mysql" and len(parts) >= 2):
        parts.insert(0, database)
    return DatasetName(f"{scheme}://{authority}", ".".join(parts))


def jdbc_source(url: str) -> str:
    """A JDBC url as a name may use it: without credentials and parameters; empty when
    there is none or Spark redacted it."""
    url = url.strip()
    if not url or "redacted" in url.lower():
        return ""
    uri = _JDBC_PREFIX.sub("", url)
    return "jdbc:" + _strip_credentials(uri)


def _strip_credentials(uri: str) -> str:
    """A JDBC url without `user:password@`, `user/password@` (Oracle) or parameters."""
    uri = _USER_INFO.sub("//", uri)
    uri = _ORACLE_USER.sub("@", uri)
    return _PARAMETERS.sub("", uri)


def datasource_uri(namespace: str) -> str | None:
    """The `dataSource` facet's uri for a namespace, or None when it is not a URI."""
    if namespace == "file":
        return "file:///"
    return namespace if _URI.match(namespace) and "://" in namespace else None


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


#: A step's identity beside its name: what it ran, the datasets it reads and it writes.
#: (the command, the API call that ran it, inputs, outputs): what makes two runs one step.
Step = tuple[str, str, frozenset[DatasetName], frozenset[DatasetName]]
MAX_VARIANTS: Final = 100


class JobNames:
    """The job names given in one application, each to one step (module docstring)."""

    def __init__(self) -> None:
        self._steps: dict[str, Step] = {}  # given name -> the step that holds it

    def assign(self, base: str, step: Step) -> str:
        """The name of `step`, whose plain name is `base`."""
        name, ordinal = base, 1
        while name in self._steps and self._steps[name] != step and ordinal < MAX_VARIANTS:
            ordinal += 1
            name = f"{base}_{ordinal}"
        self._steps.setdefault(name, step)
        return name


@dataclass(frozen=True, slots=True)
class IcebergCatalog:
    """An Iceberg catalog of the session (`spark.sql.catalog.<name>`): its warehouse when
    its kind places tables at `<warehouse>/<namespace>/<table>` (hadoop, JDBC), else None.
    The one place an Iceberg table is located, for batch plans and streaming alike."""

    name: str
    warehouse: str | None

    def location(self, table: TableIdent) -> str | None:
        """The table's directory `<warehouse>/<namespace path>/<table>`, when the catalog
        lays its tables out so; else None (the catalog's own store knows it, not the log)."""
        if not self.warehouse or not table.database:
            return None
        return "/".join([self.warehouse.rstrip("/"), *table.database.split("."), table.table])

    @property
    def symlink_namespace(self) -> str:
        """Namespace of its tables' symlinks: the warehouse, else the catalog's name."""
        return table_symlink_namespace(self.warehouse, None, self.name)


@dataclass(frozen=True, slots=True)
class Catalog:
    """Where the session catalog keeps tables (`spark.sql.warehouse.dir`, Hive metastore),
    the session's Iceberg catalogs and the names of its other V2 catalogs."""

    warehouse: str | None = None
    metastore_uris: str | None = None
    iceberg: tuple[IcebergCatalog, ...] = ()
    kafka_bootstrap: str | None = None  # servers of Kafka reads (their plans never show them)
    others: tuple[str, ...] = ()  # other `spark.sql.catalog.<name>`: tables not located

    def iceberg_catalog(self, table: TableIdent, fmt: str | None) -> IcebergCatalog | None:
        """The Iceberg catalog of a table: the one it names, else the only one configured
        when the plan says the table is Iceberg's (a CTAS names no catalog)."""
        if table.catalog is not None:
            return next((c for c in self.iceberg if c.name == table.catalog), None)
        if fmt == "iceberg" and len(self.iceberg) == 1:
            return self.iceberg[0]
        return None

    def iceberg_places(self, table: TableIdent) -> tuple[tuple[DatasetName, str], ...]:
        """Where each Iceberg catalog would keep a table the plan names without its catalog
        while several are configured: (location, symlink namespace) per catalog; none when
        one of them keeps its tables where the log cannot tell (Hive, REST, Glue)."""
        if table.catalog is not None or len(self.iceberg) < 2:
            return ()
        places = [(c.location(table), c.symlink_namespace) for c in self.iceberg]
        if any(location is None for location, _ in places):
            return ()
        return tuple((from_location(location), link) for location, link in places if location)

    def table_location(self, table: TableIdent, fmt: str | None = None) -> DatasetName:
        """A table known only by name: its default location, or the table name itself."""
        iceberg = self.iceberg_catalog(table, fmt)
        if iceberg is not None:
            location = iceberg.location(table)
            if location is not None:
                return from_location(location)
            return DatasetName(iceberg.name, table.qualified)
        if fmt == "iceberg":  # several Iceberg catalogs and a name without one
            return DatasetName(UNKNOWN_NAMESPACE, table.qualified)
        if self.warehouse:
            return from_location(default_table_location(self.warehouse, table))
        return DatasetName(self.symlink_namespace(table, None), table.qualified)

    def symlink_namespace(
        self, table: TableIdent, located: DatasetName | None, fmt: str | None = None
    ) -> str:
        """Namespace of the table's symlink; without a configured warehouse, a managed
        table's location `<warehouse>/[<db>.db/]<table>` gives the warehouse back. An
        Iceberg table's is its catalog's warehouse, else the catalog's name."""
        iceberg = self.iceberg_catalog(table, fmt)
        if iceberg is not None:
            return iceberg.symlink_namespace
        if fmt == "iceberg":  # which of several Iceberg catalogs holds it, the log never says
            return UNKNOWN_NAMESPACE
        warehouse = self.warehouse
        tail = default_table_location("", table)
        if warehouse is None and located is not None and located.name.endswith(tail):
            root = located.name[: -len(tail)]
            if root and located.namespace == "file":
                warehouse = root
            elif located.namespace != "file":
                warehouse = f"{located.namespace}/{root.lstrip('/')}".rstrip("/")
        return table_symlink_namespace(warehouse, self.metastore_uris, table.catalog)
