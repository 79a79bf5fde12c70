"""One open event file: its bytes read in order, decoded block by block, cut into lines.

`LogReader` walks an application's log from file to file; a `FileStream` is its current
file. It reads at most `read_size` compressed bytes at a time and hands the decoder's output
to the line splitter one piece (at most a codec block) at a time, so a batch stops within a
block of its budget and memory stays bounded by `max_line_bytes` plus a block, whatever the
compression ratio. A damaged stream is reported once through `on_error` and the file is
abandoned: the lines before the damage stay delivered. The bytes come through a `Handle`:
a local descriptor (`FdHandle`) or a file on a store (`stores.RemoteFile`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Protocol

from agent.errors import CorruptStream
from agent.spark.eventlog.codecs import Decoder, decoder_for
from agent.spark.eventlog.lines import LineSplitter


class Handle(Protocol):
    """Where a stream's bytes come from, read in order from an offset."""

    def read(self, size: int) -> bytes:
        """Up to `size` bytes from the current offset; b"" at the current end."""

    def seek(self, offset: int) -> None:
        """Continue reading at `offset`."""

    def size(self) -> int:
        """The file's size as last seen."""

    def follow(self, path: str) -> None:
        """The file was renamed to `path` (an open descriptor needs nothing)."""

    def close(self) -> None:
        """Release what is held; idempotent."""


class FdHandle:
    """An open local file descriptor, owned from now on."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def read(self, size: int) -> bytes:
        assert self.fd is not None
        return os.read(self.fd, size)

    def seek(self, offset: int) -> None:
        assert self.fd is not None
        os.lseek(self.fd, offset, os.SEEK_SET)

    def size(self) -> int:
        assert self.fd is not None
        return os.fstat(self.fd).st_size

    def follow(self, path: str) -> None:
        """The descriptor reads on through a rename."""

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class FileStream:
    """The decoding state of one open file; closing it closes the handle."""

    def __init__(
        self,
        handle: Handle,
        codec: str,
        *,
        max_line_bytes: int,
        read_size: int,
        on_skip: Callable[[int], None],
        on_error: Callable[[str, int], None],
        resume: tuple[int, int, int | None] | None = None,
    ) -> None:
        """`resume` = (lines, decoded bytes, clean offset or None) of a position in this
        very file; raises CodecError for a codec without a decoder (the handle stays open)."""
        self.handle: Handle | None = handle
        self.read_size = read_size
        self.offset = 0  # compressed bytes of the file read
        self.stopped = False  # abandoned after an error
        self._on_error = on_error
        self._pieces: Iterator[bytes] | None = None  # the decoded rest of the latest read
        self._produced = 0  # decoded bytes of the file, including those dropped on resume
        self._discard = 0  # decoded bytes still to drop (consumed before a resume)
        self._splitter = LineSplitter(max_line_bytes, on_skip)
        if resume is not None:
            lines, decoded, seek_to = resume
            self._splitter.lines = lines
            if seek_to is not None:
                handle.seek(seek_to)
                self.offset = seek_to
                self._produced = decoded
            else:
                self._discard = decoded
        self._decoder: Decoder | None = decoder_for(codec, offset=self.offset)
        self._idle = True  # the decoder's `idle` when it was released

    @property
    def is_open(self) -> bool:
        return self.handle is not None

    @property
    def lines(self) -> int:
        """Lines of the file consumed (returned or skipped)."""
        return self._splitter.lines

    @property
    def decoded(self) -> int:
        """Decoded bytes of the file consumed as whole lines."""
        return self._produced + self._discard - self._splitter.held

    @property
    def clean(self) -> bool:
        """A fresh decoder could continue at `offset`: nothing decoded is pending."""
        idle = self._decoder.idle if self._decoder is not None else self._idle
        return (
            idle
            and self._pieces is None
            and not self._splitter.held
            and not self._discard
            and not self.stopped
        )

    def pump(self, lines: list[bytes], budget: list[int]) -> bool:
        """Read the file to its current end; False when the batch filled up first."""
        while True:
            if self._pieces is not None and not self._drain(lines, budget):
                return False
            if self.handle is None or self._decoder is None:
                return True  # abandoned after an error
            if budget[0] <= 0:
                return False
            chunk = self.handle.read(self.read_size)
            if not chunk:
                size = self.handle.size()
                if size < self.offset:
                    self.fail(f"file shrank to {size} bytes", self.offset)
                return True
            self.offset += len(chunk)
            self._pieces = self._decoder.pieces(chunk)

    def finish(self, lines: list[bytes]) -> None:
        """The file is final and read to its end: check the stream ended cleanly and return
        its last line if the newline after it is missing."""
        if not self.stopped and self._decoder is not None:
            try:
                self._decoder.finish()
            except CorruptStream as error:
                self.fail(error.detail, error.offset)
        if self.stopped:
            self._splitter.drop_partial()
        else:
            self._splitter.finish(lines)
        self.close()

    def fail(self, detail: str, offset: int) -> None:
        """Abandon the file after an error; lines already returned stay returned."""
        self._on_error(detail, offset)
        self.stopped = True
        self._splitter.drop_partial()
        self.close()

    def close(self) -> None:
        """Release the descriptor and the decoder; idempotent. The decoder goes at once: the
        reader and this stream refer to each other (the callbacks), so without this its
        native buffers (libzstd's window) would wait for the cyclic garbage collector, which
        does not see their size: 5,000 logs read in a row held 140 MiB that way."""
        self._pieces = None
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        if self._decoder is not None:
            self._idle = self._decoder.idle
            self._decoder = None

    def _drain(self, lines: list[bytes], budget: list[int]) -> bool:
        """Split the decoded pieces of the latest read, one at a time, until the batch is
        full (False) or they are all taken."""
        pieces = self._pieces
        assert pieces is not None
        while budget[0] > 0:
            try:
                data = next(pieces, None)
            except CorruptStream as error:
                self._split(error.partial, lines)
                self.fail(error.detail, error.offset)
                return True
            if data is None:
                self._pieces = None
                return True
            budget[0] -= len(data)
            self._split(data, lines)
        return False

    def _split(self, data: bytes, lines: list[bytes]) -> None:
        """Hand decoded bytes to the line splitter, after those consumed before a resume."""
        self._produced += len(data)
        if self._discard:
            if len(data) <= self._discard:
                self._discard -= len(data)
                return
            data = data[self._discard :]
            self._discard = 0
        self._splitter.feed(data, lines)
