"""One application's event log, read and translated: what the daemon's source and `replay`
share, so that both make the same events of the same log.

`ApplicationLog.read` does the I/O (call it from a worker thread), `feed` the translation
(pure; the daemon runs its CPU-bound half, `translate`, in a worker thread too, so that no
log can hold the event loop), `finish` the look-ups in Delta and Iceberg tables' metadata of
the versions writes committed, of the catalog holding an Iceberg CREATE target and of the
tables' and parquet files' schemas (I/O again when `table_metadata_wanted`: a worker thread,
before the events go on). Both parts are the ones the source and `replay` configure from
`spark:` through `translate_options`.

Events leave through `finish` and `end` only, and there the rules every consumer relies on
hold, whatever produced the event: no schema field without a type (`untyped`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from agent.config.model import SparkConfig
from agent.spark.eventlog.layout import LogRef
from agent.spark.eventlog.reader import LogReader
from agent.spark.eventlog.records import RecordBatch, read_records
from agent.spark.follow.driver.facts import DriverFacts, driver_facts
from agent.spark.tables.metadata import DiskTableMetadata
from agent.spark.translate.datasets.untyped import drop_untyped
from agent.spark.translate.datasets.versions import Seen, TableMetadata, fill
from agent.spark.translate.facets.verdict import Verdict
from agent.spark.translate.listener import wanted
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator

Event = dict[str, Any]
#: (reason, requested by) of a `job stop` recorded for an application id, or None.
StopLookup = Callable[[str], tuple[str, str] | None]
#: The verdict of the `lineage-agent exec` run with that id, once its command ended.
VerdictLookup = Callable[[str], Verdict | None]

READ_BATCH: Final = 4 * 1024 * 1024  # decoded bytes per read
#: The errorMessage of runs still open when a finished log ends without ApplicationEnd.
LOG_ENDED: Final = "the event log ended without ApplicationEnd for this run"
_ENV: Final = b'"Event":"SparkListenerEnvironmentUpdate"'


def translate_options(
    spark: SparkConfig, namespace: str, *, await_verdict: bool = False
) -> TranslateOptions:
    """The translator's options from the `spark:` section and the job namespace;
    `await_verdict` for the daemon, which hears the verdicts of `lineage-agent exec`."""
    return TranslateOptions(
        namespace=namespace,
        emit_empty_executions=spark.emit_empty_executions,
        running_interval_ms=int(spark.running_interval * 1000),
        column_lineage_max_fields=spark.column_lineage_max_fields,
        await_verdict=await_verdict,
        emit_read_only_runs=spark.emit_read_only_runs,
        properties_facet=spark.properties_facet or (),
        tags=tuple(_tag(tag) for tag in spark.tags or ()),
        history_server_url=spark.history_server_url,
        streaming_batch_runs=spark.streaming_batch_runs,
        kafka_bootstrap=spark.kafka_bootstrap,
    )


def _tag(text: str) -> tuple[str, str]:
    key, _, value = text.partition(":")
    return key, value


class ApplicationLog:
    """A log's reader and its application's translator, fed in step."""

    def __init__(
        self,
        ref: LogRef,
        options: TranslateOptions,
        *,
        max_line_bytes: int,
        stop_lookup: StopLookup | None = None,
        verdict_lookup: VerdictLookup | None = None,
        table_metadata: TableMetadata | None = None,
    ) -> None:
        self.ref = ref
        self.table_metadata = table_metadata or DiskTableMetadata()
        self.tables_seen: Seen = {}  # where the application's unnamed Iceberg tables were
        self.reader = LogReader(ref, max_line_bytes=max_line_bytes)
        self.translator = ApplicationTranslator(options)
        self.driver = DriverFacts()  # where the driver listens, from the environment event
        self._stop_lookup = stop_lookup
        self._stop_checked = stop_lookup is None
        self._verdict_lookup = verdict_lookup

    @property
    def app_id(self) -> str:
        """The Spark application id, or the log's name until ApplicationStart is read."""
        return self.translator.app_id or self.ref.key

    def read(self, budget: int = READ_BATCH) -> RecordBatch:
        """The next records of the log (blocking I/O)."""
        return read_records(self.reader, budget, wanted)

    def feed(self, batch: RecordBatch) -> list[Event]:
        """Translate a batch's records in order; the RunEvents they complete."""
        return self.translate(batch) + self.settle()

    def translate(self, batch: RecordBatch) -> list[Event]:
        """The CPU-bound half of `feed`: safe in a worker thread while nothing else uses
        the translator, given a `stop_lookup` that is safe there too."""
        translator = self.translator
        events: list[Event] = []
        for line, record in batch.records:
            if _ENV in line[:64]:
                self.driver = driver_facts(record)
            events.extend(translator.feed(record))
            if not self._stop_checked and translator.app_id is not None:
                # A stop recorded before this log was (re)read applies from here on.
                self._stop_checked = True
                assert self._stop_lookup is not None
                request = self._stop_lookup(translator.app_id)
                if request is not None:
                    translator.request_stop(reason=request[0], requested_by=request[1])
        return events

    def settle(self) -> list[Event]:
        """The other half of `feed`: an application held at ApplicationEnd ends once the
        verdict of its `lineage-agent exec` is there (a look into the state database)."""
        translator = self.translator
        exec_id = translator.exec_id
        if self._verdict_lookup is not None and translator.awaiting_verdict and exec_id:
            # Looked up at every feed: it may have come before the log or while it waited.
            verdict = self._verdict_lookup(exec_id)
            if verdict is not None:
                return translator.settle(verdict)
        return []

    @property
    def table_metadata_wanted(self) -> bool:
        """Whether `finish` has tables' metadata to look up (blocking I/O)."""
        return bool(self.translator.tables)

    def finish(self, events: list[Event]) -> list[Event]:
        """The events `feed` (or `translate` and `settle`) returned since the last call, as
        they leave: with the committed table versions, the places of Iceberg CREATE targets
        and the schemas the tables' metadata and parquet footers tell (blocking I/O when
        `table_metadata_wanted`), and no schema field without a type."""
        if self.translator.tables:
            requests = list(self.translator.tables)
            self.translator.tables.clear()
            fill(requests, self.table_metadata, self.tables_seen)
        return [drop_untyped(event) for event in events]

    def take_warnings(self) -> list[str]:
        """What the translator did not understand since the last call."""
        warnings = list(self.translator.warnings)
        self.translator.warnings.clear()
        return warnings

    def take_malformed(self) -> list[tuple[str, str]]:
        """The malformed events the translator skipped since the last call: (event kind,
        the required field it lacks)."""
        malformed = list(self.translator.malformed)
        self.translator.malformed.clear()
        return malformed

    def end(self, *, cause: Literal["driver_lost", "stopped"], message: str) -> list[Event]:
        """Close the runs still open, at the log's last modification time; a lost driver's
        application says how its `lineage-agent exec` command ended, when that is known."""
        exec_id = self.translator.exec_id
        verdict = None
        if cause == "driver_lost" and exec_id and self._verdict_lookup is not None:
            verdict = self._verdict_lookup(exec_id)
        events = self.translator.close(
            cause=cause,
            time_ms=self.reader.ref.mtime_ns // 1_000_000,
            message=message,
            verdict=verdict,
        )
        return [drop_untyped(event) for event in events]

    def close(self) -> None:
        self.reader.close()
