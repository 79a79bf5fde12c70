"""Incremental decoders for the codecs Spark writes event logs with, in Spark's on-disk formats.

A decoder is fed the bytes appended to a compressed event-log file, in pieces of any size, and
returns whatever decompressed bytes they complete; an incomplete block or frame waits inside
until its rest arrives. This is what lets an in-progress log be read while Spark writes it.

Formats (one per Spark codec short name, which is also the file extension):
    none    the bytes as they are
    zstd    concatenated standard zstd frames; Spark closes one at every flush
    lz4     lz4-java's LZ4Block stream: 21-byte block headers, an empty block ends a stream
    snappy  snappy-java's stream: a 16-byte header, then big-endian length + raw snappy block
    lzf     compress-lzf chunks: "ZV", type 0 (stored) or 1 (LZF-compressed), lengths, data

Errors (one hierarchy, rooted at CodecError):
    UnknownCodec       `decoder_for` was given a name that is not one of CODECS.
    CodecUnavailable   the codec is known but the library that decodes it is not installed.
    CorruptStream      the input is not a valid stream of that codec, or ends inside a block
                       when the caller says it is complete. Decoders raise nothing else on bad
                       input; `partial` holds what the failing call decoded before the damage.
"""

from __future__ import annotations

import importlib
import itertools
import struct
from collections.abc import Callable
from typing import Final, Protocol

import cramjam
import lz4.block  # type: ignore[import-untyped]
import zstandard

from agent.errors import CodecUnavailable, CorruptStream, UnknownCodec

#: Spark's codec short names, plus "none" for an uncompressed log.
CODECS: Final = ("none", "zstd", "lz4", "snappy", "lzf")

# Bounds that keep a corrupt length field from making a decoder wait for, or allocate,
# gigabytes. Real blocks are far smaller: Spark's default block sizes are 32 KiB.
_MAX_SNAPPY_CHUNK: Final = 64 * 1024 * 1024
_ZSTD_MAX_BLOCK: Final = 128 * 1024  # RFC 8878 Block_Maximum_Size


class Decoder(Protocol):
    """Decompresses one codec stream fed in pieces of any size."""

    codec: str

    def feed(self, data: bytes) -> bytes:
        """Decode `data`, the next bytes of the stream; return the output they complete.

        An incomplete block or frame at the end is kept until the next call. Raises
        CorruptStream (and nothing else) on invalid input; after that the decoder is unusable.
        """

    @property
    def idle(self) -> bool:
        """True when no partial block or frame is held: a fresh decoder could take over at
        the current input offset and produce exactly the output this one would."""

    def finish(self) -> None:
        """Declare the stream complete; raise CorruptStream if a partial block is held."""


class NoneDecoder:
    """The uncompressed log: bytes pass through without a copy."""

    codec = "none"

    def __init__(self, offset: int = 0) -> None:
        del offset  # every offset is a boundary; nothing to report

    def feed(self, data: bytes) -> bytes:
        return data

    @property
    def idle(self) -> bool:
        return True

    def finish(self) -> None:
        return None


class _BlockDecoder:
    """Shared shape of the block formats: parse whole blocks, keep the incomplete tail."""

    codec = ""

    def __init__(self, offset: int = 0) -> None:
        self._offset = offset  # stream offset of the first byte in `_pending`
        self._pending = b""

    @property
    def idle(self) -> bool:
        return not self._pending

    def feed(self, data: bytes) -> bytes:
        buf = self._pending + data if self._pending else data
        out: list[bytes] = []
        try:
            used = self._blocks(buf, out)
        except CorruptStream as error:
            error.partial = b"".join(out)
            raise
        self._pending = buf[used:]
        self._offset += used
        return b"".join(out)

    def finish(self) -> None:
        if self._pending:
            raise CorruptStream(
                f"{self.codec}: stream ends inside a block ({len(self._pending)} bytes of an "
                f"incomplete block at byte {self._offset})",
                offset=self._offset + len(self._pending),
            )

    def _blocks(self, buf: bytes, out: list[bytes]) -> int:
        """Append the output of every whole block in `buf`; return the bytes they span."""
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

    def _blocks(self, buf: bytes, out: list[bytes]) -> int:
        view = memoryview(buf)
        pos, end, size = 0, len(buf), self._HEADER.size
        while end - pos >= size:
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

    def _blocks(self, buf: bytes, out: list[bytes]) -> int:
        view = memoryview(buf)
        pos, end = 0, len(buf)
        while end - pos >= 4:
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

    def _blocks(self, buf: bytes, out: list[bytes]) -> int:
        view = memoryview(buf)
        pos, end = 0, len(buf)
        while end - pos >= 5:
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


