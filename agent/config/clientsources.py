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


def aliased(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with `OPENLINEAGE_URL` (+ `_ENDPOINT`, `_API_KEY`) copied in as the client does
    before it reads anything: a `default_http` member under `OPENLINEAGE__TRANSPORT__TRANSPORTS__`
    (unless one is set already), and, with `OPENLINEAGE__TRANSPORT__TYPE=async_http`, the URL
    of that transport itself. The member counts only where the transport is composite."""
    env = dict(environ)
    url = env.get("OPENLINEAGE_URL")
    member = f"{ENV_PREFIX}TRANSPORT__TRANSPORTS__{DEFAULT_HTTP_MEMBER.upper()}"
    if not url or any(name.startswith(member) for name in env):
        return env
    api_key = env.get("OPENLINEAGE_API_KEY")
    endpoint = env.get("OPENLINEAGE_ENDPOINT")
    auth = json.dumps({"type": "api_key", "apiKey": api_key}) if api_key else None
    copies = {"TYPE": "http", "URL": url, "AUTH": auth, "ENDPOINT": endpoint or None}
    env.update({f"{member}__{k}": v for k, v in copies.items() if v is not None})
    if env.get(f"{ENV_PREFIX}TRANSPORT__TYPE") == "async_http":
        for key, value in copies.items():
            if key != "TYPE" and value is not None:
                env.setdefault(f"{ENV_PREFIX}TRANSPORT__{key}", value)
    return env


def _origin(name: str) -> str:
    """The variable an operator set for `name` (a copy `aliased` made names its source)."""
    if not name.startswith(f"{ENV_PREFIX}TRANSPORT__"):
        return name
    tail = name.rsplit("__", 1)[-1]
    source = {"AUTH": "OPENLINEAGE_API_KEY", "ENDPOINT": "OPENLINEAGE_ENDPOINT"}
    return source.get(tail, "OPENLINEAGE_URL")


def env_tree(
    environ: Mapping[str, str], operator: Mapping[str, str], section: str = "transport"
) -> Any:
    """`OPENLINEAGE__TRANSPORT*` (or another `section`'s variables) of `environ` (as `aliased`
    made it) as a tree, as the client
    builds it: the names in reverse order, so a whole section given as JSON
    (`OPENLINEAGE__TRANSPORT='{"type": "http", ...}'`, `..._AUTH`) replaces the keys set
    inside it. A variable the operator did not set (`operator` lacks it) is named by the one
    it was copied from."""
    tree: Any = {}
    for name in sorted((n for n in environ if n.startswith(ENV_PREFIX)), reverse=True):
        keys = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        if keys[0] != section or not all(keys):
            continue  # other sections of the client's config
        text = environ[name]
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        origin = name if name in operator else _origin(name)
        plain = _plain_tree(value, origin, origin if origin != name else ".".join(keys))
        if len(keys) == 1:
            if section == "transport" and not isinstance(plain, dict):
                raise ConfigError(f'{name}: expected a JSON object like {{"type": "http"}}')
            tree = plain
            continue
        if not isinstance(tree, dict):
            tree = {}
        here = tree
        for key in keys[1:-1]:
            if not isinstance(here.get(key), dict):
                here[key] = {}
            here = here[key]
        here[keys[-1]] = plain
    return tree


def config_file(environ: Mapping[str, str], cwd: str) -> str | None:
    """The openlineage.yml the client reads: the first readable file of `OPENLINEAGE_CONFIG`,
    `./openlineage.yml` (of `cwd`) and `~/.openlineage/openlineage.yml` (`HOME` of `environ`)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    for path in (
        environ.get("OPENLINEAGE_CONFIG"),
        os.path.join(cwd, "openlineage.yml"),
        os.path.join(home, ".openlineage", "openlineage.yml"),
    ):
        if path and os.path.isfile(path) and os.access(path, os.R_OK):
            return path
    return None


def _plain_tree(value: Any, origin: str, key: str) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain_tree(v, origin, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_tree(v, origin, f"{key}[{i}]") for i, v in enumerate(value)]
    return Leaf(value, origin, key, None)


def file_tree(path: str, read_text: Callable[[str], str], section: str = "transport") -> Any:
    """A section of an openlineage.yml (`transport`, `filters`, `tags`) as a tree; its other
    sections concern facets only the client's integrations add."""
    root = compose(read_text(path), path)
    if root is None or is_null(root):
        return {}
    if not isinstance(root, MappingNode):
        raise ConfigError(f"{path}:{line_of(root)}: expected a mapping of sections")
    side = AgentSide(None, None, {}, path, os.path.dirname(os.path.abspath(path)))
    shape = MappingNode if section != "filters" else SequenceNode
    for key_node, value_node in root.value:
        name = str(key_node.value) if isinstance(key_node, ScalarNode) else ""
        if name == section and not is_null(value_node):
            if not isinstance(value_node, shape):
                what = "a list" if shape is SequenceNode else "a mapping"
                raise ConfigError(f"{path}:{line_of(value_node)}: {section}: expected {what}")
            return node_tree(value_node, section, side)
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


def url_transport(environ: Mapping[str, str]) -> dict[str, Any]:
    """The http transport the client makes of `OPENLINEAGE_URL` when no transport type is
    configured: `OPENLINEAGE_ENDPOINT` (default `api/v1/lineage`), `OPENLINEAGE_API_KEY`."""
    http: dict[str, Any] = {}
    for name, key in (
        ("OPENLINEAGE_URL", "url"),
        ("OPENLINEAGE_ENDPOINT", "endpoint"),
        ("OPENLINEAGE_API_KEY", "apiKey"),
    ):
        if environ.get(name):
            http[key] = Leaf(environ[name], name, name, None)
    if "apiKey" in http:
        http["auth"] = {"type": Leaf("api_key", http["apiKey"].origin, "OPENLINEAGE_API_KEY", None)}
        http["auth"]["apiKey"] = http.pop("apiKey")
    return {"type": Leaf("http", "OPENLINEAGE_URL", "OPENLINEAGE_URL", None), **http}


def without_url_member(tree: dict[str, Any]) -> dict[str, Any]:
    """`tree` less the `default_http` member `aliased` added, where it does not count: the
    client reads `transports` only for a composite transport."""
    members = get(tree, "transports")
    if not isinstance(members, dict):
        return tree
    member = get(members, DEFAULT_HTTP_MEMBER)
    if not isinstance(member, dict) or get(member, "url") is None:
        return tree
    if getattr(get(member, "url"), "origin", "") != "OPENLINEAGE_URL":
        return tree
    rest = {k: v for k, v in members.items() if k.lower() != DEFAULT_HTTP_MEMBER}
    trimmed = {k: v for k, v in tree.items() if k.lower() != "transports"}
    if rest:
        trimmed["transports"] = rest
    return trimmed


def get(tree: dict[str, Any], *names: str) -> Any:
    """The value of the first of `names` present, matched whatever the case."""
    lowered = {k.lower(): v for k, v in tree.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return None
