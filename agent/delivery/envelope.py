"""The unit that flows from the signer through the queues to the transports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Envelope:
    """One signed RunEvent, serialized once; transports ship `payload` as is.

    `app_id` is the Spark application id (the in-memory source's name in tests), the key
    of the health tracker and the ledger; `digest` is the SHA-256 hex of `payload`, which the
    delivery ledger and `describe` report; `produced` is a `time.monotonic()` stamp
    taken when the event entered the pipeline, for the delivery latency histogram.
    """

    payload: bytes
    run_id: str
    event_type: str
    app_id: str
    digest: str
    produced: float
