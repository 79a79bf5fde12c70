"""The spool's records on disk: how one is framed, written and read back.

A segment is a run of records, each `MAGIC kind length(u32 BE) crc32(u32 BE) body`, the
checksum over the kind and the body. Kinds: `E` an event (its sequence number, a JSON header
with its run, type, application and the transports that took it, then its payload), `S` sent,
`N` not sent, `R` resolved (a JSON pair: a transport and sequence numbers). Reading skips a
stretch that does not check and goes on at the next frame that does; `replay` applies a
segment's records to what is owed. Pure: no I/O.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

MAGIC: Final = 0xA7
_HEAD: Final = struct.Struct(">BBII")  # magic, kind, body length, crc32 of kind+body
_SEQ: Final = struct.Struct(">QI")  # an event's sequence number, its header's length
EVENT, SENT, NOT_SENT, RESOLVED = b"E", b"S", b"N", b"R"
KINDS: Final = frozenset(EVENT + SENT + NOT_SENT + RESOLVED)
#: A record longer than this is no record (a frame read from garbage).
MAX_RECORD: Final = 1 << 30


@dataclass(frozen=True, slots=True)
class SpooledEvent:
    """One event as the spool keeps it."""

    seq: int
    run_id: str
    event_type: str
    app_id: str
    payload: bytes


def frame(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(body, zlib.crc32(kind))
    return _HEAD.pack(MAGIC, kind[0], len(body), crc) + body


def event_record(event: SpooledEvent, transports: Sequence[str]) -> bytes:
    header = orjson.dumps([event.run_id, event.event_type, event.app_id, list(transports)])
    return frame(EVENT, _SEQ.pack(event.seq, len(header)) + header + event.payload)


def mark_record(kind: bytes, transport: str, seqs: Sequence[int]) -> bytes:
    return frame(kind, orjson.dumps([transport, list(seqs)]))


def _frame_at(data: bytes, at: int) -> tuple[bytes, bytes, int] | None:
    """The record that starts at `at` when its frame and checksum hold: (kind, body, end)."""
    if len(data) - at < _HEAD.size:
        return None
    magic, kind, length, crc = _HEAD.unpack_from(data, at)
    stop = at + _HEAD.size + length
    if magic != MAGIC or kind not in KINDS or length > MAX_RECORD or stop > len(data):
        return None
    body = data[at + _HEAD.size : stop]
    if zlib.crc32(body, zlib.crc32(bytes((kind,)))) != crc:
        return None
    return bytes((kind,)), body, stop


def records(data: bytes) -> Iterator[tuple[bytes, bytes] | None]:
    """(kind, body) of each record that checks, in order; one None for each stretch of bytes
    skipped, after which reading resumes at the next frame that checks."""
    at, skipping = 0, False
    while at < len(data):
        found = _frame_at(data, at)
        if found is not None:
            kind, body, at = found
            skipping = False
            yield kind, body
            continue
        if not skipping:
            skipping = True
            yield None
        following = data.find(MAGIC, at + 1)
        at = len(data) if following < 0 else following


def parse_event(body: bytes) -> tuple[SpooledEvent, list[str]]:
    seq, size = _SEQ.unpack_from(body)
    start = _SEQ.size
    run_id, event_type, app_id, transports = orjson.loads(body[start : start + size])
    payload = body[start + size :]
    return SpooledEvent(seq, run_id, event_type, app_id, payload), list(transports)


#: What replaying segments leaves per sequence number: the event, the transports that still
#: owe it, and those of them it is in flight to.
Owed = dict[int, tuple[SpooledEvent, set[str], set[str]]]


def replay(data: bytes, owed: Owed) -> int:
    """Apply one segment's records to `owed`; returns how many stretches were skipped."""
    corrupt = 0
    for record in records(data):
        if record is None:
            corrupt += 1
            continue
        kind, body = record
        try:
            if kind == EVENT:
                event, transports = parse_event(body)
                previous = owed.get(event.seq)
                flying = previous[2] if previous else set()
                owed[event.seq] = (event, set(transports), flying)
                continue
            transport, seqs = orjson.loads(body)
            for seq in seqs:
                entry = owed.get(seq)
                if entry is None:
                    continue
                if kind == SENT:
                    entry[2].add(transport)
                elif kind == NOT_SENT:
                    entry[2].discard(transport)
                else:
                    entry[1].discard(transport)
                    entry[2].discard(transport)
                    if not entry[1]:
                        del owed[seq]
        except (ValueError, TypeError, struct.error):
            corrupt += 1
    return corrupt
