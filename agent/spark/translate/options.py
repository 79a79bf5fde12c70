"""What shapes a translation: its options, and the Spark properties it reads (the catalog's
location, the scheduler run that launched the application; `appfacets` adds those of the
application facet, the options the allow-listed ones)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent.spark.translate.datasets.columnfacet import DEFAULT_MAX_FIELDS
from agent.spark.translate.execprops import PARENT, ROOT_PARENT
from agent.spark.translate.facets.events import RunRef, parent_facet
from agent.spark.translate.facets.verdict import PROPERTIES as EXEC_PROPERTIES
from agent.spark.translate.facets.verdict import scheduler_run
from agent.spark.translate.model import Run
from agent.spark.translate.naming import Catalog, IcebergCatalog
from agent.spark.translate.values import as_uuid

#: The Spark properties the translator keeps from the environment event.
PROPERTIES: Final = frozenset(
    {
        "spark.app.name",
        "spark.sql.warehouse.dir",
        "spark.hadoop.hive.metastore.uris",
        "hive.metastore.uris",
        "spark.openlineage.appName",
        "spark.openlineage.namespace",
        "spark.openlineage.job.tags",
        "spark.openlineage.run.tags",
        "spark.openlineage.parentJobNamespace",
        "spark.openlineage.parentJobName",
        "spark.openlineage.parentRunId",
        "spark.openlineage.rootParentJobNamespace",
        "spark.openlineage.rootParentJobName",
        "spark.openlineage.rootParentRunId",
        *EXEC_PROPERTIES,
    }
)


#: The OpenLineage Spark listener's tags of the application's jobs and runs.
JOB_TAGS: Final = "spark.openlineage.job.tags"
RUN_TAGS: Final = "spark.openlineage.run.tags"

#: Spark properties kept by prefix: the session's catalogs (`spark.sql.catalog.<name>[.key]`).
PROPERTY_PREFIXES: Final = ("spark.sql.catalog.",)
_ICEBERG_CATALOGS: Final = ("org.apache.iceberg.spark.SparkCatalog",)
#: Iceberg catalogs that place a table at `<warehouse>/<namespace>/<table>` by default.
_WAREHOUSE_LAYOUT: Final = (
    "org.apache.iceberg.hadoop.HadoopCatalog",
    "org.apache.iceberg.jdbc.JdbcCatalog",
)


@dataclass(frozen=True, slots=True)
class TranslateOptions:
    namespace: str  # job namespace
    emit_empty_executions: bool = False  # SQL executions with no datasets
    running_interval_ms: int = 0  # RUNNING events, 0 = off (driven by Spark timestamps)
    # input-field entries a columnLineage facet may carry; 0 leaves the facet out
    column_lineage_max_fields: int = DEFAULT_MAX_FIELDS
    # bootstrap servers of Kafka reads, whose plans never show them; None: what else the
    # application's log names (`brokers`), else unknown
    kafka_bootstrap: str | None = None
    # hold the terminal event of an application run by `lineage-agent exec` at ApplicationEnd
    # until `settle` gives the command's verdict (the daemon); off, it ends as Spark logged it
    await_verdict: bool = False
    # runs of actions that read and write nothing (count, collect, show, toPandas)
    emit_read_only_runs: bool = False
    # the Spark properties the `lineageAgent_sparkProperties` facet may show
    properties_facet: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()  # the `tags` job facet of every run
    history_server_url: str | None = None  # the application facet's `historyUrl` base
    # each streaming micro-batch as a child run of its query run (off: folded into it)
    streaming_batch_runs: bool = False


def catalog_of(props: Mapping[str, str], kafka_bootstrap: str | None = None) -> Catalog:
    """Where the session keeps tables: the warehouse, the Hive metastore, the Iceberg
    catalogs; and the Kafka servers of reads (`brokers`: their plans never show them)."""
    iceberg = tuple(_iceberg_catalogs(props))
    return Catalog(
        props.get("spark.sql.warehouse.dir"),
        props.get("spark.hadoop.hive.metastore.uris") or props.get("hive.metastore.uris"),
        iceberg,
        kafka_bootstrap,
        tuple(_other_catalogs(props, {c.name for c in iceberg})),
    )


def _iceberg_catalogs(props: Mapping[str, str]) -> list[IcebergCatalog]:
    """`spark.sql.catalog.<name> = org.apache.iceberg.spark.SparkCatalog`, in name order;
    the warehouse only for kinds whose tables sit under it (`type=hadoop`, `JdbcCatalog`)."""
    found = []
    for key in sorted(props):
        name = key.removeprefix("spark.sql.catalog.")
        if name == key or "." in name or props[key] not in _ICEBERG_CATALOGS:
            continue
        kind = props.get(f"{key}.type", "")
        impl = props.get(f"{key}.catalog-impl", "")
        laid_out = kind == "hadoop" or impl in _WAREHOUSE_LAYOUT
        found.append(IcebergCatalog(name, props.get(f"{key}.warehouse") if laid_out else None))
    return found


def _other_catalogs(props: Mapping[str, str], iceberg: set[str]) -> list[str]:
    """The session's other V2 catalogs (`spark.sql.catalog.<name>`, not the session catalog),
    in name order: their tables are named, their locations are not in the log."""
    prefix = "spark.sql.catalog."
    names = (key.removeprefix(prefix) for key in sorted(props) if key.startswith(prefix))
    return [n for n in names if n and "." not in n and n != "spark_catalog" and n not in iceberg]


def parent_of(run: Run, app: RunRef, props: Mapping[str, str]) -> dict[str, Any] | None:
    """The `parent` facet: children point at the application `app`; the application at the
    scheduler run that launched it, when `spark.openlineage.parent*` / `rootParent*`
    properties say so, else when `lineage-agent exec` found it in the scheduler's environment
    (`verdict`). The root is the scheduler's root run, else its parent run, else the
    application."""
    external, root = _scheduler(props)
    if run.kind == "application":
        return None if external is None else parent_facet(external, root)
    return parent_facet(app, root)


def _scheduler(props: Mapping[str, str]) -> tuple[RunRef | None, RunRef | None]:
    """The scheduler's parent run and root run, from one source: the OpenLineage properties
    when they name a parent, else what `lineage-agent exec` passed."""
    external = _external_run(props, "parent")
    if external is not None:
        return external, _external_run(props, "rootParent") or external
    external = scheduler_run(props.get(PARENT))
    if external is not None:
        return external, scheduler_run(props.get(ROOT_PARENT)) or external
    return None, _external_run(props, "rootParent")


def _external_run(props: Mapping[str, str], prefix: str) -> RunRef | None:
    namespace = props.get(f"spark.openlineage.{prefix}JobNamespace")
    name = props.get(f"spark.openlineage.{prefix}JobName")
    run_id = as_uuid(props.get(f"spark.openlineage.{prefix}RunId"))
    return RunRef(namespace, name, run_id) if namespace and name and run_id else None
