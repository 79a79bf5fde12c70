"""The lifecycle of runs: one START, RUNNING at the interval, one terminal event. Pure.

`Lifecycle` owns what every kind of run shares while an application is translated: the
Spark clock (the latest timestamp seen), the application run (every child's `parent`), a
`job stop` request and the summaries of finished runs that `snapshot` shows. The translator
decides when a run starts and ends; this module builds the events and keeps the rules that
hold for all of them: START first, never an event before its run's START or last RUNNING,
RUNNING events in between when `running_interval_ms` > 0, triggered by events whose
timestamp passed the interval. After `job stop` every run that ends FAIL or ABORT (the
shutdown's doing) ends ABORT with `stopped by <who>: <reason>` as its error, followed by
`; it failed first: <error>` when its own failure (not a shutdown or cancellation) ended it.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agent.spark.plan.datasets import TableFormat
from agent.spark.translate.datasets.brokers import KafkaServers
from agent.spark.translate.datasets.rundatasets import RunDatasets
from agent.spark.translate.datasets.schemas import KnownSchemas
from agent.spark.translate.datasets.versions import (
    PlaceRequest,
    SchemaRequest,
    TableRequest,
    VersionRequest,
)
from agent.spark.translate.facets.appfacets import (
    Redaction,
    application_details,
    listener_tags,
    redaction,
    spark_properties,
    sql_facet,
    tags_facet,
)
from agent.spark.translate.facets.events import MAX_MS, RunRef, run_datasets, run_event
from agent.spark.translate.model import Failure, Run, RunSummary, summary
from agent.spark.translate.naming import UNKNOWN_NAMESPACE, Catalog
from agent.spark.translate.options import (
    JOB_TAGS,
    RUN_TAGS,
    TranslateOptions,
    catalog_of,
    parent_of,
)

Event = dict[str, Any]

_FINISHED_KEPT: Final = 256  # finished child runs that `snapshot` still shows
_FORMATS: Final[dict[str, TableFormat]] = {"delta": "delta", "iceberg": "iceberg"}


class Lifecycle:
    """Builds the RunEvents of one application's runs; see the module docstring."""

    def __init__(
        self, options: TranslateOptions, props: Mapping[str, str], warnings: list[str]
    ) -> None:
        self.options = options
        self.props = props  # the application's properties, as the translator gathers them
        self.warnings = warnings  # the translator's: the caller drains and logs them
        self._redaction: Redaction | None = None  # of the properties facet, once compiled
        self.app: Run | None = None
        self.spark_version: str | None = None
        self.clock = 0  # the latest Spark timestamp seen
        self.stop: tuple[str, str] | None = None  # (reason, requested by)
        self.last: Failure | None = None  # outcome of the last job or execution to finish
        # (app id, attempt, name) and user of the application, for its details facet
        self.identity: tuple[tuple[str, str | None, str], str | None] | None = None
        self.done: collections.deque[RunSummary] = collections.deque(maxlen=_FINISHED_KEPT)
        # what the table metadata on disk tells: the caller drains and fills these
        self.tables: list[TableRequest] = []
        self.schemas = KnownSchemas()  # what the application showed of its datasets' schemas
        self.kafka_servers = KafkaServers(options.kafka_bootstrap)  # of reads, learned in order

    @property
    def namespace(self) -> str:
        """The job namespace of this application's runs: its `spark.openlineage.namespace`,
        as the OpenLineage Spark listener takes it, else the configured one."""
        own = self.props.get("spark.openlineage.namespace", "").strip()
        return own or self.options.namespace

    @property
    def app_ids(self) -> tuple[str, str | None] | None:
        """The application id and attempt, once ApplicationStart was read."""
        return self.identity[0][:2] if self.identity is not None else None

    def tick(self, time_ms: int | None) -> int:
        """Advance the Spark clock to an event's time; an event without one happens 'now'."""
        if time_ms is None:
            return self.clock
        time_ms = min(max(time_ms, 0), MAX_MS)
        self.clock = max(self.clock, time_ms)
        return time_ms

    def start(self, run: Run, out: list[Event]) -> None:
        run.started = True
        run.kafka_servers = self.kafka_servers.servers  # its names stay those of its START
        run.last_emit_ms = run.start_ms
        out.append(self.event("START", run, run.start_ms, None))

    def end(
        self, run: Run, end: int, state: str, failure: Failure | None, out: list[Event]
    ) -> None:
        """The run's one terminal event (the run has STARTed)."""
        if self.stop is not None and state in ("FAIL", "ABORT"):
            state, failure = "ABORT", self.stopped(failure)  # the stop's doing, with its reason
        run.state = state
        run.end_ms = max(end, run.last_emit_ms)  # never before its START or last RUNNING
        run.error = failure.message if failure and failure.message else None
        out.append(self.event(state, run, run.end_ms, failure))
        if run.kind != "application":
            self.done.append(summary(run))

    def stopped(self, failure: Failure | None) -> Failure:
        """A run ended after `job stop`: the stop's reason, then any error of its own."""
        assert self.stop is not None
        reason, by = self.stop
        message = f"stopped by {by}: {reason}"
        if failure is None or failure.outcome != "failed" or failure.message == message:
            return Failure("cancelled", message)
        return Failure("cancelled", f"{message}; it failed first: {failure.message}", failure.stack)

    def running(self, runs: Iterable[Run], out: list[Event]) -> None:
        """RUNNING for every started run whose last event is `running_interval_ms` old."""
        interval = self.options.running_interval_ms
        if interval <= 0:
            return
        for run in runs:
            if run.started and self.clock - run.last_emit_ms >= interval:
                run.last_emit_ms = self.clock
                out.append(self.event("RUNNING", run, self.clock, None))

    def event(self, event_type: str, run: Run, time_ms: int, failure: Failure | None) -> Event:
        catalog = self._catalog(run)
        datasets = run_datasets(run, catalog, self.options.column_lineage_max_fields)
        self.schemas.complete(datasets)
        run.inputs, run.outputs = tuple(datasets.inputs), tuple(datasets.outputs)
        event = run_event(
            event_type,
            run,
            time_ms,
            namespace=self.namespace,
            spark_version=self.spark_version,
            datasets=datasets,
            parent=self._parent_facet(run),
            failure=failure,
            run_facets=self._run_facets(run),
            job_facets=self._job_facets(run),
        )
        self._table_requests(event, event_type, run, time_ms, datasets, catalog)
        return event

    def _table_requests(
        self,
        event: Event,
        event_type: str,
        run: Run,
        time_ms: int,
        datasets: RunDatasets,
        catalog: Catalog,
    ) -> None:
        """What the metadata of the event's Delta and Iceberg tables on a local file system
        may add: which catalog holds an unplaced Iceberg output, the version a COMPLETE
        write committed, the tables' schemas."""
        window = (run.start_ms, time_ms) if event_type == "COMPLETE" else None
        for name, table in datasets.tables.items():  # an Iceberg CREATE / CTAS: which catalog
            places = catalog.iceberg_places(table)
            output = datasets.outputs.get(name)
            if (
                output is not None
                and name.namespace == UNKNOWN_NAMESPACE
                and datasets.tables_of.get(name) == "iceberg"
                and places
                and all(place.namespace == "file" for place, _ in places)  # on this disk
            ):
                terminal = event_type in ("COMPLETE", "FAIL", "ABORT")
                self.tables.append(PlaceRequest(output, "iceberg", places, window, event, terminal))
        for name, fmt in datasets.tables_of.items():
            if name.namespace != "file" or fmt not in _FORMATS:
                continue
            for whole, role in ((True, datasets.inputs), (False, datasets.outputs)):
                dataset = role.get(name)
                if dataset is not None and "schema" in dataset.get("facets", {}):
                    read = dataset["facets"].get("version", {}) if whole else {}
                    request = SchemaRequest(
                        event, dataset, _FORMATS[fmt], name.name, whole, read.get("datasetVersion")
                    )
                    self.tables.append(request)
            if event_type == "COMPLETE" and name in datasets.outputs:  # see `versions`
                self.tables.append(
                    VersionRequest(
                        datasets.outputs[name], _FORMATS[fmt], name.name, run.start_ms, time_ms
                    )
                )
        for name, fmt in datasets.files_of.items():  # a scan lists only the columns it reads
            dataset = datasets.inputs.get(name)
            if dataset is None or name.namespace != "file" or fmt != "parquet":
                continue
            if "schema" in dataset.get("facets", {}):
                self.tables.append(SchemaRequest(event, dataset, "parquet", name.name, True))
        for name, dataset in datasets.outputs.items():  # rows of local data print no types:
            # Spark wrote them into the files' footers (a file sink's format is not in the log)
            parquet = datasets.files_of.get(name, "parquet") == "parquet"
            local = name.namespace == "file" and name not in datasets.tables_of
            if parquet and local and _untyped(dataset):
                self.tables.append(SchemaRequest(event, dataset, "parquet", name.name, False))

    def _run_facets(self, run: Run) -> dict[str, Any]:
        """The application run's details and allow-listed properties."""
        facets: dict[str, Any] = {}
        run_tags = tags_facet((), listener_tags(self.props.get(RUN_TAGS)), run=True)
        if run_tags is not None:
            facets["tags"] = run_tags
        if run.kind != "application" or self.identity is None:
            return facets
        ids, user = self.identity
        history = self.options.history_server_url
        facets["lineageAgent_application"] = application_details(ids, user, self.props, history)
        allowed = self.options.properties_facet
        shown = spark_properties(self.props, allowed, self._hidden()) if allowed else None
        if shown is not None:
            facets["lineageAgent_sparkProperties"] = shown
        return facets

    def _hidden(self) -> Redaction:
        """What hides properties from the facet, compiled once for the application's
        `spark.redaction.regex`; a pattern RE2 cannot compile is warned about once."""
        own = self.props.get("spark.redaction.regex")
        if self._redaction is None or self._redaction.own != own:
            self._redaction = redaction(own)
            if self._redaction.problem is not None:
                self.warnings.append(self._redaction.problem)
        return self._redaction

    def _job_facets(self, run: Run) -> dict[str, Any]:
        """The statement of a run a SQL shell ran, and the configured tags."""
        facets: dict[str, Any] = {}
        if run.sql:
            facets["sql"] = sql_facet(run.sql)
        tags = tags_facet(self.options.tags, listener_tags(self.props.get(JOB_TAGS)))
        if tags is not None:
            facets["tags"] = tags
        return facets

    def datasets(self, run: Run) -> RunDatasets:
        return run_datasets(run, self._catalog(run), self.options.column_lineage_max_fields)

    def _catalog(self, run: Run) -> Catalog:
        """The session's catalog as the run names datasets: its Kafka reads on the servers
        known at its START, so that its events name them alike."""
        servers = run.kafka_servers if run.started else self.kafka_servers.servers
        return catalog_of(self.props, servers)

    def _parent_facet(self, run: Run) -> dict[str, Any] | None:
        assert self.app is not None
        app = RunRef(self.namespace, self.app.job_name, self.app.run_id)
        found = parent_of(run, app, self.props)
        if found is not None and run.query is not None:  # a micro-batch: its query's child
            found["run"] = {"runId": run.query.run_id}
            found["job"] = {"namespace": self.namespace, "name": run.query.job_name}
        return found


def _untyped(dataset: dict[str, Any]) -> bool:
    """Whether a dataset's schema facet has a field without a type."""
    fields = dataset.get("facets", {}).get("schema", {}).get("fields", ())
    return any(isinstance(f, dict) and "type" not in f for f in fields)
