"""`lineage-agent replay`: Spark event logs to signed RunEvents without the daemon.

A replay reads each application's log through the Spark source's own `ApplicationLog`
(configured from `spark:` by the same `translate_options`), so it yields the events the
daemon yields for the same log: same run ids, same bytes. The translator is pure and Ed25519
is deterministic, so replaying a log twice gives byte-identical output. Logs are taken as
they are now: a finished log whose application never logged ApplicationEnd has its open runs
ended FAIL at the log's mtime, as the daemon ends them; an in-progress log is read as far as
it is written and its open runs are reported RUNNING, not ended.

What a replay does not do: it has no state database, so nothing is claimed (events the agent
already shipped are produced again, with the same run ids) and stop requests recorded by
`job stop` are unknown to it.

Sending (`replay --send`) is `agent.commands.replay_send`.

Raises ReplayError (`agent.errors`) for a LOG argument that is not an event log (missing,
unlistable, empty directory) or an output file that cannot be written (it exists, no
permission). Logs found but unreadable, and files refused, are reported per application,
not raised.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agent.commands.replay_report import AppResult, ReplayReport, runs_of
from agent.errors import ReplayError

if TYPE_CHECKING:
    from agent.config.model import SparkConfig
    from agent.delivery.signing import Signer
    from agent.spark.eventlog.layout import LogRef

# The CLI imports this module (through `replay_command`) to build its parser: the Spark, signing and
# delivery modules are imported when a replay runs, so every other command starts as fast.


StrPath = str | os.PathLike[str]
Event = dict[str, Any]
#: (logs done, logs in all, bytes read, bytes in all); bytes as stored, before decompression.
Progress = Callable[[int, int, int, int], None]

# -- finding the logs ----------------------------------------------------------------------------


def resolve(paths: Iterable[StrPath]) -> list[LogRef]:
    """The application logs that `paths` name, each once, in the order given.

    A path is a single-file log, a rolling `eventlog_v2_*` directory, or an event-log
    directory (every application in it, as `scan` finds them). Logs that are found but cannot
    be read come back with `error` set; a path that names no log raises ReplayError.
    """
    refs: list[LogRef] = []
    seen: set[str] = set()
    for path in (os.fspath(p) for p in paths):
        for ref in _refs(path):
            real = os.path.realpath(ref.path)
            if real not in seen:
                seen.add(real)
                refs.append(ref)
    return refs


def _refs(path: str) -> list[LogRef]:
    from agent.spark.eventlog.discovery import restat, scan
    from agent.spark.eventlog.layout import ROLLING_PREFIX, LogRef, parse_single_name

    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise ReplayError(f"{path}: {error.strerror}") from None
    name = os.path.basename(os.path.normpath(path))
    if stat.S_ISDIR(mode) and not name.startswith(ROLLING_PREFIX):
        try:
            refs = scan(path)
        except OSError as error:
            raise ReplayError(f"{path}: cannot list directory: {error.strerror}") from None
        if not refs:
            raise ReplayError(f"{path}: no Spark event logs in this directory")
        return refs
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise ReplayError(f"{path}: not a regular file or directory")
    # One application's log: `restat` reads it as `scan` would, without listing its neighbours.
    if stat.S_ISDIR(mode):
        probe = LogRef(name.removeprefix(ROLLING_PREFIX), "rolling", path, "none", (), False, 0, 0)
    else:
        probe = LogRef(parse_single_name(name)[0], "single", path, "none", (), False, 0, 0)
    ref = restat(probe)
    if ref is None:
        raise ReplayError(f"{path}: disappeared while it was read")
    return [ref]


# -- one application -----------------------------------------------------------------------------


class Replayer:
    """Translates, signs and writes the logs one application at a time."""

    def __init__(
        self,
        refs: Sequence[LogRef],
        *,
        namespace: str,
        signer: Signer | None,
        output_dir: StrPath | None,
        spark: SparkConfig,
        progress: Progress | None,
    ) -> None:
        from agent.spark.follow.application import translate_options
        from agent.spark.tables.metadata import DiskTableMetadata

        self.refs = refs
        self.options = translate_options(spark, namespace)
        # One for all the logs: a table several applications name is read once per version.
        self.tables = DiskTableMetadata()
        self.max_line_bytes = spark.max_line_bytes
        self.signer = signer
        self.output_dir = None if output_dir is None else os.fspath(output_dir)
        self.progress = progress
        self._done = 0
        self._read = 0
        self._total = sum(ref.size for ref in refs)

    def one(self, ref: LogRef) -> tuple[AppResult, list[Event]]:
        """The application's result and its events (unsigned dicts, in order)."""
        app, events = self._translate(ref)
        errors = list(app.errors)
        payloads: list[bytes] = []
        for event in events:
            try:
                payloads.append(self._sign(event))
            except ValueError as error:  # no translator event should get here; never skip quietly
                errors.append(f"an event of run {event['run']['runId']} cannot be signed: {error}")
        app = replace(
            app,
            errors=tuple(errors),
            digests=tuple(hashlib.sha256(p).hexdigest() for p in payloads),
        )
        if self.output_dir is not None:
            try:
                app = replace(app, output=write_lines(self.output_dir, app.file_name, payloads))
            except ReplayError as error:
                app = replace(app, errors=(*app.errors, str(error)))
        self._done += 1
        self._report(0)
        return app, events

    def _sign(self, event: Event) -> bytes:
        import orjson

        return self.signer.sign_event(event) if self.signer else orjson.dumps(event)

    def _report(self, read: int) -> None:
        self._read += read
        if self.progress is not None:
            self.progress(self._done, len(self.refs), self._read, self._total)

    def _translate(self, ref: LogRef) -> tuple[AppResult, list[Event]]:
        """Read the log as far as it is written, the way the Spark source reads it."""
        from agent.spark.follow.application import LOG_ENDED, ApplicationLog

        if ref.error is not None:
            return AppResult(ref.key, None, None, ref.path, ref.complete, (), (), (ref.error,)), []
        app_log = ApplicationLog(
            ref, self.options, max_line_bytes=self.max_line_bytes, table_metadata=self.tables
        )
        reader, translator = app_log.reader, app_log.translator
        events: list[Event] = []
        errors: list[str] = []
        warnings: list[str] = []
        corrupt: list[str] = []
        malformed: list[tuple[str, str]] = []
        try:
            while True:
                batch = app_log.read()
                corrupt += batch.corrupt
                warnings += [f"{s.path}:{s.line_no}: {s.reason}" for s in batch.skipped]
                errors += [
                    f"{e.path}: unreadable from byte {e.offset}: {e.detail}" for e in batch.errors
                ]
                events += app_log.finish(app_log.feed(batch))
                malformed += app_log.take_malformed()
                self._report(batch.bytes_read)
                # Caught up: everything written so far is read; an in-progress log ends here.
                if reader.caught_up or reader.gone:
                    break
            if reader.gone:
                errors.append("the log disappeared while it was read")
            elif reader.exhausted:
                events += app_log.end(cause="driver_lost", message=LOG_ENDED)
            complete = reader.complete
        finally:
            app_log.close()
        if corrupt:
            warnings.append(f"{len(corrupt)} corrupt line(s) skipped; the first: {corrupt[0]}")
        if malformed:
            kind, field = malformed[0]
            warnings.append(
                f"{len(malformed)} malformed event(s) skipped; the first: "
                f"{kind} without a valid {field}"
            )
        warnings += app_log.take_warnings()
        app = AppResult(
            app_id=translator.app_id or ref.key,
            attempt_id=translator.attempt_id,
            name=translator.app_name,
            log=ref.path,
            complete=complete,
            runs=runs_of(events),
            digests=(),
            errors=tuple(errors),
            warnings=tuple(warnings),
        )
        return app, events


