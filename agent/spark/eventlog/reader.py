"""Tail one application's event log: its complete lines, in order, as Spark writes them.

`LogReader.read_available()` returns the lines appended since the last call (without the
newline), decoding the codec stream incrementally and holding a partial last line back until
its newline arrives. It moves on from events_N to events_N+1 once N+1 exists (N is final
then), follows a single in-progress file through its rename at completion (same inode, the
open descriptor reads on, nothing is read twice), and marks the log exhausted once it is
complete and read to its end.

What goes wrong is reported, never raised past `read_available`:
    a line longer than `max_line_bytes`  skipped without being held whole in memory; counted
                                         in `skipped_long_lines`, listed by `take_skipped()`
    a corrupt or truncated codec stream  a ReadError (`take_errors()`, `error`); the lines
                                         before the damage are delivered, the rest of that
                                         file is abandoned, a later events_N file is read
    the log disappears                   `gone` is set; nothing more is read
    a store that does not answer         a ReadError; the same place is read again at the
                                         next call (logs on S3, GCS, Azure, HDFS)
Parsing the lines (JSON) is the caller's business.

Resuming: `position` describes how far the reader got. When it is `clean` (the file offset
is a codec block/frame boundary and every byte before it belonged to consumed lines, which
is the normal state after Spark's flushes) a new reader seeks straight to it; so it does in
an uncompressed file, to the end of the last consumed line. Otherwise the new reader decodes
that file from its start and drops the bytes already consumed: decoding is many times faster
than parsing JSON, so this costs little, and it is correct for every codec without trusting
where the writer flushed. Earlier files are never read again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from stat import S_ISREG
from typing import Final

from agent.errors import CodecError
from agent.fsutil import file_kind
from agent.spark.eventlog import stores
from agent.spark.eventlog.discovery import restat
from agent.spark.eventlog.filestream import FdHandle, FileStream, Handle
from agent.spark.eventlog.layout import EventFile, LogRef

READ_SIZE: Final = 1024 * 1024  # compressed bytes per read; decoded one block at a time
BATCH_BYTES: Final = 16 * 1024 * 1024  # decoded bytes per read_available call, about
# A FIFO planted where an event file was must not block the open: opened without waiting,
# then refused by type.
_OPEN_FLAGS: Final = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(frozen=True, slots=True)
class Position:
    """How far a reader got in one application's log; see the module docstring."""

    index: int  # EventFile.index of the file being read (0 for a single-file log)
    path: str  # its latest known path
    dev: int
    ino: int
    offset: int  # compressed bytes of that file read
    decoded: int  # decoded bytes of that file consumed as whole lines (returned or skipped)
    lines: int  # lines of that file consumed
    clean: bool  # a new reader can continue at `offset` with a fresh decoder
    consumed: int  # compressed bytes of the whole log read: earlier files in full + offset


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line the reader did not return; `line_no` counts from 1 within `path`."""

    path: str
    line_no: int
    reason: str


@dataclass(frozen=True, slots=True)
class ReadError:
    """A file (or the log) that could not be read past `offset` (compressed bytes)."""

    path: str
    offset: int
    detail: str


class LogReader:
    """Incremental reader of one application's event log (not thread-safe)."""

    def __init__(
        self,
        ref: LogRef,
        *,
        start: Position | None = None,
        max_line_bytes: int,
        read_size: int = READ_SIZE,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
        self.ref = ref
        self.max_line_bytes = max_line_bytes
        self.read_size = read_size
        self.bytes_read = 0  # compressed bytes read from disk by this reader (a counter)
        self.skipped_long_lines = 0
        self.gone = False
        self.error: ReadError | None = None  # the latest one
        self._skipped: list[SkippedLine] = []
        self._errors: list[ReadError] = []
        self._start = start
        self._exhausted = False
        self._caught_up = False
        self._earlier = 0  # compressed size of the files finished before the current one
        self._file: EventFile | None = None  # the current file
        self._dev = 0
        self._ino = 0
        self._stream: FileStream | None = None  # its decoding; None when it did not open

    # -- state ------------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """Spark finished writing this log (as last seen)."""
        return self.ref.complete

    @property
    def exhausted(self) -> bool:
        """Complete, and read as far as it can be: nothing more will come."""
        return self._exhausted

    @property
    def caught_up(self) -> bool:
        """The last `read_available` reached what was written (it did not stop at its batch
        size); call it again at once when this is False."""
        return self._caught_up

    @property
    def position(self) -> Position | None:
        """Where this reader is; None before it opened a file."""
        if self._file is None:
            return None
        stream = self._stream
        return Position(
            index=self._file.index,
            path=self._file.path,
            dev=self._dev,
            ino=self._ino,
            offset=stream.offset if stream else 0,
            decoded=stream.decoded if stream else 0,
            lines=stream.lines if stream else 0,
            clean=stream.clean if stream else False,
            consumed=self._earlier + (stream.offset if stream else 0),
        )

    def take_skipped(self) -> list[SkippedLine]:
        """The lines skipped since the last call."""
        skipped, self._skipped = self._skipped, []
        return skipped

    def take_errors(self) -> list[ReadError]:
        """The read errors recorded since the last call."""
        errors, self._errors = self._errors, []
        return errors

    def close(self) -> None:
        """Release the open file; idempotent. The reader is done with it afterwards."""
        if self._stream is not None:
            self._stream.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------

    def read_available(self, max_bytes: int = BATCH_BYTES) -> list[bytes]:
        """The complete lines written since the last call, in order, without newlines; stops
        early (see `caught_up`) once about `max_bytes` decoded bytes were gathered."""
        lines: list[bytes] = []
        self._caught_up = False
        try:
            self._read_into(lines, [max_bytes])
        except stores.StoreError as error:  # nothing was consumed past what `lines` holds
            if self.error is None or self.error.detail != str(error):  # once, not each look
                self._record(ReadError(stores.redact(self.ref.path), 0, str(error)))
            self._caught_up = True
        return lines

    def _read_into(self, lines: list[bytes], budget: list[int]) -> None:
        while not (self._exhausted or self.gone):
            if self.ref.error is not None and not self._refresh():
                break
            if self._file is None and not self._begin():
                break
            if self._open_stream() and not self._pump(lines, budget):
                return  # batch full
            following = self._following()
            if following is None and not self.ref.complete:
                if not self._refresh():
                    break
                following = self._following()
                if following is None and not self.ref.complete:
                    break  # in progress and caught up
            # The current file is final: the next exists or the log is complete. Read what
            # was written before that was seen, then close the file.
            if (stream := self._open_stream()) is not None:
                if not self._pump(lines, budget):
                    return
                stream.finish(lines)
            if following is None:
                self._exhausted = True
                break
            self._earlier += self._stream.offset if self._stream else 0
            self._open(following, None)
        self._caught_up = True

    def _following(self) -> EventFile | None:
        current = self._file
        if current is None:
            return None
        return next((f for f in self.ref.files if f.index > current.index), None)

    def _begin(self) -> bool:
        """Open the first file to read (or the one `start` points at); False when there is
        none yet."""
        if not self.ref.files and not self._refresh():
            return False
        if not self.ref.files:
            return False
        start, self._start = self._start, None
        if start is not None:
            for file in self.ref.files:
                if file.index == start.index and (file.dev, file.ino) == (start.dev, start.ino):
                    self._earlier = start.consumed - start.offset
                    self._open(file, start)
                    return True
            # The file was replaced or compacted away: read the log from its start again.
        self._open(self.ref.files[0], None)
        return True

    def _open_stream(self) -> FileStream | None:
        stream = self._stream
        return stream if stream is not None and stream.is_open else None

    def _open(self, file: EventFile, start: Position | None) -> None:
        self.close()
        self._file = file
        self._stream = None
        if stores.is_url(file.path):  # nothing to open: each read is a ranged GET
            self._dev, self._ino = file.dev, file.ino
            self._start_stream(stores.RemoteFile(file.path, file.size), start)
            return
        fd: int | None
        try:
            fd = os.open(file.path, _OPEN_FLAGS)
        except FileNotFoundError:
            fd = self._reopen_renamed(file)
        except OSError as error:
            self._fail(f"cannot open: {error.strerror}", 0)
            return
        if fd is None:
            return
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):  # replaced since the scan: never read from
            os.close(fd)
            self._fail(f"not a regular file ({file_kind(stat.st_mode)})", 0)
            return
        self._dev, self._ino = stat.st_dev, stat.st_ino
        self._start_stream(FdHandle(fd), start)

    def _start_stream(self, handle: Handle, start: Position | None) -> None:
        resume = None
        if start is not None and (start.dev, start.ino) == (self._dev, self._ino):
            # Uncompressed, the end of the last consumed line is a file offset too.
            seek_to = start.offset if start.clean else start.decoded
            clean = start.clean or self.ref.codec == "none"
            resume = (start.lines, start.decoded, seek_to if clean else None)
        try:
            self._stream = FileStream(
                handle,
                self.ref.codec,
                max_line_bytes=self.max_line_bytes,
                read_size=self.read_size,
                on_skip=self._skip_line,
                on_error=self._record_at,
                resume=resume,
            )
        except CodecError as error:
            handle.close()
            self._fail(str(error), (resume[2] or 0) if resume else 0)

    def _reopen_renamed(self, file: EventFile) -> int | None:
        """The file vanished between listing and opening: a single file renamed at
        completion is opened under its new name. A single file that is not there is gone;
        a rolling file removed meanwhile (History Server compaction) is an error, and the
        files after it are still read."""
        if not self._refresh():
            return None
        for candidate in self.ref.files:
            if candidate.index == file.index:
                try:
                    fd = os.open(candidate.path, _OPEN_FLAGS)
                except OSError:
                    break
                self._file = candidate
                return fd
        if self.ref.layout == "single":
            self._mark_gone()
        else:
            self._fail("removed before it could be read", 0)
        return None

    def _pump(self, lines: list[bytes], budget: list[int]) -> bool:
        """Read the current file to its end, counting the bytes read; False when the batch
        filled up first."""
        stream = self._stream
        assert stream is not None
        before = stream.offset
        try:
            return stream.pump(lines, budget)
        finally:
            self.bytes_read += stream.offset - before

    def _skip_line(self, line_no: int) -> None:
        assert self._file is not None
        self.skipped_long_lines += 1
        reason = f"line longer than max_line_bytes ({self.max_line_bytes})"
        self._skipped.append(SkippedLine(self._file.path, line_no, reason))

    # -- the log around the current file ------------------------------------------------------

    def _refresh(self) -> bool:
        """Look at the log again (new files, completion, rename); False when it is unusable
        now: gone, or listed with an error."""
        fresh = restat(self.ref)
        if fresh is None:
            self._mark_gone()
            return False
        if fresh.error is not None:
            if self.error is None or self.error.detail != fresh.error:
                self._record(ReadError(fresh.path, 0, fresh.error))
            return False
        current = self._file
        if current is not None and fresh.layout == "single" and self._open_stream():
            renamed = fresh.files[0]
            if (renamed.dev, renamed.ino) != (self._dev, self._ino):
                self._mark_gone()  # not the file we were reading: it was removed
                return False
            self._file = renamed
            if self._stream is not None and self._stream.handle is not None:
                self._stream.handle.follow(renamed.path)
        self.ref = fresh
        return True

    def _mark_gone(self) -> None:
        self.gone = True
        self.close()

    def _fail(self, detail: str, offset: int) -> None:
        """The current file cannot be opened or decoded: record it and give it up."""
        self._record_at(detail, offset)
        self.close()

    def _record_at(self, detail: str, offset: int) -> None:
        path = self._file.path if self._file is not None else self.ref.path
        self._record(ReadError(path, offset, detail))

    def _record(self, error: ReadError) -> None:
        self.error = error
        self._errors.append(error)
