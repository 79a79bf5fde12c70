"""Incremental decoders for the codecs Spark writes event logs with, in Spark's on-disk formats.

A decoder is fed the bytes appended to a compressed event-log file, in pieces of any size, and
returns whatever decompressed bytes they complete; an incomplete block or frame waits inside
until its rest arrives. This is what lets an in-progress log be read while Spark writes it.
`pieces` returns the same bytes one block at a time, so what a small input expands to (a zstd
file of kilobytes can hold gigabytes) is never in memory at once.

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
from collections.abc import Callable, Iterator
from typing import Final, Protocol

from agent.errors import CodecUnavailable, UnknownCodec
from agent.spark.eventlog.blocks import Lz4Decoder, LzfDecoder, RawLzf, SnappyDecoder
from agent.spark.eventlog.zstd import ZstdDecoder

#: Spark's codec short names, plus "none" for an uncompressed log.
CODECS: Final = ("none", "zstd", "lz4", "snappy", "lzf")


class Decoder(Protocol):
    """Decompresses one codec stream fed in pieces of any size."""

    codec: str

    def feed(self, data: bytes) -> bytes:
        """Decode `data`, the next bytes of the stream; return the output they complete.

        An incomplete block or frame at the end is kept until the next call. Raises
        CorruptStream (and nothing else) on invalid input; after that the decoder is unusable.
        """

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """`feed`'s output in pieces of at most one block each, whatever the ratio."""

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

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """The bytes as they are, one piece."""
        yield data

    @property
    def idle(self) -> bool:
        return True

    def finish(self) -> None:
        return None


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