class ZstdDecoder:
    """Concatenated zstd frames, decoded by libzstd; frame and block headers are walked here.

    libzstd's streaming decoder does not say whether a stream stopped between frames or in the
    middle of one, which `idle` and `finish` need, so a small parser follows the frame and
    block headers (a few bytes per block of up to 128 KiB; payloads are only skipped). Knowing
    where frames end also lets a damaged frame lose only its own output.
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

    def feed(self, data: bytes) -> bytes:
        view = memoryview(data)
        frame_start = self._frame_start  # of the frame the first byte belongs to
        ends: list[int] = []
        try:
            self._walk(data, ends)
        except CorruptStream as error:
            # Everything before the damaged header still decodes.
            good = max(0, error.offset - self._offset)
            try:
                error.partial = self._decode(
                    view[:good], [e for e in ends if e <= good], frame_start
                )
            except CorruptStream as earlier:
                error.partial = earlier.partial
            raise
        out = self._decode(view, ends, frame_start)
        self._offset += len(data)
        return out

    def finish(self) -> None:
        if not self.idle:
            raise CorruptStream(
                f"zstd: stream ends inside the frame that starts at byte {self._frame_start}",
                offset=self._offset,
            )

    def _decode(self, view: memoryview, ends: list[int], frame_start: int) -> bytes:
        """Decode `view` (frames ending at `ends`) in two calls: the rest of the frame open
        before it, then everything after. A failure in the second call is located by decoding
        its frames again one by one, so the output before the damaged frame is kept."""
        split = ends[0] if ends else len(view)
        try:
            head = self._stream.decompress(view[:split])
        except zstandard.ZstdError as error:
            raise self._undecodable(frame_start, error, b"") from None
        if split == len(view):
            return head
        try:
            return head + self._stream.decompress(view[split:])
        except zstandard.ZstdError:
            raise self._locate(view, ends, head) from None

    def _locate(self, view: memoryview, ends: list[int], head: bytes) -> CorruptStream:
        fresh = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        out = [head]
        bounds = [*ends, len(view)] if ends[-1] < len(view) else ends
        for start, stop in itertools.pairwise(bounds):
            try:
                out.append(fresh.decompress(view[start:stop]))
            except zstandard.ZstdError as error:
                return self._undecodable(self._offset + start, error, b"".join(out))
        # Not reproduced frame by frame (libzstd should agree with itself): blame them all.
        return self._undecodable(self._offset + ends[0], zstandard.ZstdError("unknown"), head)

    @staticmethod
    def _undecodable(at: int, error: zstandard.ZstdError, partial: bytes) -> CorruptStream:
        return CorruptStream(
            f"zstd: undecodable frame starting at byte {at} ({error})", offset=at, partial=partial
        )

    def _walk(self, data: bytes, ends: list[int]) -> None:
        """Advance the header parser over `data`, appending the offsets where frames end."""
        pos, end = 0, len(data)
        while pos < end:
            if self._skip:
                step = min(self._skip, end - pos)
                self._skip -= step
                pos += step
                if not self._skip and self._frame_ends_after_skip:
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


_DECODERS: Final[dict[str, Callable[[int], Decoder]]] = {
    "none": NoneDecoder,
    "zstd": ZstdDecoder,
    "lz4": Lz4Decoder,
    "snappy": SnappyDecoder,
}


def _lzf_raw() -> RawLzf:
    """The raw LZF block decoder of the `python-lzf` package, imported on first use."""
    try:
        module = importlib.import_module("lzf")
    except ImportError:
        raise CodecUnavailable(
            "lzf: decoding needs the python-lzf package (module 'lzf'), which is not installed"
        ) from None
    decompress: RawLzf = module.decompress
    return decompress


def decoder_for(codec: str, *, offset: int = 0) -> Decoder:
    """A fresh decoder for `codec` (one of CODECS); `offset` is the stream offset of the first
    byte it will be fed, used in error messages. A fresh decoder may start at any block or
    frame boundary, not only at the start of the stream."""
    if codec == "lzf":
        return LzfDecoder(offset, raw=_lzf_raw())
    make = _DECODERS.get(codec)
    if make is None:
        raise UnknownCodec(f"unknown codec {codec!r}; known: {', '.join(sorted(CODECS))}")
    return make(offset)
