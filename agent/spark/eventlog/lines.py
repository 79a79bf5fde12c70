"""Decoded bytes in, complete lines out: the line assembly of the tailing reader.

Lines are cut with `bytes.split`, so only an overlong line costs work per line. A partial
last line is held until its newline arrives; a line longer than `max_line_bytes` is never
held whole: once it passes the bound nothing more of it is kept, only its length counted, and
it is reported (once) through `on_skip` with its line number.
"""

from __future__ import annotations

from collections.abc import Callable


class LineSplitter:
    """Assembles the lines of one file; `lines` counts those consumed (returned or skipped)."""

    def __init__(self, max_line_bytes: int, on_skip: Callable[[int], None]) -> None:
        self.max_line_bytes = max_line_bytes
        self.lines = 0
        self.held = 0  # decoded bytes of the unfinished line (kept or being skipped)
        self._on_skip = on_skip  # called with the 1-based number of a skipped line
        self._partial: list[bytes] = []
        self._skipping = False

    def reset(self, lines: int = 0) -> None:
        """Start a file (or resume one after `lines` consumed lines)."""
        self.lines = lines
        self.held = 0
        self.drop_partial()

    def drop_partial(self) -> None:
        """Forget the unfinished line (its file was abandoned)."""
        self._partial = []
        self._skipping = False

    def feed(self, data: bytes, out: list[bytes]) -> None:
        """Append to `out` the lines `data` completes."""
        parts = data.split(b"\n")
        tail = parts.pop()
        if parts:
            first = 0
            if self._skipping:  # the overlong line ends here; it was reported already
                self._skipping = False
                self.lines += 1
                first = 1
            elif self._partial:
                self._partial.append(parts[0])
                self._take(b"".join(self._partial), out)
                self._partial = []
                first = 1
            body = parts[first:] if first else parts
            if body and max(map(len, body)) > self.max_line_bytes:
                for line in body:
                    self._take(line, out)
            else:
                out.extend(body)
                self.lines += len(body)
            self.held = 0
        if tail:
            self._hold(tail)

    def finish(self, out: list[bytes]) -> None:
        """The file ended: its last line counts even without a newline after it."""
        if self._partial:
            out.append(b"".join(self._partial))
        if self._partial or self._skipping:
            self.lines += 1
            self.held = 0
        self.drop_partial()

    def _take(self, line: bytes, out: list[bytes]) -> None:
        if len(line) > self.max_line_bytes:
            self._on_skip(self.lines + 1)
        else:
            out.append(line)
        self.lines += 1

    def _hold(self, piece: bytes) -> None:
        """Keep the start of an unfinished line, or switch to skipping it once it is too
        long: then nothing of it is kept, only its length counted."""
        self.held += len(piece)
        if self._skipping:
            return
        if self.held > self.max_line_bytes:
            self._partial = []
            self._skipping = True
            self._on_skip(self.lines + 1)
            return
        self._partial.append(piece)
