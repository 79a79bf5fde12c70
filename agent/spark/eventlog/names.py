"""The names Spark gives applications and their event-log files; nothing else in a watched
directory is an application (Spark's `EventLogFileWriters.scala`, `Utils.sanitizeDirName`).

Application ids, by who assigns them:
    local-<ms>                       local mode (`LocalSchedulerBackend`)
    app-<yyyyMMddHHmmss>-<NNNN>      a standalone master
    driver-<yyyyMMddHHmmss>-<NNNN>   a standalone master's cluster-mode driver
    application_<ms>_<NNNN>          YARN
    spark-<32 hex digits>            Kubernetes
    spark-application-<ms>           any other scheduler (`SchedulerBackend`'s default)
A log's `<name>` is the id sanitized (lower case; Spark's ids need nothing else) and, for an
application with attempts (YARN cluster mode), `_<attempt>`.

Files, `<codec>` being one Spark writes (lz4, lzf, snappy, zstd) or none:
    single   <name>[.<codec>][.inprogress]
    rolling  eventlog_v2_<name>/ holding events_<N>_<name>[.<codec>][.compact] and
             appstatus_<name>[.inprogress], each naming its directory's <name>
Any other name (`<name>.x`, `<name>.inprogress.bak`, `events_1_<name>.gz`, a directory
`<name>/`, another application's file inside a rolling directory) is not Spark's: listing
code leaves it out, so it changes no application's state. Every check reads the name once
(RE2, after an ASCII check: a listed name may hold anything).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agent import linear

ROLLING_PREFIX: Final = "eventlog_v2_"
EVENTS_PREFIX: Final = "events_"
APPSTATUS_PREFIX: Final = "appstatus_"
IN_PROGRESS: Final = ".inprogress"
COMPACT: Final = ".compact"
#: The codecs Spark writes event logs with (`CompressionCodec.shortCompressionCodecNames`).
SPARK_CODECS: Final = ("lz4", "lzf", "snappy", "zstd")
MAX_NAME: Final = 255

_ID: Final = (
    r"(?:local-[0-9]{1,20}"
    r"|app-[0-9]{14}-[0-9]{1,10}"
    r"|driver-[0-9]{14}-[0-9]{1,10}"
    r"|application_[0-9]{1,20}_[0-9]{1,10}"
    r"|spark-[0-9a-f]{32}"
    r"|spark-application-[0-9]{1,20})"
)
_APP_ID: Final = linear.compile(_ID)
_LOG_NAME: Final = linear.compile(_ID + r"(?:_[0-9]{1,10})?")
_CODEC: Final = r"(?:\.(" + "|".join(SPARK_CODECS) + r"))?"
_SINGLE: Final = linear.compile(r"(" + _ID + r"(?:_[0-9]{1,10})?)" + _CODEC + r"(\.inprogress)?")
_EVENTS: Final = linear.compile(
    r"events_([0-9]{1,9})_([a-z0-9_-]{1,200})" + _CODEC + r"(\.compact)?"
)
_APPSTATUS: Final = linear.compile(r"appstatus_([a-z0-9_-]{1,200})(\.inprogress)?")


@dataclass(frozen=True, slots=True)
class SingleName:
    """What a single-file log's name says."""

    key: str
    codec: str  # "none" when the name has no codec
    in_progress: bool


@dataclass(frozen=True, slots=True)
class EventsName:
    """What an events_<N>_<name> file's name says."""

    index: int
    codec: str
    compacted: bool


def is_app_id(text: str) -> bool:
    """Whether `text` is an application id Spark gives (as ApplicationStart writes it)."""
    return _plain(text) and _APP_ID.fullmatch(text) is not None


def is_log_name(text: str) -> bool:
    """Whether `text` is a log's `<name>`: an application id and an attempt, if any."""
    return _plain(text) and _LOG_NAME.fullmatch(text) is not None


def single(name: str) -> SingleName | None:
    """The single-file log `name` is, or None when Spark would not name one so."""
    if not _plain(name):
        return None
    found = _SINGLE.fullmatch(name)
    if found is None:
        return None
    return SingleName(found[1], found[2] or "none", found[3] is not None)


def rolling(name: str) -> str | None:
    """The `<name>` of a rolling log's directory called `name`, or None."""
    key = name.removeprefix(ROLLING_PREFIX)
    return key if key != name and is_log_name(key) else None


def events(name: str, key: str) -> EventsName | None:
    """The events file of the rolling log `key` called `name`, or None."""
    found = _EVENTS.fullmatch(name) if _plain(name) else None
    if found is None or found[2] != key:
        return None
    return EventsName(int(found[1]), found[3] or "none", found[4] is not None)


def appstatus(name: str, key: str) -> bool | None:
    """Whether the appstatus file of the rolling log `key` called `name` says the
    application is complete; None when `name` is not that file."""
    found = _APPSTATUS.fullmatch(name) if _plain(name) else None
    if found is None or found[1] != key:
        return None
    return found[2] is None


def _plain(text: str) -> bool:
    return 0 < len(text) <= MAX_NAME and text.isascii()
