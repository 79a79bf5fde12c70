"""The walk from composed YAML nodes into the dataclasses of `agent.config.model`.

Driven by the dataclasses: a field's type and its `Kind` and `Bounds` decide how its node is
read. A bad key is recorded with its file, line and dotted key, and the walk goes on with its
siblings, so that one run names every bad key of a file. Knows nothing of files, of the
OpenLineage client's shape beyond keeping its nodes, or of rules over several keys."""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import types
import typing
from types import MappingProxyType
from typing import Annotated, Any, Literal, get_args, get_origin

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.config.kinds import KIND_READERS, bounds_text, within
from agent.config.model import Bounds, Kind, fields_of
from agent.config.yamlnodes import (
    BOOL,
    FLOAT,
    INT,
    MERGE,
    PLAIN_TAGS,
    STR,
    describe,
    is_null,
    line_of,
    scalar,
)
from agent.errors import ConfigError


def _unknown_key(name: str, known: list[str]) -> str:
    match = difflib.get_close_matches(name, known, n=1)
    if match:
        return f"unknown key (did you mean {match[0]!r}?)"
    return f"unknown key (expected one of {', '.join(map(repr, known))})"


class Failed(Exception):
    """A section or list that could not be built; its errors are in the reader's list."""


class Reader:
    """Walks composed YAML nodes into the dataclasses, remembering the line of every key.

    A bad key is recorded and the walk goes on with its siblings, so that one run names
    every bad key of the file; a section with a bad key is not built (`Failed`)."""

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
            raise Failed(path)
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
        except Failed:
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
            except Failed:
                failed = True
                continue
            first[item] = line_of(item_node)
            items.append(item)
        if failed:
            raise Failed(path)
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
