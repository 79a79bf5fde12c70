"""Spark listener events as raw event-log lines: which ones the translator needs.

The translator reads a handful of event kinds; the bulk of a log (task starts, successful
task ends, stage submissions, executor and block-manager events) is never parsed at all.
"""

from __future__ import annotations

from typing import Final

_PREFIX: Final = b'{"Event":"'
_WANTED_PREFIXES: Final = tuple(
    _PREFIX + name.encode() + b'"'
    for name in (
        "SparkListenerLogStart",
        "SparkListenerEnvironmentUpdate",
        "SparkListenerApplicationStart",
        "SparkListenerApplicationEnd",
        "SparkListenerJobStart",
        "SparkListenerJobEnd",
        "SparkListenerStageCompleted",
        "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
        "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd",
        "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate",
        "org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent",
    )
)
_TASK_END: Final = _PREFIX + b'SparkListenerTaskEnd"'
_TASK_SUCCESS: Final = b'"Task End Reason":{"Reason":"Success"'


def wanted(line: bytes) -> bool:
    """Cheap byte-level test: does this raw log line need json parsing at all?

    Spark writes compact JSON with `Event` first, so the first bytes name the event. Task
    starts, successful task ends, stage submissions, executor and block-manager events (most
    of a log) are skipped. Lines in any other shape are passed on for the parser to judge.
    """
    if not line.startswith(_PREFIX):
        return True
    if line.startswith(_TASK_END):
        # the reason sits ~130 bytes in; were a later Spark to move it, every TaskEnd is wanted
        return line.find(_TASK_SUCCESS, 0, 512) < 0
    return line.startswith(_WANTED_PREFIXES)
