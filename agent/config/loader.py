"""Reading the YAML config file into the dataclasses of `agent.config.model`.

Errors:
    ConfigError: the file is missing, unreadable, not a regular file (a FIFO or device is
    never read from), over 1 MiB, not YAML, or a key is unknown, of the wrong type or out of
    range. The message names the file, the line and the dotted key,
    e.g. ``/etc/lineage-agent/config.yaml:7: lineage.queue_size: expected an integer >= 0,
    got 'many'``; a file with several such keys gets one line for each (`messages`), in
    the file's order, so that one `config check` shows them all. Config code never exits;
    `cli.py` maps ConfigError to exit 78.

The walk is driven by the dataclasses: a field's type and its `Kind` and `Bounds` decide how
its node is read. Rules that span several keys (http transport needs an endpoint, bearer auth
needs https) run after the walk.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import difflib
import os
import stat
import types
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, get_args, get_origin
from urllib.parse import urlsplit

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.config import client
from agent.config.clientsources import AgentSide
from agent.config.kinds import KIND_READERS, bounds_text, within
from agent.config.model import (
    AUTH_HEADERS,
    KAFKA_FIXED,
    KAFKA_REFUSED,
    AgentConfig,
    Bounds,
    KafkaTransportConfig,
    Kind,
    Secret,
    fields_of,
    is_secret_setting,
)
from agent.config.redact import redact_http_url, redact_url
from agent.config.yamlnodes import (
    BOOL,
    FLOAT,
    INT,
    MERGE,
    PLAIN_TAGS,
    STR,
    compose,
    describe,
    is_null,
    line_of,
    scalar,
)
from agent.errors import ConfigError
from agent.fsutil import file_kind

#: A config is a few KiB; anything larger is refused before it is read.
MAX_CONFIG_BYTES: Final = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Located:
    """A loaded config and where its keys are: for `config check`, which names the line of
    a key a later check refuses and the relative paths the file holds."""

    config: AgentConfig
    lines: Mapping[str, int]  # dotted key -> line of the key in the file
    relative: Mapping[str, str]  # dotted key -> relative path as written (resolved in config)


def load_config(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> AgentConfig:
    """Read and validate the YAML file at `path`; relative paths in it are taken from its folder.
    The OpenLineage client's variables and its openlineage.yml are read from `environ`
    (default: this process's environment); see `agent.config.client`."""
    return load_located(path, environ).config


def load_located(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Located:
    """`load_config`, with the line of every key and the relative paths as written."""
    source = os.fspath(path)
    text = read_text(source)
    return parse_located(
        text, source, base_dir=os.path.dirname(os.path.abspath(source)), environ=environ
    )


def read_text(source: str) -> str:
    """The UTF-8 text of the regular file `source` (at most MAX_CONFIG_BYTES)."""
    data = _read_regular(source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: cannot read: not UTF-8 text (byte {exc.start})") from None


def _read_regular(source: str) -> bytes:
    """The file's bytes; a FIFO, device or file over MAX_CONFIG_BYTES is refused unread."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{source}: cannot read: Is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"{source}: cannot read: not a regular file ({file_kind(info.st_mode)})"
            )
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(_too_large(source, info.st_size))
        chunks: list[bytes] = []
        size = 0
        for _ in range(MAX_CONFIG_BYTES // 65536 + 2):  # the file may grow while read
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise ConfigError(_too_large(source, size))
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _too_large(source: str, size: int) -> str:
    limit = MAX_CONFIG_BYTES // (1024 * 1024)
    return f"{source}: cannot read: {size} bytes, more than a config file may have ({limit} MiB)"


def parse_config(
    text: str,
    source: str,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    """Validate YAML `text`; errors name `source`. Relative paths resolve against `base_dir`
    (default: the folder of `source`, taken from the working directory if `source` is relative).
    `environ` (default: `os.environ`) holds the OpenLineage client's variables.
    """
    return parse_located(text, source, base_dir=base_dir, environ=environ).config


def parse_located(
    text: str,
    source: str,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Located:
    """`parse_config`, with the line of every key and the relative paths as written."""
    root = compose(text, source)
    if root is None or is_null(root):
        raise ConfigError(f"{source}: empty configuration; expected a 'lineage' section")
    reader = _Reader(source, os.path.abspath(base_dir or os.path.dirname(os.path.abspath(source))))
    if not isinstance(root, MappingNode):
        raise reader.error(root, "", f"expected a mapping of sections, got {describe(root)}")
    config: AgentConfig | None = None
    with contextlib.suppress(_Failed):
        config = reader.value(root, AgentConfig, "")
    if "lineage" not in reader.lines:
        reader.errors.append(reader.error(root, "lineage", "required section is missing"))
    if reader.errors or config is None:
        raise ConfigError(*_in_file_order(reader.errors))
    lineage, origins = client.resolve(
        config.lineage,
        AgentSide(
            reader.client_nodes.get("lineage.transport"),
            reader.lines.get("lineage.transport"),
            {
                key: reader.lines[key]
                for key in (
                    "lineage.http",
                    "lineage.file",
                    "lineage.kafka",
                    "lineage.http.endpoint",
                )
                if key in reader.lines
            },
            source,
            reader.base_dir,
        ),
        os.environ if environ is None else environ,
        read_text,
    )
    config = dataclasses.replace(config, lineage=lineage, source=source, origins=origins)
    _check_rules(config, reader, dict(origins))
    if reader.errors:
        raise ConfigError(*_in_file_order(reader.errors))
    return Located(config, dict(reader.lines), dict(reader.relative))


def _in_file_order(errors: list[ConfigError]) -> list[str]:
    """The messages by line (`file:LINE: ...`), each once, in the order found per line."""

    def line(message: str) -> int:
        where = message.rpartition(": ")[0]
        for part in where.split(":"):
            if part.isdigit():
                return int(part)
        return 0

    messages = list(dict.fromkeys(m for error in errors for m in error.messages))
    return sorted(messages, key=line)


def redacted(config: AgentConfig) -> dict[str, Any]:
    """The config as a JSON-able dict for logs and status: tuples become lists, and URLs lose
    their user info and query values (a collector URL could carry a key there)."""
    return _plain_section(config)


# --- cross-key rules -------------------------------------------------------------------------


def _check_rules(config: AgentConfig, reader: _Reader, origins: dict[str, str]) -> None:
    """The rules over several keys; each broken one is added to the reader's errors."""
    lineage = config.lineage
    for name in ("http", "kafka"):
        if name in lineage.transport and getattr(lineage, name) is None:
            required = "lineage.http.endpoint" if name == "http" else "lineage.kafka.topic"
            reader.errors.append(
                reader.error_at(
                    reader.lines.get("lineage.transport", 1),
                    required,
                    f"required because lineage.transport includes {name!r}",
                )
            )
    if lineage.kafka is not None and not lineage.kafka.config.get("bootstrap.servers"):
        reader.errors.append(
            reader.error_at(
                reader.lines.get("lineage.kafka.config", reader.lines.get("lineage.kafka", 1)),
                "lineage.kafka.config.bootstrap.servers",
                "required key is missing",
            )
        )
    elif lineage.kafka is not None:
        try:
            _check_kafka(lineage.kafka, reader, origins)
        except ConfigError as error:
            reader.errors.append(error)
    http = lineage.http
    if http is None:
        return

    def where(key: str) -> str:
        """`file:line: key:` of a seed key (or of its section), or a client setting's origin."""
        if key in origins:
            return f"{origins[key]}: {key}:"
        line = reader.lines.get(key) or reader.lines.get(key.rpartition(".")[0], 1)
        return f"{reader.source}:{line}: {key}:"

    auth = http.auth
    if auth is not None and auth.token_env is None and auth.api_key is None:
        reader.errors.append(
            ConfigError(f"{where('lineage.http.auth.token_env')} required key is missing")
        )
    if auth is not None:
        for key in ("endpoint", "batch_endpoint"):
            url = getattr(http, key)
            if url is not None and urlsplit(url).scheme != "https":
                reader.errors.append(
                    ConfigError(
                        f"{where(f'lineage.http.{key}')} {auth.type.replace('_', ' ')} auth needs"
                        " an https:// endpoint; refusing to send a token over http"
                    )
                )
    if any(urlsplit(url).scheme != "https" for url in (http.endpoint, http.batch_endpoint) if url):
        for name in http.headers:
            if name.lower() in AUTH_HEADERS:
                reader.errors.append(
                    ConfigError(
                        f"{where(f'lineage.http.headers.{name}')} a credential header needs"
                        " https:// endpoints; refusing to send it over http"
                    )
                )
    if (http.cert is None) != (http.key is None):
        missing = "key" if http.key is None else "cert"
        present = "cert" if missing == "key" else "key"
        reader.errors.append(
            ConfigError(
                f"{where(f'lineage.http.{present}')} a client certificate needs both cert and"
                f" key; lineage.http.{missing} is missing"
            )
        )


def _check_kafka(kafka: KafkaTransportConfig, reader: _Reader, origins: dict[str, str]) -> None:
    """Producer settings that could write a record twice are refused where they are written
    (the line of the agent's YAML, or the origin of a setting in the client's shape)."""

    def refuse(key: str, what: str) -> ConfigError:
        if key in origins:
            return ConfigError(f"{origins[key]}: {key}: {what}")
        line = reader.lines.get(key) or reader.lines.get("lineage.kafka")
        return reader.error_at(line or reader.lines.get("lineage.transport", 1), key, what)

    for name, value in kafka.config.items():
        key = f"lineage.kafka.config.{name}"
        fixed = KAFKA_FIXED.get(name)
        if fixed is not None and value.strip().lower() != fixed:
            raise refuse(
                key,
                f"must be {fixed} (at-most-once delivery: the producer never sends a record twice)",
            )
        if name in KAFKA_REFUSED:
            raise refuse(
                key,
                "transactions are not supported (they retry until a record is written, which "
                "at-most-once delivery forbids)",
            )


# --- the walk --------------------------------------------------------------------------------


def _unknown_key(name: str, known: list[str]) -> str:
    match = difflib.get_close_matches(name, known, n=1)
    if match:
        return f"unknown key (did you mean {match[0]!r}?)"
    return f"unknown key (expected one of {', '.join(map(repr, known))})"


class _Failed(Exception):
    """A section or list that could not be built; its errors are in the reader's list."""


class _Reader:
    """Walks composed YAML nodes into the dataclasses, remembering the line of every key.

    A bad key is recorded and the walk goes on with its siblings, so that one run names
    every bad key of the file; a section with a bad key is not built (`_Failed`)."""

    def __init__(self, source: str, base_dir: str) -> None:
        self.source = source
        self.base_dir = base_dir
        self.lines: dict[str, int] = {}  # dotted key -> line of the key
        self.relative: dict[str, str] = {}  # dotted key -> relative path as written
        self.errors: list[ConfigError] = []
        # nodes of fields written in the OpenLineage client's shape, read by agent.config.client
        self.client_nodes: dict[str, MappingNode] = {}

    def error_at(self, line: int, path: str, what: str) -> ConfigError:
        key = f" {path}:" if path else ""
        return ConfigError(f"{self.source}:{line}:{key} {what}")

    def error(self, node: Node, path: str, what: str) -> ConfigError:
        return self.error_at(line_of(node), path, what)

    def value(self, node: Node, hint: Any, path: str) -> Any:
        if node.tag not in PLAIN_TAGS:
            raise self.error(node, path, f"unsupported YAML tag {node.tag!r}")
        origin = get_origin(hint)
        if origin is Annotated:
            base, *extras = get_args(hint)
            bounds = next((e for e in extras if isinstance(e, Bounds)), None)
            kind = next((e for e in extras if isinstance(e, Kind)), None)
            if kind is not None:
                return KIND_READERS[kind](self, node, path, bounds)
            if bounds is None:
                raise TypeError(f"{path}: a number field needs Bounds (both ends)")
            return self.number(node, base, path, bounds)
        if origin in (typing.Union, types.UnionType):
            (arm,) = (a for a in get_args(hint) if a is not type(None))
            return None if is_null(node) else self.value(node, arm, path)
        if origin is Literal:
            return self.choice(node, get_args(hint), path)
        if origin is tuple:
            return self.items(node, get_args(hint)[0], path)
        if origin is collections.abc.Mapping:
            return self.strings(node, path)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.section(node, hint, path, line_of(node))
        if hint is bool:
            value = scalar(node, (BOOL,))
            if value is None:
                raise self.error(node, path, f"expected true or false, got {describe(node)}")
            return value
        if hint is str:
            return self.string(node, path)
        raise TypeError(f"{path}: the loader cannot read fields of type {hint!r}")

    def section(self, node: Node, cls: type, path: str, line: int) -> Any:
        if not isinstance(node, MappingNode) and not is_null(node):
            raise self.error(node, path, f"expected a mapping, got {describe(node)}")
        pairs = node.value if isinstance(node, MappingNode) else []  # empty section: defaults
        hints = fields_of(cls)
        first: dict[str, int] = {}
        values: dict[str, Any] = {}
        failed: set[str] = set()
        for key_node, value_node in pairs:
            try:
                self.pair(cls, key_node, value_node, path, hints, first, values, failed)
            except ConfigError as error:
                self.errors.append(error)
                failed.add(str(getattr(key_node, "value", "")))
        for f in dataclasses.fields(cls):
            missing = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if missing and f.name not in values and f.name not in failed:
                where = f"{path}.{f.name}" if path else f.name
                self.errors.append(
                    self.error_at(self.lines.get(path, line), where, "required key is missing")
                )
                failed.add(f.name)
        if failed:
            raise _Failed(path)
        return cls(**values)

    def pair(
        self,
        cls: type,
        key_node: Node,
        value_node: Node,
        path: str,
        hints: dict[str, Any],
        first: dict[str, int],
        values: dict[str, Any],
        failed: set[str],
    ) -> None:
        """Read one key of a section into `values`; ConfigError for a bad key, and the key
        goes to `failed` when its value could not be read (errors already recorded)."""
        if not isinstance(key_node, ScalarNode):
            raise self.error(key_node, path, f"expected a key name, got {describe(key_node)}")
        name = str(key_node.value)
        key_path = f"{path}.{name}" if path else name
        if key_node.tag == MERGE:
            raise self.error(key_node, path or "<<", "YAML merge keys (<<) are not supported")
        if name in first:
            raise self.error(
                key_node, key_path, f"duplicate key {name!r} (first at line {first[name]})"
            )
        first[name] = line_of(key_node)
        if name not in hints:
            raise self.error(key_node, key_path, _unknown_key(name, list(hints)))
        self.lines[key_path] = line_of(key_node)
        if isinstance(value_node, MappingNode) and _client_shape(cls, name):
            self.client_nodes[key_path] = value_node
            return
        try:
            values[name] = self.value(value_node, hints[name], key_path)
        except _Failed:
            failed.add(name)

    def items(self, node: Node, item_hint: Any, path: str) -> tuple[Any, ...]:
        """A list, or one value standing for a list of one; no duplicates."""
        if isinstance(node, MappingNode):
            raise self.error(node, path, "expected a list or a single value, got a mapping")
        if isinstance(node, SequenceNode) and not node.value:
            raise self.error(node, path, "expected at least one item, got an empty list")
        nodes = node.value if isinstance(node, SequenceNode) else [node]
        first: dict[Any, int] = {}
        items: list[Any] = []
        failed = False
        for index, item_node in enumerate(nodes):
            item_path = f"{path}[{index}]" if isinstance(node, SequenceNode) else path
            try:
                item = self.value(item_node, item_hint, item_path)
                if item in first:
                    raise self.error(
                        item_node, item_path, f"duplicate {item!r} (first at line {first[item]})"
                    )
            except ConfigError as error:
                self.errors.append(error)
                failed = True
                continue
            except _Failed:
                failed = True
                continue
            first[item] = line_of(item_node)
            items.append(item)
        if failed:
            raise _Failed(path)
        return tuple(items)

    def strings(self, node: Node, path: str) -> MappingProxyType[str, str]:
        """A mapping of names to scalar values, passed through as strings (librdkafka's
        properties: `bootstrap.servers: host:9092`, `linger.ms: 5`, `enable.ssl...: true`; HTTP
        headers)."""
        if not isinstance(node, MappingNode):
            raise self.error(node, path, f"expected a mapping, got {describe(node)}")
        values: dict[str, str] = {}
        for key_node, value_node in node.value:
            name = scalar(key_node, (STR,))
            if not name:
                raise self.error(key_node, path, f"expected a key name, got {describe(key_node)}")
            key_path = f"{path}.{name}"
            if name in values:
                raise self.error(key_node, key_path, f"duplicate key {name!r}")
            self.lines[key_path] = line_of(key_node)
            value = scalar(value_node, (STR, INT, FLOAT, BOOL))
            if value is None or value == "":
                raise self.error(
                    value_node,
                    key_path,
                    f"expected a string, number or boolean, got {describe(value_node)}",
                )
            if isinstance(value, bool):
                values[name] = "true" if value else "false"
            else:  # as written: 1.5e3 stays 1.5e3 for librdkafka to judge
                values[name] = str(value_node.value)
        return MappingProxyType(values)

    def choice(self, node: Node, choices: tuple[str, ...], path: str) -> str:
        value = scalar(node, (STR,))
        if value not in choices:
            expected = ", ".join(map(repr, choices))
            raise self.error(node, path, f"expected one of {expected}, got {describe(node)}")
        return str(value)

    def number(self, node: Node, base: Any, path: str, bounds: Bounds) -> Any:
        value = scalar(node, (INT,) if base is int else (INT, FLOAT))
        try:
            value = None if value is None else base(value)
        except OverflowError:  # an integer too large for a float
            value = None
        if value is None or not within(value, bounds):
            noun = "an integer" if base is int else "a number"
            raise self.error(
                node, path, f"expected {noun}{bounds_text(bounds)}, got {describe(node)}"
            )
        return value

    def string(self, node: Node, path: str) -> str:
        value = scalar(node, (STR,))
        if not value:
            raise self.error(node, path, f"expected a non-empty string, got {describe(node)}")
        return str(value)


def _client_shape(cls: type, name: str) -> bool:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return name in fields and bool(fields[name].metadata.get("client_shape"))


# --- redacted --------------------------------------------------------------------------------


def _kind_of(hint: Any) -> Kind | None:
    if get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = (a for a in get_args(hint) if a is not type(None))
    if get_origin(hint) is Annotated:
        return next((e for e in get_args(hint)[1:] if isinstance(e, Kind)), None)
    return None


def _plain_section(section: object) -> dict[str, Any]:
    cls: type = type(section)
    hints = fields_of(cls, yaml_only=False)
    written = fields_of(cls)
    return {
        name: _plain(getattr(section, name), hint, name)
        for name, hint in hints.items()
        # a field that is no YAML key shows only when set (`api_key`, `origins`)
        if name in written or getattr(section, name) or name == "source"
    }


def _plain(value: Any, hint: Any, name: str = "") -> Any:
    if isinstance(value, Secret):
        return "***"
    if isinstance(value, Mapping):
        # every header value may be a credential (Authorization, X-Api-Key); producer
        # settings only by name
        return {
            key: "***" if name == "headers" or is_secret_setting(key) else text
            for key, text in value.items()
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain_section(value)
    if isinstance(value, tuple):
        (item_hint, _) = get_args(hint)
        return [_plain(item, item_hint) for item in value]
    if isinstance(value, str) and _kind_of(hint) is Kind.HTTP_URL:
        return redact_http_url(value)
    if isinstance(value, str) and _kind_of(hint) is Kind.POSTGRES_URL:
        return redact_url(value)
    return value
