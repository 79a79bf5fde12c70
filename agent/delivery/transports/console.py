"""Console transport: each signed event as one line on standard output.

The line is the event exactly as the file transport writes it (the signed RunEvent JSON,
`lineageAgent_signature` inside), so `lineage-agent verify` reads either. The agent's own log
lines also go to standard output; they are JSON objects without an `eventType` key, so a
reader tells the two apart. Writes run in a worker thread: a slow reader of the pipe (a
terminal, journald) blocks that thread, never the event loop. A failed write (a closed pipe)
before any byte of the batch left drops it as `write_error`; after some did (lines may have
reached the reader), the batch is `Unconfirmed` (`network`), never written again.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence

from agent.delivery.envelope import Envelope
from agent.errors import DeliveryError, Unconfirmed


class ConsoleTransport:
    """Writes each batch to a file descriptor (standard output), one event per line."""

    name = "console"

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._closed = False
        self._lock = threading.Lock()  # one batch's lines stay together

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Write the batch, one line per event; raise DeliveryError("write_error") if nothing
        of it was written, Unconfirmed("network") if only part of it was."""
        if not batch:
            return
        if self._closed:
            raise DeliveryError("write_error", "cannot write to standard output: transport closed")
        data = b"".join(envelope.payload + b"\n" for envelope in batch)
        sent, error = await asyncio.to_thread(self._write, data)
        if error is None:
            return
        detail = f"cannot write to standard output: {error.strerror or error}"
        if sent:
            raise Unconfirmed("network", f"{detail} after {sent} of {len(data)} bytes")
        raise DeliveryError("write_error", detail)

    def _write(self, data: bytes) -> tuple[int, OSError | None]:
        """Bytes written, and the error that stopped the write before the end, if one did."""
        view = memoryview(data)
        sent = 0
        with self._lock:
            while sent < len(data):  # bounded: each pass writes at least one byte or returns
                try:
                    sent += os.write(self._fd, view[sent:])
                except OSError as exc:
                    return sent, exc
        return sent, None

    async def aclose(self) -> None:
        """Nothing to release: standard output stays open; idempotent."""
        self._closed = True
