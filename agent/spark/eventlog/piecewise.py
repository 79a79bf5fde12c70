"""The decoders that hand out their output one block at a time share how `feed` joins it."""

from __future__ import annotations

from collections.abc import Iterator

from agent.errors import CorruptStream


class PiecewiseDecoder:
    """`feed` is `pieces` joined; on damage, the pieces before it travel in `partial`."""

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """The decoded output of `data`, one block at a time."""
        raise NotImplementedError

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        try:
            out.extend(self.pieces(data))
        except CorruptStream as error:
            error.partial = b"".join(out) + error.partial
            raise
        return b"".join(out)
