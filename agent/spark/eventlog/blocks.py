"""Block codecs of Spark's event logs, decoded incrementally: lz4-java's LZ4Block stream,
snappy-java's stream and compress-lzf chunks (see `codecs` for the formats)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Final

import cramjam
import lz4.block  # type: ignore[import-untyped]

from agent.errors import CorruptStream
from agent.spark.eventlog.piecewise import PiecewiseDecoder

# Bounds that keep a corrupt length field from making a decoder wait for, or allocate,
# gigabytes. Real blocks are far smaller: Spark's default block sizes are 32 KiB.
_MAX_SNAPPY_CHUNK: Final = 64 * 1024 * 1024


class _BlockDecoder(PiecewiseDecoder):
    """Shared shape of the block formats: parse whole blocks, keep the incomplete tail."""

    codec = ""

    def __init__(self, offset: int = 0) -> None:
        self._offset = offset  # stream offset of the first byte in `_pending`
        self._pending = b""

    @property
    def idle(self) -> bool:
        return not self._pending

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """`feed`'s output one block at a time, whatever the compression ratio."""
        buf = self._pending + data if self._pending else data
        pos = 0
        for _ in range(len(buf) + 1):  # every round but the last takes at least one byte
            out: list[bytes] = []
            used = self._blocks(buf, out, pos)
            yield from out
            if used == pos:
                break
            pos = used
        self._pending = buf[pos:]
        self._offset += pos

    def finish(self) -> None:
        if self._pending:
            raise CorruptStream(
                f"{self.codec}: stream ends inside a block ({len(self._pending)} bytes of an "
                f"incomplete block at byte {self._offset})",
                offset=self._offset + len(self._pending),
            )

    def _blocks(self, buf: bytes, out: list[bytes], pos: int) -> int:
        """Append the output of the first non-empty whole block of `buf` from `pos` (and the
        empty ones before it); return where the blocks taken end."""
        raise NotImplementedError

    def _corrupt(self, what: str, pos: int) -> CorruptStream:
        at = self._offset + pos
        return CorruptStream(f"{self.codec}: {what} at byte {at}", offset=at)


class Lz4Decoder(_BlockDecoder):
    """lz4-java LZ4BlockOutputStream: magic, token, le32 lengths and checksum, payload.

    The xxhash32 checksum is not verified (no xxhash binding is a dependency); damage still
    shows as a failing LZ4 block or a length that does not match the header.
    """

    codec = "lz4"
    _MAGIC: Final = b"LZ4Block"
    _HEADER: Final = struct.Struct("<8sBiii")  # magic, token, compressed, original, checksum
    _RAW: Final = 0x10
    _LZ4: Final = 0x20

    def _blocks(self, buf: bytes, out: list[bytes], pos: int) -> int:
        view = memoryview(buf)
        end, size = len(buf), self._HEADER.size
        while not out and end - pos >= size:
            magic, token, compressed, original, _ = self._HEADER.unpack_from(buf, pos)
            if magic != self._MAGIC:
                raise self._corrupt(f"bad block magic {magic!r}", pos)
            method, level = token & 0xF0, token & 0x0F
            if (
                method not in (self._RAW, self._LZ4)
                or not 0 <= original <= 1 << (10 + level)
                or not 0 <= compressed <= original + original // 255 + 16
                or (original == 0) != (compressed == 0)
                or (method == self._RAW and compressed != original)
            ):
                raise self._corrupt(
                    f"bad block header (token 0x{token:02x}, compressed {compressed}, "
                    f"original {original})",
                    pos,
                )
            if end - pos - size < compressed:
                break
            payload = view[pos + size : pos + size + compressed]
            if method == self._RAW:
                out.append(bytes(payload))
            elif original:
                try:
                    block = lz4.block.decompress(payload, uncompressed_size=original)
                except (lz4.block.LZ4BlockError, ValueError) as error:
                    raise self._corrupt(f"undecodable block ({error})", pos) from None
                if len(block) != original:
                    raise self._corrupt(
                        f"block decodes to {len(block)} bytes, header says {original}", pos
                    )
                out.append(block)
            # An empty block ends one stream; lz4-java readers accept another after it.
            pos += size + compressed
        return pos


