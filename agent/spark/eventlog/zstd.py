"""Spark's zstd event logs, decoded incrementally: concatenated standard frames, one closed at
every flush, located by walking the frame and block headers so that damage costs only what
follows it: the frames before a damaged one are kept, and so are the blocks of the damaged
frame that come before the damage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import zstandard

from agent.errors import CorruptStream
from agent.spark.eventlog.piecewise import PiecewiseDecoder

_ZSTD_MAX_BLOCK: Final = 128 * 1024  # RFC 8878 Block_Maximum_Size


class ZstdDecoder(PiecewiseDecoder):
    """Concatenated zstd frames, decoded by libzstd; frame and block headers are walked here.

    libzstd's streaming decoder does not say whether a stream stopped between frames or in the
    middle of one, which `idle` and `finish` need, so a small parser follows the frame and
    block headers (a few bytes per block of up to 128 KiB; payloads are only skipped). Knowing
    where frames and blocks end also lets damage lose only the output from the damaged block
    on, and bounds memory: libzstd is fed one block (or header) per call, so no call returns
    more than one block's output (128 KiB), however far the input expands; a call that fails
    returns nothing, and the blocks before it were returned already.
    """

    codec = "zstd"
    _MAGIC: Final = 0xFD2FB528
    _SKIPPABLE: Final = 0x184D2A50  # to 0x184D2A5F
    _DICT_ID: Final = (0, 1, 2, 4)
    _CONTENT_SIZE: Final = (0, 2, 4, 8)

    # What the header bytes collected in `_head` are.
    _FRAME_MAGIC: Final = 0
    _FRAME_DESCRIPTOR: Final = 1
    _BLOCK_HEADER: Final = 2
    _CHECKSUM: Final = 3
    _SKIPPABLE_SIZE: Final = 4

    def __init__(self, offset: int = 0) -> None:
        self._stream = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        self._offset = offset  # stream offset of the next byte fed
        self._frame_start = offset
        self._field = self._FRAME_MAGIC
        self._need = 4
        self._head = b""
        self._skip = 0  # payload bytes still to pass over
        self._frame_ends_after_skip = False
        self._has_checksum = False

    @property
    def idle(self) -> bool:
        return self._field == self._FRAME_MAGIC and not self._head and not self._skip

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """`feed`'s output one block (at most 128 KiB) at a time, whatever the ratio."""
        view = memoryview(data)
        frame_start = self._frame_start  # of the frame the first byte belongs to
        ends: list[int] = []
        blocks: list[int] = []
        stop = len(view)
        damage: CorruptStream | None = None
        try:
            self._walk(data, ends, blocks)
        except CorruptStream as error:
            # Everything before the damaged header still decodes.
            damage = error
            stop = max(0, error.offset - self._offset)
        start = 0
        for cut in sorted({*(c for c in (*blocks, *ends) if 0 < c < stop), stop}):
            try:
                piece = self._stream.decompress(view[start:cut])
            except zstandard.ZstdError as error:
                at = max((e for e in ends if e <= start), default=None)
                raise self._undecodable(
                    frame_start if at is None else self._offset + at, error, b""
                ) from None
            if piece:
                yield piece
            start = cut
        if damage is not None:
            damage.partial = b""
            raise damage
        self._offset += len(data)

    def finish(self) -> None:
        if not self.idle:
            raise CorruptStream(
                f"zstd: stream ends inside the frame that starts at byte {self._frame_start}",
                offset=self._offset,
            )

    @staticmethod
    def _undecodable(at: int, error: zstandard.ZstdError, partial: bytes) -> CorruptStream:
        return CorruptStream(
            f"zstd: undecodable frame starting at byte {at} ({error})", offset=at, partial=partial
        )

    def _walk(self, data: bytes, ends: list[int], blocks: list[int]) -> None:
        """Advance the header parser over `data`, appending the offsets where frames end to
        `ends` and those where a block (or another skipped part of a frame) ends to `blocks`."""
        pos, end = 0, len(data)
        while pos < end:
            if self._skip:
                step = min(self._skip, end - pos)
                self._skip -= step
                pos += step
                if not self._skip:
                    blocks.append(pos)
                    if self._frame_ends_after_skip:
                        self._end_frame(ends, pos)
                continue
            need = self._need
            if self._head:  # a header split across two feeds
                take = min(need - len(self._head), end - pos)
                self._head += data[pos : pos + take]
                pos += take
                if len(self._head) < need:
                    break
                head, self._head = self._head, b""
            elif end - pos >= need:
                head = data[pos : pos + need]
                pos += need
            else:
                self._head = data[pos:end]
                break
            self._parse(head, pos, ends)

    def _parse(self, head: bytes, pos: int, ends: list[int]) -> None:
        """Act on one complete header field that ended at `pos` in the current input."""
        at = self._offset + pos - len(head)  # stream offset where the field starts
        field = self._field
        if field == self._FRAME_MAGIC:
            self._frame_start = at
            magic = int.from_bytes(head, "little")
            if magic == self._MAGIC:
                self._field, self._need = self._FRAME_DESCRIPTOR, 1
            elif magic & 0xFFFFFFF0 == self._SKIPPABLE:
                self._field, self._need = self._SKIPPABLE_SIZE, 4
            else:
                raise CorruptStream(f"zstd: bad frame magic 0x{magic:08x} at byte {at}", offset=at)
        elif field == self._FRAME_DESCRIPTOR:
            descriptor = head[0]
            if descriptor & 0x08:
                raise CorruptStream(
                    f"zstd: reserved bit set in frame header descriptor at byte {at}", offset=at
                )
            single_segment = descriptor >> 5 & 1
            self._has_checksum = bool(descriptor >> 2 & 1)
            content_size = self._CONTENT_SIZE[descriptor >> 6] or single_segment
            # The rest of the frame header (window, dictionary id, content size) is skipped.
            self._skip = (1 - single_segment) + self._DICT_ID[descriptor & 3] + content_size
            self._field, self._need = self._BLOCK_HEADER, 3
        elif field == self._BLOCK_HEADER:
            value = int.from_bytes(head, "little")
            last, kind, size = value & 1, value >> 1 & 3, value >> 3
            if kind == 3:
                raise CorruptStream(f"zstd: reserved block type at byte {at}", offset=at)
            if size > _ZSTD_MAX_BLOCK:
                raise CorruptStream(
                    f"zstd: block size {size} exceeds {_ZSTD_MAX_BLOCK} at byte {at}", offset=at
                )
            self._skip = 1 if kind == 1 else size  # an RLE block stores one byte
            if last and self._has_checksum:
                self._field, self._need = self._CHECKSUM, 4
                self._frame_ends_after_skip = False
            else:
                self._frame_ends_after_skip = bool(last)
                if not self._skip and last:
                    self._end_frame(ends, pos)
        elif field == self._CHECKSUM:
            self._end_frame(ends, pos)
        else:  # _SKIPPABLE_SIZE
            self._skip = int.from_bytes(head, "little")
            self._frame_ends_after_skip = True
            if not self._skip:
                self._end_frame(ends, pos)

    def _end_frame(self, ends: list[int], pos: int) -> None:
        ends.append(pos)
        self._field, self._need = self._FRAME_MAGIC, 4
        self._frame_ends_after_skip = False
