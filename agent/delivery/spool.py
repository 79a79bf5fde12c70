"""What has not left yet, on disk: the delivery spool.

Every event that at least one transport's queue takes is appended here first; before a batch
is handed to a transport its events are marked in flight for that transport, and the batch's
outcome resolves them (or, when it provably never left, returns them to waiting). So after a
stop of any kind (SIGTERM, SIGKILL, the OOM killer, a reboot) the spool says, per transport,
which events never left, which may have left, and which are done:

* never marked in flight: they go out again first, in the order they were submitted, with
  the same bytes (and so the same signature);
* marked in flight and never resolved: they may have reached the collector, so they are
  counted unconfirmed and never sent again (at most once).

Files: segments `<first seq>.spool` in one directory, each a run of framed records
(`agent.delivery.spoolrecords`): `E` an event, `S` sent, `N` not sent, `R` resolved. A record
whose frame or checksum is wrong (a torn tail after a crash, a flipped byte) is counted and
skipped, and the agent starts whatever the spool holds.

Appends are `write(2)`s, which the kernel keeps when the process dies. With `fsync`, the
in-flight mark is made durable (off the event loop) before the batch leaves, and a dirty
segment is synced every second, so a power cut cannot make an event that left look unsent.

The resolution of events already marked in flight is not written at once: it rides along
with the next record (usually the next batch's in-flight mark), or goes at `flush` (every
second) or `close`, so one event per batch costs two writes, not three. Lost in a kill, it
only leaves such events in flight, counted unconfirmed and never sent again; a resolution
of events never marked in flight (a drop before they left) is written at once, since
without it they would look unsent and go out after a restart. (Holding back the in-flight
marks of batches that start in one turn of the loop, to share a write, cost more CPU than
the writes it saved: a wait for the end of the turn per batch.)

A spool that cannot be written (a full or failing disk) gives itself up rather than risk a
resend: it deletes its segments, logs `spool_failed` once, and the agent carries on from memory
alone (what is queued then is lost at a stop, as without a spool).

The spool's size is bounded: an event that would take it past `max_bytes` is not taken
(the caller drops it as `spool_full`). When a segment is closed, the live events of older
segments are copied forward and those segments deleted, so what stays on disk is about the
events still owed plus one segment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import structlog

from agent.delivery.spoolrecords import (
    NOT_SENT,
    RESOLVED,
    SENT,
    Owed,
    SpooledEvent,
    event_record,
    mark_record,
    replay,
)

log = structlog.get_logger("agent.pipeline")

#: A segment is closed past this size; a smaller spool uses smaller segments.
SEGMENT_BYTES: Final = 4 * 1024 * 1024
SUFFIX: Final = ".spool"


@dataclass(slots=True)
class Recovered:
    """What an earlier run of the agent left in the spool, per transport, in submit order."""

    waiting: dict[str, list[SpooledEvent]] = field(default_factory=dict)  # never left
    in_flight: dict[str, list[SpooledEvent]] = field(default_factory=dict)  # may have left
    corrupt: int = 0  # records skipped because their frame or checksum was wrong

    @property
    def events(self) -> int:
        return sum(map(len, self.waiting.values())) + sum(map(len, self.in_flight.values()))


@dataclass(slots=True)
class _Entry:
    """An event still owed to some transport: where it is and to whom."""

    event: SpooledEvent
    segment: int  # first seq of the segment holding its newest copy
    owed: set[str]
    flying: set[str]


class Spool:
    """The append-only record of what each transport still owes (see the module docstring).

    Not thread-safe: the event loop alone calls it (an fsync runs in a worker thread, on a
    duplicate of the descriptor, and touches nothing else).
    """

    def __init__(self, directory: Path, max_bytes: int, *, fsync: bool = False) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.fsync = fsync
        self.segment_bytes = max(64 * 1024, min(SEGMENT_BYTES, max_bytes // 8))
        self._entries: dict[int, _Entry] = {}
        self._segments: dict[int, int] = {}  # first seq -> bytes on disk
        self._bytes = 0  # their sum (read by the metrics thread: one int, never a dict walk)
        self._live: dict[int, int] = {}  # first seq -> entries whose newest copy is there
        self._next = 1
        self._active = 0
        self._fd = -1
        self._dirty = False
        self._pending: list[bytes] = []  # resolutions of in-flight events not yet written

    # -- opening -----------------------------------------------------------------------------

    def open(self) -> Recovered:
        """Read what an earlier run left, keep what is still owed, start a fresh segment."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        found = Recovered()
        owed: Owed = {}
        old = sorted(self._segment_files())
        for first, path in old:
            with contextlib.suppress(FileNotFoundError):
                found.corrupt += replay(path.read_bytes(), owed)
            self._next = max(self._next, first + 1)
        for seq in sorted(owed):
            event, waiting, flying = owed[seq]
            for transport in sorted(waiting - flying):
                found.waiting.setdefault(transport, []).append(event)
            for transport in sorted(flying & waiting):
                found.in_flight.setdefault(transport, []).append(event)
            self._next = max(self._next, seq + 1)
        self._start_segment()
        # What is still owed is copied into the fresh segment; the old files go.
        for seq in sorted(owed):
            event, waiting, flying = owed[seq]
            left = sorted(waiting - flying)
            if left:
                self._write_event(event, left)
        for _, path in old:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return found

    def _segment_files(self) -> Iterator[tuple[int, Path]]:
        for path in self.directory.iterdir():
            stem, dot, suffix = path.name.partition(".")
            if dot and "." + suffix == SUFFIX and stem.isdigit():
                yield int(stem), path

    # -- the hot path --------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes of every segment on disk."""
        return self._bytes

    @property
    def owed(self) -> int:
        """Events some transport still owes."""
        return len(self._entries)

    @property
    def working(self) -> bool:
        """Open and writable (False once closed, or given up after a write failed)."""
        return self._fd >= 0

    def room(self, payload: int) -> bool:
        """Whether an event of `payload` bytes fits under `max_bytes` (always, once the spool
        gave up: events then go on from memory)."""
        return not self.working or self.size + payload + 256 <= self.max_bytes

    def append(
        self, run_id: str, event_type: str, app_id: str, payload: bytes, transports: Sequence[str]
    ) -> int:
        """Keep an event that `transports` took; its sequence number (check `room` first),
        0 when the spool is not working."""
        if not self.working:
            return 0
        seq = self._next
        self._next += 1
        event = SpooledEvent(seq, run_id, event_type, app_id, payload)
        self._write_event(event, transports)
        return seq

    async def sending(self, transport: str, seqs: Sequence[int]) -> None:
        """Mark a batch in flight before any of it may leave; durable first with `fsync`."""
        self._mark(SENT, transport, seqs)
        if self.fsync:
            await self.sync()

    def not_sent(self, transport: str, seqs: Sequence[int]) -> None:
        """The batch provably never left: waiting again."""
        self._mark(NOT_SENT, transport, seqs)

    def resolved(self, transport: str, seqs: Sequence[int]) -> None:
        """The events have an outcome on `transport` (delivered, dropped or unconfirmed)."""
        entries = self._entries
        seqs = [s for s in seqs if s in entries and transport in entries[s].owed]
        if not seqs:
            return
        record = mark_record(RESOLVED, transport, seqs)
        if self.working and all(transport in entries[s].flying for s in seqs):
            self._pending.append(record)  # in flight until written: never resent either way
        else:
            self._write(record)
        for seq in seqs:
            entry = entries[seq]
            entry.owed.discard(transport)
            entry.flying.discard(transport)
            if not entry.owed:
                del self._entries[seq]
                self._live[entry.segment] -= 1
        self._collect()

    def flush(self) -> None:
        """Write the resolutions still held back (see the module docstring)."""
        if self._pending:
            self._write(b"")

    async def sync(self) -> None:
        """Make what was written durable (a no-op when nothing was written since)."""
        self.flush()
        if not self._dirty or self._fd < 0:
            return
        self._dirty = False
        try:
            fd = os.dup(self._fd)
            try:
                await asyncio.to_thread(os.fsync, fd)
            finally:
                os.close(fd)
        except OSError as error:
            if self.working:
                self._give_up(error)

    def close(self) -> None:
        self.flush()
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                if self.fsync and self._dirty:
                    os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    # -- segments ------------------------------------------------------------------------------

    def _write_event(self, event: SpooledEvent, transports: Sequence[str]) -> None:
        self._write(event_record(event, transports))
        if not self.working:
            return
        self._entries[event.seq] = _Entry(event, self._active, set(transports), set())
        self._live[self._active] += 1

    def _mark(self, kind: bytes, transport: str, seqs: Sequence[int]) -> None:
        if not seqs:
            return
        self._write(mark_record(kind, transport, seqs))
        for seq in seqs:
            entry = self._entries.get(seq)
            if entry is None:
                continue
            if kind == SENT:
                entry.flying.add(transport)
            elif kind == NOT_SENT:
                entry.flying.discard(transport)

    def _write(self, record: bytes) -> None:
        """Append `record`, after the resolutions held back (one `write(2)` for all)."""
        if not self.working:
            return
        if self._pending:
            self._pending.append(record)
            record = b"".join(self._pending)
            self._pending.clear()
        try:
            if self._segments[self._active] + len(record) > self.segment_bytes:
                self._rotate()
            self._put(record)
        except OSError as error:
            self._give_up(error)

    def _put(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._segments[self._active] += len(data)
        self._bytes += len(data)
        self._dirty = True

    def _give_up(self, error: OSError) -> None:
        """A write failed: a record may be missing, so no segment can be trusted to say what
        left. Delete them all (unlinking needs no free space) and go on without a spool."""
        log.error(
            "spool_failed",
            directory=str(self.directory),
            error=error.strerror or str(error),
            events=len(self._entries),
            detail="the spool is deleted and disabled until the next start; queued events "
            "are kept in memory only",
        )
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1
        self._pending.clear()
        for first in list(self._segments):
            self._drop_segment(first)
        self._entries.clear()

    def _start_segment(self) -> None:
        self._active = self._next
        path = self.directory / f"{self._active:020d}{SUFFIX}"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._segments[self._active] = 0
        self._live[self._active] = 0

    def _rotate(self) -> None:
        """Close the active segment; copy the live events of the older ones forward."""
        closed = self._active
        if self.fsync:
            os.fsync(self._fd)  # a closed segment is never synced again
        fd, self._fd = self._fd, -1
        os.close(fd)
        self._start_segment()
        for first in [s for s in self._segments if s < closed]:
            for entry in [e for e in self._entries.values() if e.segment == first]:
                self._copy_forward(entry)
            self._drop_segment(first)

    def _copy_forward(self, entry: _Entry) -> None:
        self._put(event_record(entry.event, sorted(entry.owed)))
        for transport in sorted(entry.flying):
            self._put(mark_record(SENT, transport, [entry.event.seq]))
        self._live[entry.segment] -= 1
        entry.segment = self._active
        self._live[self._active] += 1

    def _collect(self) -> None:
        """Delete closed segments nothing is owed from."""
        for first in [s for s, n in self._live.items() if n == 0 and s != self._active]:
            self._drop_segment(first)

    def _drop_segment(self, first: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / f"{first:020d}{SUFFIX}").unlink()
        self._bytes -= self._segments.pop(first, 0)
        self._live.pop(first, None)
