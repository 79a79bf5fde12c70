"""Reading the config values of the special kinds (durations, paths, URLs, environment
variable names, listen addresses, tags, Spark property names) and saying what a value's
bounds are, in words."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import typing
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from yaml.nodes import Node, ScalarNode

from agent.config.hosts import host_pattern_problem
from agent.config.model import Bounds, Kind
from agent.config.yamlnodes import BOOL, FLOAT, INT, STR, describe, scalar
from agent.errors import ConfigError


class NodeReader(Protocol):
    """What a kind reader needs of the config walk."""

    base_dir: str
    relative: dict[str, str]  # dotted key -> a relative path as written, before resolution

    def error(self, node: Node, path: str, what: str) -> ConfigError: ...

    def string(self, node: Node, path: str) -> str: ...


def number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_SPANS = ((86400.0, "d"), (3600.0, "h"), (60.0, "m"), (1.0, "s"))


def duration_text(seconds: float) -> str:
    """`seconds` in the largest unit that writes it whole: 3600 -> 1h, 90 -> 90s, 0.5 -> 500ms."""
    for size, unit in _SPANS:
        if seconds and seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    if seconds and (seconds * 1000).is_integer():
        return f"{int(seconds * 1000)}ms"
    return f"{number_text(seconds)}s"


def bounds_text(bounds: Bounds, show: typing.Callable[[float], str] = number_text) -> str:
    if bounds.low_open:
        return f" > {show(bounds.low)} and <= {show(bounds.high)}"
    return f" from {show(bounds.low)} to {show(bounds.high)}"


def within(value: float, bounds: Bounds) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if value < bounds.low or (bounds.low_open and value == bounds.low):
        return False
    return value <= bounds.high


_DURATION = re.compile(r"(-?(?:\d+(?:\.\d+)?|\.\d+))(ms|s|m|h|d)?")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LISTEN = re.compile(r"\[(?P<v6>[^\]]+)\]:(?P<port6>\d{1,5})|(?P<host>[^:\[\]]+):(?P<port>\d{1,5})")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_TAG_KEY = re.compile(r"[A-Za-z0-9_.\-/]+")
_PROPERTY = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)+")


def parse_duration(text: str) -> float | None:
    """Seconds of a duration as the config writes them (`500ms`, `5s`, `2m`, `1h`, `1d`, or a
    bare number of seconds); None for anything else. Bounds are the caller's."""
    match = _DURATION.fullmatch(text.strip())
    return None if match is None else float(match[1]) * _DURATION_UNITS[match[2]]


