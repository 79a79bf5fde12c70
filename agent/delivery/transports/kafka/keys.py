"""The record key of an event, as the OpenLineage client's Kafka transport computes it:
`run:<namespace>/<name>` of the run's root parent job, else of its parent job, else of its own
job. A Spark application's run carries no parent and keys by its own job; its steps carry a
ParentRunFacet naming the application (and its root), so they key by the application's job
(or the root's), and one consumer of that partition sees them in the order they were sent."""

from __future__ import annotations

from typing import Any

import orjson


def message_key(payload: bytes) -> str:
    """The client's key of the RunEvent in `payload` (its JSON); `""` when it is no event."""
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(event, dict):
        return ""
    parent = _mapping(_mapping(event.get("run")).get("facets")).get("parent")
    for holder in (_mapping(_mapping(parent).get("root")), _mapping(parent)):
        job = _mapping(holder.get("job"))
        if job.get("namespace") and job.get("name"):
            return f"run:{job['namespace']}/{job['name']}"
    job = _mapping(event.get("job"))
    return f"run:{job.get('namespace')}/{job.get('name')}"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
