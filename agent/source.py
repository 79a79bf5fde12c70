"""The source seam: whatever produces RunEvents for the pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

#: Called once per RunEvent: (execution key, event dict). Never blocks, never raises.
Sink = Callable[[str, Mapping[str, Any]], None]


class Source(Protocol):
    """Produces OpenLineage RunEvent dicts until `stop` is set."""

    name: str

    async def run(self, sink: Sink, stop: asyncio.Event) -> None:
        """Feed every event to `sink` in order; return soon after `stop` is set."""
