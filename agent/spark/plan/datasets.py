"""What a plan reads and writes, as the plan names it: the unit `read` produces and the
translator turns into OpenLineage datasets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agent.spark.plan.attributes.columns import ColumnLineage
from agent.spark.plan.attributes.dml import DmlLineage
from agent.spark.plan.syntax.schema import Field

if TYPE_CHECKING:  # naming renders these references
    from agent.spark.plan.syntax.tables import TableIdent

Role = Literal["input", "output"]
#: The table formats whose own metadata the agent reads (`agent.spark.tables`).
TableFormat = Literal["delta", "iceberg"]
#: What a schema is read from: a table's metadata, or the footer of a dataset's parquet files.
SchemaSource = Literal["delta", "iceberg", "parquet"]


@dataclass(frozen=True, slots=True)
class WrittenLineage:
    """Column lineage of one write, with the datasets each scan of the plan reads."""

    lineage: ColumnLineage
    inputs: Mapping[int, tuple[DatasetRef, ...]]  # scan operator id -> its datasets
    #: columns assigned from attributes that other executions of the statement resolve
    #: (a Delta MERGE's clauses, the query of a write through the V1 fallback or a CTAS)
    merge: DmlLineage | None = None


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """A dataset as the plan names it: by location (with its catalog table, if it is one),
    by JDBC url and table, by Kafka topic, or by table alone (a CTAS, a Hive scan, an
    Iceberg table). `unknown_reason` says
    why it cannot be named.

    A reference with `feeds_write` names no dataset: it is the result of a query that a
    write in another execution of the same run consumes (a JDBC save, a V2 write through
    the V1 fallback, a Delta write's query) and lends that write its column lineage and
    schema."""

    role: Role
    node: str
    location: str | None = None
    table: TableIdent | None = None
    jdbc: tuple[str, str] | None = None  # (url, table)
    jdbc_catalog: str | None = None  # the V2 JDBC catalog a scan names (its url: the config)
    kafka: tuple[str | None, str] | None = None  # (bootstrap servers if known, topic)
    pattern: bool = False  # Kafka `subscribePattern`: `kafka` names a pattern, not a topic
    format: str | None = None
    fields: tuple[Field, ...] = ()
    #: statistic (`rows`, `bytes`, `files`) -> accumulator id of the node's SQL metric
    metrics: Mapping[str, int] = field(default_factory=dict)
    lifecycle: str | None = None  # CREATE, OVERWRITE, DROP, TRUNCATE, RENAME, ALTER
    version: str | None = None  # the table version read (Delta version, Iceberg snapshot)
    ddl: bool = False  # table DDL (CREATE TABLE, DROP, ...): names its table without an insert
    previous: TableIdent | None = None  # RENAME: the table's name before
    previous_location: str | None = None  # RENAME: where the table was, when the log showed it
    unknown_reason: str | None = None
    #: a scan of more paths than the log lists: (paths it read, paths the log names)
    paths_cut: tuple[int, int] | None = None
    columns: WrittenLineage | None = None  # outputs: lineage of the written columns
    feeds_write: bool = False
    #: a Delta write whose query runs as a nested execution (its V1 write path): the ids of
    #: the attributes that query returns (or reads, when its top operator prints no output
    #: list), by which that execution is recognized; on the `feeds_write` reference it
    #: matched, the same ids
    query: tuple[int, ...] = ()
    #: a relation the plan prints without its files (a save's query is a logical plan:
    #: `LogicalRelation csv, [a#17, b#18], false`): the ids of its columns, by which the
    #: translator finds where the application read those files (`FileRead`)
    attribute_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FileRead:
    """A scan of files in a plan description, by the ids of the columns it outputs: Spark
    gives a relation's columns their ids once, so a plan that prints the same relation
    without its files (`DatasetRef.attribute_ids`) reads these files."""

    columns: tuple[int, ...]
    datasets: tuple[DatasetRef, ...]  # one per path, typed by the scan's read schema


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """What one plan of one execution reads and writes."""

    command: str | None  # node that names the execution, e.g. "Execute InsertInto...Command"
    datasets: tuple[DatasetRef, ...]
    notes: tuple[str, ...]  # why something could not be read; the caller adds context
    delta_logs: tuple[str, ...] = ()  # tables whose Delta transaction log the plan reads
    reads: tuple[FileRead, ...] = ()  # the file scans of the plan description

    @property
    def writes(self) -> bool:
        return any(d.role == "output" and not d.feeds_write for d in self.datasets)