def _read_duration(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> float:
    # Read from the text as written: YAML 1.1 would turn `1:30` into 90 (base 60).
    text = node.value if isinstance(node, ScalarNode) and node.tag in (STR, INT, FLOAT) else ""
    parsed = parse_duration(str(text)) if str(text) == str(text).strip() else None
    if parsed is None:
        raise reader.error(
            node, path, f"expected a duration like 5s or 500ms, got {describe(node)}"
        )
    if bounds is None:
        raise TypeError(f"{path}: a duration field needs Bounds (both ends)")
    seconds = parsed
    if not within(seconds, bounds):
        raise reader.error(
            node,
            path,
            f"expected a duration{bounds_text(bounds, duration_text)}, got {describe(node)}",
        )
    return seconds


def _read_path(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    text = reader.string(node, path)
    if text.startswith("file:"):
        parts = urlsplit(text)
        if (
            parts.netloc in ("", "localhost")
            and parts.path.startswith("/")
            and not (parts.query or parts.fragment)
        ):
            text = unquote(parts.path)
        else:
            text = ""
    elif _URL_SCHEME.match(text):
        text = ""
    if not text or "\0" in text:
        raise reader.error(
            node, path, f"expected a local path or a file:// URL, got {describe(node)}"
        )
    if not os.path.isabs(text):
        reader.relative[path] = text
    return os.path.normpath(os.path.join(reader.base_dir, text))


#: The URL schemes of stores Spark writes event logs to (agent.spark.eventlog.stores reads them).
STORE_SCHEMES = ("s3", "s3a", "gs", "abfs", "abfss", "hdfs", "webhdfs")


def _read_log_dir(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    text = reader.string(node, path)
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    if scheme not in STORE_SCHEMES:
        if _URL_SCHEME.match(text) and not text.startswith("file:"):
            raise reader.error(
                node,
                path,
                "expected a local path, a file:// URL or a URL with one of the schemes "
                f"{', '.join(STORE_SCHEMES)}, got {describe(node)}",
            )
        return _read_path(reader, node, path, bounds)
    try:
        parts = urlsplit(text)
        secret = parts.password is not None
        valid = bool(parts.hostname) and not (parts.query or parts.fragment) and parts.port != 0
    except ValueError:
        authority = text.partition("://")[2].partition("/")[0]
        secret, valid = "@" in authority and ":" in authority.rpartition("@")[0], False
    if secret:  # never echo it: the message names the key only
        raise reader.error(
            node,
            path,
            "a password in the URL is refused: the store's credentials come from its "
            "standard chain (environment, profile, instance role)",
        )
    if not valid or any(c.isspace() or c == "\0" for c in text):
        raise reader.error(
            node, path, f"expected {scheme}://<bucket or host>/<path>, got {describe(node)}"
        )
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def _read_http_url(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    text = reader.string(node, path)
    try:
        parts = urlsplit(text)
        port = parts.port  # raises ValueError when not a number from 0 to 65535
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0
    except ValueError:
        valid = False
    if not valid or any(c.isspace() for c in text):
        raise reader.error(
            node, path, f"expected an absolute http:// or https:// URL, got {describe(node)}"
        )
    return text


def _read_postgres_url(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    text = reader.string(node, path)
    try:
        parts = urlsplit(text)
        valid = parts.scheme in ("postgresql", "postgres") and parts.port != 0
    except ValueError:
        valid = False
    if not valid or any(c.isspace() for c in text):
        # Not echoed: the URL may carry a password.
        raise reader.error(node, path, "expected a postgresql:// URL (libpq's URI form)")
    return text


def _matching(
    reader: NodeReader, node: Node, path: str, pattern: re.Pattern[str], what: str
) -> str:
    """A non-empty string `pattern` matches whole; else an error saying it expected `what`."""
    text = reader.string(node, path)
    if not pattern.fullmatch(text):
        raise reader.error(node, path, f"expected {what}, got {describe(node)}")
    return text


def _read_env_name(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    return _matching(
        reader, node, path, _ENV_NAME, "an environment variable name like OPENLINEAGE_TOKEN"
    )


def _read_listen(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str | None:
    if scalar(node, (BOOL,)) is False or scalar(node, (STR,)) == "":
        return None
    # The text as written: a plain `10:20` is a YAML 1.1 base-60 integer, still host:port here.
    text = str(node.value) if isinstance(node, ScalarNode) and node.tag in (STR, INT) else ""
    match = _LISTEN.fullmatch(text)
    valid = match is not None
    if match is not None and match["v6"] is not None:
        try:
            ipaddress.IPv6Address(match["v6"])
        except ValueError:
            valid = False
    elif match is not None:
        host = match["host"]
        valid = bool(_HOST_NAME.fullmatch(host))
        if valid and host.replace(".", "").isdigit():  # all-numeric: must be a real IPv4
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                valid = False
    if not valid or match is None:
        raise reader.error(
            node,
            path,
            f"expected host:port or [ipv6]:port, or false to disable, got {describe(node)}",
        )
    if int(match["port"] or match["port6"]) > 65535:
        raise reader.error(node, path, f"expected a port from 0 to 65535, got {describe(node)}")
    return text


def _read_tag(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    text = reader.string(node, path)
    key, colon, value = text.partition(":")
    if not colon or not _TAG_KEY.fullmatch(key) or not value.strip():
        raise reader.error(
            node, path, f"expected a tag as key:value, like team:payments, got {describe(node)}"
        )
    return f"{key}:{value.strip()}"


def _read_property(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    return _matching(
        reader, node, path, _PROPERTY, "a Spark property name like spark.executor.memory"
    )


def _read_host_pattern(reader: NodeReader, node: Node, path: str, bounds: Bounds | None) -> str:
    text = reader.string(node, path)
    problem = host_pattern_problem(text)
    if problem is not None:
        raise reader.error(node, path, f"{problem}, got {describe(node)}")
    return text


KIND_READERS: dict[Kind, typing.Callable[[NodeReader, Node, str, Bounds | None], Any]] = {
    Kind.DURATION: _read_duration,
    Kind.PATH: _read_path,
    Kind.LOG_DIR: _read_log_dir,
    Kind.HTTP_URL: _read_http_url,
    Kind.ENV_NAME: _read_env_name,
    Kind.LISTEN: _read_listen,
    Kind.TAG: _read_tag,
    Kind.PROPERTY: _read_property,
    Kind.POSTGRES_URL: _read_postgres_url,
    Kind.HOST_PATTERN: _read_host_pattern,
}
