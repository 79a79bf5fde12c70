"""Where the OpenLineage client's settings are read from, as trees of `Leaf` values that
remember their place: the `OPENLINEAGE__TRANSPORT__*` variables, an openlineage.yml, the
agent's own `lineage.transport` mapping, and `OPENLINEAGE_URL`; and the client's deep merge
of them. `agent.config.client` reads the merged tree into the lineage section."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.config.yamlnodes import BOOL, FLOAT, INT, STR, compose, is_null, line_of, scalar
from agent.errors import ConfigError

ENV_PREFIX: Final = "OPENLINEAGE__"
DEFAULT_HTTP_MEMBER: Final = "default_http"


@dataclass(frozen=True, slots=True)
class AgentSide:
    """What the agent's own file says about the transport."""

    node: MappingNode | None  # `lineage.transport` written as the client's mapping
    line: int | None  # the line of `lineage.transport`, in either shape; None: not written
    # the lines of the seed's lineage.http / file / kafka sections and lineage.http.endpoint,
    # those written
    seed_lines: Mapping[str, int]
    source: str
    base_dir: str


@dataclass(frozen=True, slots=True)
class Leaf:
    """One setting: its value, where it was written, and the key as written there."""

    value: Any
    origin: str  # `file:line` or an environment variable's name
    key: str  # dotted, as in its source (`transport.url`, `lineage.transport.auth.apiKey`)
    base_dir: str | None  # for relative paths; None where a path must be absolute (env)

    def error(self, what: str) -> ConfigError:
        if self.key == self.origin:  # OPENLINEAGE_URL and its kin name themselves
            return ConfigError(f"{self.origin}: {what}")
        return ConfigError(f"{self.origin}: {self.key}: {what}")


def client_variables(environ: Mapping[str, str]) -> list[str]:
    """The client's transport variables that are set, in name order."""
    names = ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE_API_KEY")
    return sorted(
        name
        for name in environ
        if environ[name] and (name in names or name.startswith(ENV_PREFIX + "TRANSPORT__"))
    )


def env_tree(environ: Mapping[str, str]) -> dict[str, Any]:
    """`OPENLINEAGE__TRANSPORT__*` as a tree, as the client builds it: the names in reverse
    order, so a whole section (`..._AUTH` as JSON) replaces the keys set inside it."""
    tree: dict[str, Any] = {}
    for name in sorted((n for n in environ if n.startswith(ENV_PREFIX)), reverse=True):
        keys = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if keys[0] != "transport" or len(keys) < 2 or not all(keys):
            continue  # other sections of the client's config (facets, filters, tags)
        text = environ[name]
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        here = tree
        for key in keys[1:-1]:
            if not isinstance(here.get(key), dict):
                here[key] = {}
            here = here[key]
        here[keys[-1]] = _plain_tree(value, name, ".".join(keys))
    return tree


def _plain_tree(value: Any, origin: str, key: str) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain_tree(v, origin, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_tree(v, origin, f"{key}[{i}]") for i, v in enumerate(value)]
    return Leaf(value, origin, key, None)


def file_tree(path: str, read_text: Callable[[str], str]) -> dict[str, Any]:
    """The `transport` section of an openlineage.yml (its other sections are the client's)."""
    try:
        root = compose(read_text(path), path)
    except ConfigError as exc:
        raise ConfigError(f"OPENLINEAGE_CONFIG: {exc}") from None
    if root is None or is_null(root):
        return {}
    if not isinstance(root, MappingNode):
        raise ConfigError(f"{path}:{line_of(root)}: expected a mapping of sections")
    side = AgentSide(None, None, {}, path, os.path.dirname(os.path.abspath(path)))
    for key_node, value_node in root.value:
        if isinstance(key_node, ScalarNode) and key_node.value == "transport":
            if not isinstance(value_node, MappingNode):
                raise ConfigError(f"{path}:{line_of(value_node)}: transport: expected a mapping")
            tree: dict[str, Any] = node_tree(value_node, "transport", side)
            return tree
    return {}


def node_tree(node: Node, key: str, side: AgentSide) -> Any:
    origin = f"{side.source}:{line_of(node)}"
    if isinstance(node, MappingNode):
        tree: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = str(key_node.value) if isinstance(key_node, ScalarNode) else ""
            if not name:
                raise ConfigError(f"{side.source}:{line_of(key_node)}: {key}: expected a key name")
            if name.lower() in {k.lower() for k in tree}:
                raise ConfigError(
                    f"{side.source}:{line_of(key_node)}: {key}.{name}: duplicate key {name!r}"
                )
            tree[name] = node_tree(value_node, f"{key}.{name}", side)
        return tree
    if isinstance(node, SequenceNode):
        return [node_tree(item, f"{key}[{i}]", side) for i, item in enumerate(node.value)]
    value = scalar(node, (INT, FLOAT, BOOL)) if node.tag in (INT, FLOAT, BOOL) else None
    if value is None and node.tag == STR:
        value = node.value
    return Leaf(value, origin, key, side.base_dir)


def merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    """The client's deep merge: `high` wins; two mappings merge key by key (names matched
    whatever their case, since the variables' names are lower-cased)."""
    merged = dict(low)
    lowered = {k.lower(): k for k in merged}
    for key, value in high.items():
        same = lowered.get(key.lower())
        if same is not None and isinstance(value, dict) and isinstance(merged[same], dict):
            merged[same] = merge(merged[same], value)
            continue
        if same is not None:
            del merged[same]
        merged[key] = value
        lowered[key.lower()] = key
    return merged


def with_url(tree: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """`OPENLINEAGE_URL` as the client takes it: the transport when none is named, else a
    `default_http` member of a composite one; otherwise unused (as by the client)."""
    url = environ.get("OPENLINEAGE_URL", "").strip()
    if not url:
        return tree
    http: dict[str, Any] = {
        "type": Leaf("http", "OPENLINEAGE_URL", "OPENLINEAGE_URL", None),
        "url": Leaf(url, "OPENLINEAGE_URL", "OPENLINEAGE_URL", None),
    }
    endpoint = environ.get("OPENLINEAGE_ENDPOINT")
    if endpoint is not None:
        http["endpoint"] = Leaf(endpoint, "OPENLINEAGE_ENDPOINT", "OPENLINEAGE_ENDPOINT", None)
    api_key = environ.get("OPENLINEAGE_API_KEY")
    if api_key is not None:
        http["auth"] = {
            "type": Leaf("api_key", "OPENLINEAGE_API_KEY", "OPENLINEAGE_API_KEY", None),
            "apiKey": Leaf(api_key, "OPENLINEAGE_API_KEY", "OPENLINEAGE_API_KEY", None),
        }
    kind = get(tree, "type")
    if kind is None:
        return tree if tree else http
    if isinstance(kind, Leaf) and kind.value == "composite":
        members = get(tree, "transports")
        if isinstance(members, dict) and get(members, DEFAULT_HTTP_MEMBER) is None:
            return merge(tree, {"transports": {DEFAULT_HTTP_MEMBER: http}})
    return tree


def get(tree: dict[str, Any], *names: str) -> Any:
    """The value of the first of `names` present, matched whatever the case."""
    lowered = {k.lower(): v for k, v in tree.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return None
