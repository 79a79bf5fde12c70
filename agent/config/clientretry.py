"""The OpenLineage client's `retry` mapping of an http transport (urllib3's `Retry` names, as
the client passes them), read into `RetryConfig`: the keys given replace the agent's
defaults, as the client merges a given mapping over its own. Errors name the origin (file and
line, or the variable) and the key as written."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from agent.config.clientsources import Leaf
from agent.config.kinds import parse_duration
from agent.config.model import HOUR, RetryConfig
from agent.errors import ConfigError

#: The keys of `retry` the agent reads, in urllib3's order.
RETRY_KEYS: Final = tuple(f.name for f in dataclasses.fields(RetryConfig))
_COUNTS: Final = ("total", "connect", "read", "status")
_SECONDS: Final = ("backoff_factor", "backoff_max", "backoff_jitter")
_MAX_RETRIES: Final = 100


def read_retry(tree: Any, where: Leaf, origins: list[tuple[str, str]]) -> RetryConfig:
    """`RetryConfig` from the client's `retry` mapping; `where` is the transport's `type`
    leaf, for a mapping written with no leaf of its own."""
    if not isinstance(tree, dict):
        leaf = tree if isinstance(tree, Leaf) else where
        raise leaf.error("retry: expected a mapping like {total: 10, backoff_factor: 0.5}")
    values: dict[str, Any] = {}
    for written, value in tree.items():
        name = written.lower()
        leaf = _first(value, where)
        if name not in RETRY_KEYS:
            shown = ", ".join(map(repr, RETRY_KEYS))
            raise ConfigError(
                f"{leaf.origin}: {leaf.key}: unknown key in retry (expected one of {shown})"
            )
        values[name] = _value(name, value, leaf)
        origins.append((f"lineage.http.retry.{name}", leaf.origin))
    return RetryConfig(**values)


def _value(name: str, value: Any, leaf: Leaf) -> Any:
    if name in _COUNTS:
        if name in ("connect", "read") and leaf.value is None and isinstance(value, Leaf):
            return None
        return _count(leaf)
    if name in _SECONDS:
        return _seconds(leaf)
    if name == "respect_retry_after_header":
        if isinstance(leaf.value, bool):
            return leaf.value
        if isinstance(leaf.value, str) and leaf.value.strip().lower() in ("true", "false"):
            return leaf.value.strip().lower() == "true"
        raise leaf.error(f"expected true or false, got {leaf.value!r}")
    items = value if isinstance(value, list) else [value]
    leaves = [_first(item, leaf) for item in items]
    if not leaves:
        raise leaf.error("expected at least one item, got an empty list")
    if name == "status_forcelist":
        return tuple(dict.fromkeys(_status(item) for item in leaves))
    methods = []
    for item in leaves:
        if not isinstance(item.value, str) or not item.value.strip():
            raise item.error(f"expected an HTTP method name, got {item.value!r}")
        methods.append(item.value.strip().upper())
    return tuple(dict.fromkeys(methods))


def _count(leaf: Leaf) -> int:
    number = leaf.value
    if isinstance(number, str) and number.strip().isdigit():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= _MAX_RETRIES:
        raise leaf.error(f"expected an integer from 0 to {_MAX_RETRIES}, got {leaf.value!r}")
    return number


def _seconds(leaf: Leaf) -> float:
    raw = leaf.value
    seconds: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = float(raw)
    elif isinstance(raw, str):
        seconds = parse_duration(raw)
    if seconds is None or not 0 <= seconds <= HOUR:
        raise leaf.error(f"expected seconds from 0 to 3600 (or a duration like 30s), got {raw!r}")
    return seconds


def _status(leaf: Leaf) -> int:
    status = leaf.value
    if isinstance(status, str) and status.strip().isdigit():
        status = int(status)
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise leaf.error(f"expected an HTTP status from 100 to 599, got {leaf.value!r}")
    return status


def _first(value: Any, where: Leaf) -> Leaf:
    """The leaf of `value`, or the first under it, to say where it was written."""
    if isinstance(value, Leaf):
        return value
    children = list(value.values()) if isinstance(value, dict) else list(value or ())
    return _first(children[0], where) if children else where
