"""Waits on a condition with a deadline, for tests: a busy machine makes them return later,
never fail sooner (a sleep of a guessed length does both)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(check: Callable[[], object], seconds: float = 30) -> None:
    """Return once `check()` is true, looking every 20 ms; TimeoutError after `seconds`."""
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.02)


def wait(check: Callable[[], object], seconds: float = 30, what: str = "the condition") -> None:
    """Return once `check()` is true, looking every 20 ms; fail naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds:g}s")
        time.sleep(0.02)