class SnappyDecoder(_BlockDecoder):
    """snappy-java SnappyOutputStream: header, then be32 length + raw snappy block chunks.

    A header is accepted wherever a chunk may start (snappy-java reads concatenated streams),
    so a fresh decoder can also take over mid-stream at a chunk boundary.
    """

    codec = "snappy"
    _MAGIC: Final = b"\x82SNAPPY\x00"
    _HEADER_SIZE: Final = 16  # magic, be32 version, be32 compatible version
    _LENGTH: Final = struct.Struct(">i")

    def _blocks(self, buf: bytes, out: list[bytes], pos: int) -> int:
        view = memoryview(buf)
        end = len(buf)
        while not out and end - pos >= 4:
            if buf[pos] == self._MAGIC[0]:  # a chunk length never has the top bit set
                if end - pos < self._HEADER_SIZE:
                    break
                if buf[pos : pos + 8] != self._MAGIC:
                    raise self._corrupt(f"bad stream header {buf[pos : pos + 8]!r}", pos)
                pos += self._HEADER_SIZE
                continue
            (length,) = self._LENGTH.unpack_from(buf, pos)
            if length > _MAX_SNAPPY_CHUNK:
                raise self._corrupt(f"chunk length {length} exceeds {_MAX_SNAPPY_CHUNK}", pos)
            if end - pos - 4 < length:
                break
            if length:
                chunk = view[pos + 4 : pos + 4 + length]
                try:
                    # The raw block's own length prefix decides the allocation: check it first.
                    size = cramjam.snappy.decompress_raw_len(chunk)
                    if size > _MAX_SNAPPY_CHUNK:
                        raise self._corrupt(
                            f"chunk claims {size} decoded bytes, more than {_MAX_SNAPPY_CHUNK}",
                            pos,
                        )
                    out.append(bytes(cramjam.snappy.decompress_raw(chunk)))
                except cramjam.DecompressionError as error:
                    raise self._corrupt(f"undecodable chunk ({error})", pos) from None
            pos += 4 + length
        return pos


RawLzf = Callable[[bytes, int], "bytes | None"]


class LzfDecoder(_BlockDecoder):
    """compress-lzf chunks: b"ZV", type 0 + be16 length, or type 1 + be16 clen + be16 ulen.

    `raw(data, size)` decodes one raw LZF block of `size` output bytes; it returns None or
    raises ValueError when the block is damaged (the `lzf` module's contract).
    """

    codec = "lzf"
    _STORED: Final = 0
    _COMPRESSED: Final = 1
    _U16: Final = struct.Struct(">H")
    _U16X2: Final = struct.Struct(">HH")

    def __init__(self, offset: int = 0, *, raw: RawLzf) -> None:
        super().__init__(offset)
        self._raw = raw

    def _blocks(self, buf: bytes, out: list[bytes], pos: int) -> int:
        view = memoryview(buf)
        end = len(buf)
        while not out and end - pos >= 5:
            if buf[pos] != 0x5A or buf[pos + 1] != 0x56:  # "ZV"
                raise self._corrupt(f"bad chunk signature {buf[pos : pos + 2]!r}", pos)
            kind = buf[pos + 2]
            if kind == self._STORED:
                header = 5
                (compressed,) = self._U16.unpack_from(buf, pos + 3)
                original = compressed
            elif kind == self._COMPRESSED:
                header = 7
                if end - pos < header:
                    break
                compressed, original = self._U16X2.unpack_from(buf, pos + 3)
            else:
                raise self._corrupt(f"unknown chunk type {kind}", pos)
            if end - pos - header < compressed:
                break
            payload = bytes(view[pos + header : pos + header + compressed])
            if kind == self._STORED:
                out.append(payload)
            elif original or compressed:
                try:
                    block = self._raw(payload, original)
                except ValueError as error:
                    raise self._corrupt(f"undecodable chunk ({error})", pos) from None
                if block is None or len(block) != original:
                    raise self._corrupt(f"chunk does not decode to {original} bytes", pos)
                out.append(block)
            pos += header + compressed
        return pos
