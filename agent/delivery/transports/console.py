"""Console transport: each signed event as one line on standard output.

The line is the event exactly as the file transport writes it (the signed RunEvent JSON,
`lineageAgent_signature` inside), so `lineage-agent verify` reads either. The agent's own log
lines also go to standard output; they are JSON objects without an `eventType` key, so a
reader tells the two apart. Writes run in a worker thread: a slow reader of the pipe (a
terminal, journald) blocks that thread, never the event loop. A failed write (a closed pipe)
drops the batch as `write_error`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence

from agent.delivery.envelope import Envelope
from agent.errors import DeliveryError


class ConsoleTransport:
    """Writes each batch to a file descriptor (standard output), one event per line."""

    name = "console"

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._closed = False
        self._lock = threading.Lock()  # one batch's lines stay together

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Write the batch, one line per event; raise DeliveryError("write_error") if not."""
        if not batch:
            return
        if self._closed:
            raise DeliveryError("write_error", "cannot write to standard output: transport closed")
        data = b"".join(envelope.payload + b"\n" for envelope in batch)
        try:
            await asyncio.to_thread(self._write, data)
        except OSError as exc:
            raise DeliveryError(
                "write_error", f"cannot write to standard output: {exc.strerror or exc}"
            ) from None

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        with self._lock:
            while view:  # bounded: each pass writes at least one byte or raises
                written = os.write(self._fd, view)
                view = view[written:]

    async def aclose(self) -> None:
        """Nothing to release: standard output stays open; idempotent."""
        self._closed = True
