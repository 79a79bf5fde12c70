"""What reading a log could not deliver, told three ways: the skipped-lines counter (every
one), a log line (once per log and kind of damage where lines could repeat), and an incident
in the application's health."""

from __future__ import annotations

import time

import structlog

from agent.spark.eventlog.reader import Position
from agent.spark.eventlog.records import RecordBatch
from agent.spark.follow.followed import Followed
from agent.telemetry.health import HealthTracker, Incident
from agent.telemetry.metrics import Metrics

log = structlog.get_logger("agent.spark")


class LogProblems:
    """Reports the problems of the logs the Spark source follows."""

    def __init__(self, metrics: Metrics, health: HealthTracker) -> None:
        self.metrics = metrics
        self.health = health

    def report(self, app: Followed, batch: RecordBatch) -> None:
        """Count and log what the read could not deliver."""
        for detail in batch.corrupt:
            app.corrupt += 1
            self.metrics.eventlog_lines_skipped.labels(reason="corrupt_json").inc()
            if app.corrupt == 1:  # logged once per log; the metric counts every one
                position: Position | None = app.log.reader.position
                log.warning(
                    "eventlog_corrupt_line",
                    log=position.path if position else app.log.ref.path,
                    near_line=position.lines if position else None,
                    detail=detail[:200],
                )
            self.record(app, "corrupt_json", detail[:200])
        for skipped in batch.skipped:
            self.metrics.eventlog_lines_skipped.labels(reason="too_long").inc()
            log.warning(
                "eventlog_line_skipped",
                log=skipped.path,
                line=skipped.line_no,
                reason=skipped.reason,
            )
            self.record(app, "line_too_long", f"{skipped.path}:{skipped.line_no}")
        for error in batch.errors:
            self.metrics.eventlog_lines_skipped.labels(reason="read_error").inc()
            log.error(
                "eventlog_read_error", log=error.path, offset=error.offset, detail=error.detail
            )
            self.record(app, "read_error", f"{error.path}@{error.offset}: {error.detail}")

    def report_malformed(self, app: Followed, malformed: list[tuple[str, str]]) -> None:
        """Count and log the events the translator skipped as malformed (corrupt lines that
        are valid JSON); each kind of damage is logged once per log, every one counted."""
        for kind, field in malformed:
            self.metrics.eventlog_lines_skipped.labels(reason="malformed_event").inc()
            detail = f"{kind} without a valid {field}"
            if (kind, field) not in app.malformed:
                app.malformed.add((kind, field))
                log.warning(
                    "eventlog_malformed_event",
                    log=app.log.ref.path,
                    spark_event=kind,
                    field=field,
                    detail=f"{detail}: skipped, nothing changed",
                )
            self.record(app, "malformed_event", detail)

    def record(self, app: Followed, reason: str, detail: str) -> None:
        self.health.record(
            app.app_id,
            Incident(time.time(), reason, "eventlog", "", "", detail, component="eventlog"),
        )
