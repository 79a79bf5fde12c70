"""Deterministic run ids: the same Spark run always gets the same UUID.

The layout is UUIDv7's (RFC 9562): the first 48 bits are the run's start time in Unix
milliseconds, then the version nibble 7, then 12 bits, the variant bits `10` and 62 more
bits. Where v7 takes those 74 bits at random, here they are the first 74 bits of
SHA-256(`app_id/attempt/kind/key`), so replaying a log, or the agent restarting in the
middle of one, yields the same id, while ids still sort by start time like real v7 ids.

`kind` separates id spaces: `application` (key empty), `sql` (key = root execution id),
`rdd` (key = job id).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Final

_MAX_MS: Final = (1 << 48) - 1


def run_id(start_ms: int, app_id: str, attempt: str | None, kind: str, key: int | str = "") -> str:
    """The run id of one run of one Spark application attempt, as a canonical UUID string."""
    stamp = min(max(start_ms, 0), _MAX_MS)  # clamp: a corrupt timestamp must not raise
    digest = hashlib.sha256(f"{app_id}/{attempt or ''}/{kind}/{key}".encode()).digest()
    bits = int.from_bytes(digest[:10], "big") >> 6  # 74 bits
    rand_a = bits >> 62  # 12 bits
    rand_b = bits & ((1 << 62) - 1)
    value = (stamp << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


def start_ms_of(run: str) -> int:
    """The start time (Unix ms) a run id carries in its first 48 bits."""
    return uuid.UUID(run).int >> 80
