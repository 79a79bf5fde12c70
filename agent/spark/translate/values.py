"""Typed reads of untrusted event-log JSON: a wrong type gives None (or nothing), never raises.

Spark writes numbers as JSON numbers in its own events but as decimal strings in job
properties and SQL accumulators; these helpers accept exactly the shapes Spark writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any


def as_int(value: object) -> int | None:
    """A JSON integer (booleans are not integers here)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_int_text(value: object) -> int | None:
    """Job properties are strings: `spark.sql.execution.id` is "3"."""
    if isinstance(value, str):
        return int(value) if value.isdigit() else None
    return as_int(value)


def as_number(value: object) -> int | None:
    """Accumulator values: ints for task metrics, decimal strings for SQL metrics."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return as_int_text(value)


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def as_uuid(value: str | None) -> str | None:
    """The canonical form of a UUID string, or None when it is not one."""
    try:
        return str(uuid.UUID(value)) if value else None
    except ValueError:
        return None


def int_list(value: object) -> list[int]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def mappings(value: object) -> list[Mapping[str, Any]]:
    """The objects of a JSON array."""
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def properties(
    section: object, keys: Collection[str], prefixes: tuple[str, ...] = ()
) -> Iterable[tuple[str, str]]:
    """The wanted string properties of an EnvironmentUpdate section, as Spark writes them:
    an object (4.x) or a list of [key, value] pairs; `keys` exactly, `prefixes` by prefix."""
    if isinstance(section, Mapping):  # look up the few wanted keys, not the ~1000 present
        found = [(key, section.get(key)) for key in keys]
        if prefixes:
            found += [
                (k, v) for k, v in section.items() if isinstance(k, str) and k.startswith(prefixes)
            ]
        return [(k, v) for k, v in found if isinstance(v, str)]
    if not isinstance(section, Sequence) or isinstance(section, str):
        return []
    return [
        (p[0], p[1])
        for p in section
        if isinstance(p, Sequence)
        and len(p) == 2
        and all(isinstance(x, str) for x in p)
        and (p[0] in keys or p[0].startswith(prefixes))
    ]
