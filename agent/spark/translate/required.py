"""The fields without which an event the translator acts on means nothing.

Spark writes every one of these fields in every event of its kind. An event without one (or
with a value of another type) was not written by Spark as it stands: a damaged line, a line
spliced in. Acting on it would change the application's state on no evidence (an
ApplicationEnd without a time would end the application "now" and everything after it would be
ignored), so such an event is malformed: the translator skips it whole and reports it, like
a corrupt line. Optional fields (ExitCode, App Name, rootExecutionId, a stage's Completion
Time, ...) are read where they are used and change nothing when they are missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from agent.spark.translate.values import as_int, as_uuid

Check = Callable[[object], bool]


def _int(value: object) -> bool:
    return as_int(value) is not None


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _uuid(value: object) -> bool:
    """A UUID in text, as Spark writes a streaming query's `id` and `runId`."""
    return isinstance(value, str) and as_uuid(value) is not None


def _section(value: object) -> bool:
    """An EnvironmentUpdate section: an object (4.x) or a list of pairs."""
    return isinstance(value, Mapping | Sequence) and not isinstance(value, str)


def _list(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


#: Per event kind (without its package), the required fields: a key path and its check.
REQUIRED: Final[dict[str, tuple[tuple[tuple[str, ...], Check], ...]]] = {
    "SparkListenerLogStart": ((("Spark Version",), _text),),
    "SparkListenerEnvironmentUpdate": ((("Spark Properties",), _section),),
    "SparkListenerApplicationStart": ((("App ID",), _text), (("Timestamp",), _int)),
    "SparkListenerApplicationEnd": ((("Timestamp",), _int),),
    "SparkListenerJobStart": ((("Job ID",), _int), (("Submission Time",), _int)),
    "SparkListenerJobEnd": (
        (("Job ID",), _int),
        (("Completion Time",), _int),
        (("Job Result", "Result"), _text),
    ),
    "SparkListenerStageCompleted": ((("Stage Info", "Stage ID"), _int),),
    "SparkListenerTaskEnd": ((("Stage ID",), _int), (("Task End Reason", "Reason"), _text)),
    "SparkListenerSQLExecutionStart": ((("executionId",), _int), (("time",), _int)),
    "SparkListenerSQLAdaptiveExecutionUpdate": ((("executionId",), _int),),
    "SparkListenerDriverAccumUpdates": ((("executionId",), _int), (("accumUpdates",), _list)),
    "SparkListenerSQLExecutionEnd": ((("executionId",), _int), (("time",), _int)),
    "StreamingQueryListener$QueryStartedEvent": ((("id",), _uuid), (("runId",), _uuid)),
    "StreamingQueryListener$QueryProgressEvent": (
        (("progress", "id"), _text),
        (("progress", "runId"), _text),
    ),
    "StreamingQueryListener$QueryIdleEvent": ((("id",), _text), (("runId",), _text)),
    "StreamingQueryListener$QueryTerminatedEvent": ((("id",), _text), (("runId",), _text)),
}


def missing_field(kind: str, event: Mapping[str, Any]) -> str | None:
    """The first required field of `event` (of kind `kind`, without its package) that is
    absent or not of the type Spark writes, as `Outer.Inner` for a nested one; None when the
    event has them all (or is of a kind without requirements)."""
    for path, check in REQUIRED.get(kind, ()):
        value: object = event
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if not check(value):
            return ".".join(path)
    return None