def write_lines(directory: str, name: str, payloads: Sequence[bytes]) -> str:
    """Create `directory/name` holding one payload per line; an existing file is never replaced."""
    path = os.path.join(directory, name)
    try:
        # O_EXCL: the refusal to overwrite holds even against a file created meanwhile.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileExistsError:
        raise ReplayError(f"refusing to overwrite existing file {path}") from None
    except OSError as error:
        raise ReplayError(f"{path}: cannot create: {error.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(b"".join(payload + b"\n" for payload in payloads))
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(path)  # no half-written file left to be mistaken for a replay
        raise ReplayError(f"{path}: cannot write: {error.strerror}") from None
    return path


# -- the Python API ------------------------------------------------------------------------------


def replay(
    paths: Iterable[StrPath],
    *,
    namespace: str,
    signer: Signer | None = None,
    output_dir: StrPath | None = None,
    spark: SparkConfig | None = None,
    progress: Progress | None = None,
) -> ReplayReport:
    """Translate the Spark event logs at `paths` and return what ran.

    `paths`: single-file logs, rolling `eventlog_v2_*` directories or event-log directories.
    `namespace`: the job namespace of the runs (`spark.namespace` is not consulted).
    `signer`: signs every event (the digests are of the signed bytes); None leaves them
    unsigned. `output_dir`: an existing directory that receives `<app_id>.jsonl` per
    application, never overwriting a file. `spark`: translation settings
    (`emit_empty_executions`, `running_interval`, `max_line_bytes`). `progress`: called after
    each read and each application. Raises ReplayError for a path that names no log.
    """
    from agent.config.model import SparkConfig

    replayer = Replayer(
        resolve(paths),
        namespace=namespace,
        signer=signer,
        output_dir=output_dir,
        spark=spark or SparkConfig(),
        progress=progress,
    )
    return ReplayReport(tuple(replayer.one(ref)[0] for ref in replayer.refs))
