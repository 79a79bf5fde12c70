"""Envelopes as the pipeline hands them to a transport, for the transport tests."""

from __future__ import annotations

import hashlib
import time

from agent.delivery.envelope import Envelope


def start_envelope(payload: bytes, run_id: str) -> Envelope:
    """`payload` as the START event of run `run_id` of application `app-1`, digested and
    produced now."""
    return Envelope(
        payload=payload,
        run_id=run_id,
        event_type="START",
        app_id="app-1",
        digest=hashlib.sha256(payload).hexdigest(),
        produced=time.monotonic(),
    )
