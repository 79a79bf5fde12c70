"""The OpenLineage client's configuration conventions, read into the `lineage` section.

Sources, highest first (the client's own order: what its constructor is given, then its
openlineage.yml, then its `OPENLINEAGE__` variables, then `OPENLINEAGE_URL`):

1. `OPENLINEAGE_DISABLED=true`: lineage off, whatever else says.
2. `lineage.transport` in the agent's file. Written as the seed's names (`http`, `[http, file]`)
   it alone decides, with the `lineage.http` / `file` / `kafka` sections. Written as the
   client's `{type: ...}` mapping it is merged, key by key, over the sources below.
3. The `transport` section of the openlineage.yml named by `OPENLINEAGE_CONFIG`.
4. `OPENLINEAGE__TRANSPORT__*` variables: `__` nests, names are lower-cased, a value that
   parses as JSON is taken as JSON (`{"type": "api_key", ...}`, `5`, `true`), else as text.
5. `OPENLINEAGE_URL` (+ `OPENLINEAGE_ENDPOINT`, `OPENLINEAGE_API_KEY`): an http transport when
   nothing above names a transport type; with `type: composite` one more member, `default_http`.

An http transport's events go to the client's `urljoin(url, endpoint)`, `endpoint` being
`api/v1/lineage` by default; a seed `lineage.http.endpoint` that is a bare base URL is completed
the same way. Every setting taken here is remembered with where it came from (`file:line` or a
variable's name) for `config check`; an error names that place and the key, never a secret.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.config.kinds import parse_duration
from agent.config.model import (
    MINUTE,
    FileConfig,
    HttpAuth,
    HttpConfig,
    KafkaTransportConfig,
    LineageConfig,
    Secret,
)
from agent.config.yamlnodes import BOOL, FLOAT, INT, STR, compose, is_null, line_of, scalar
from agent.errors import ConfigError

DEFAULT_ENDPOINT: Final = "api/v1/lineage"
ENV_PREFIX: Final = "OPENLINEAGE__"
DEFAULT_HTTP_MEMBER: Final = "default_http"
TYPES: Final = ("http", "kafka", "console", "file", "composite")

Origins = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class AgentSide:
    """What the agent's own file says about the transport."""

    node: MappingNode | None  # `lineage.transport` written as the client's mapping
    line: int | None  # the line of `lineage.transport`, in either shape; None: not written
    seed_sections: frozenset[str]  # which of lineage.http / file / kafka are written
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


def resolve(
    lineage: LineageConfig,
    agent: AgentSide,
    environ: Mapping[str, str],
    read_text: Callable[[str], str],
) -> tuple[LineageConfig, Origins]:
    """`lineage` with the client's settings applied; see the module docstring for the order."""
    if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return dataclasses.replace(lineage, enabled=False), (
            ("lineage.enabled", "OPENLINEAGE_DISABLED"),
        )
    if agent.line is not None and agent.node is None:  # the seed's shape decides alone
        completed, seed_origins = _complete_seed(lineage, agent)
        unread = _client_variables(environ)
        if unread:  # say so: an operator who set them expects them to count
            where = f"{agent.source}:{agent.line} ({', '.join(unread)} not read)"
            seed_origins = (("lineage.transport", where), *seed_origins)
        return completed, seed_origins
    if agent.node is not None and agent.seed_sections:
        section = sorted(agent.seed_sections)[0]
        raise ConfigError(
            f"{agent.source}:{agent.line}: lineage.{section}: not read when lineage.transport"
            " is the client's {type: ...} mapping; write its keys inside lineage.transport"
        )
    tree: dict[str, Any] = _env_tree(environ)
    config_path = environ.get("OPENLINEAGE_CONFIG", "").strip()
    if config_path:
        tree = _merge(tree, _file_tree(config_path, read_text))
    if agent.node is not None:
        tree = _merge(tree, _node_tree(agent.node, "lineage.transport", agent))
    tree = _with_url(tree, environ)
    if not tree:
        return _complete_seed(lineage, agent)
    origins: list[tuple[str, str]] = []
    built = _Builder(lineage, origins).transport(tree, "transport")
    return built, tuple(origins)


def _client_variables(environ: Mapping[str, str]) -> list[str]:
    """The client's transport variables that are set, in name order."""
    names = ("OPENLINEAGE_URL", "OPENLINEAGE_CONFIG", "OPENLINEAGE_API_KEY")
    return sorted(
        name
        for name in environ
        if environ[name] and (name in names or name.startswith(ENV_PREFIX + "TRANSPORT__"))
    )


# --- the sources ----------------------------------------------------------------------------


def _env_tree(environ: Mapping[str, str]) -> dict[str, Any]:
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


def _file_tree(path: str, read_text: Callable[[str], str]) -> dict[str, Any]:
    """The `transport` section of an openlineage.yml (its other sections are the client's)."""
    try:
        root = compose(read_text(path), path)
    except ConfigError as exc:
        raise ConfigError(f"OPENLINEAGE_CONFIG: {exc}") from None
    if root is None or is_null(root):
        return {}
    if not isinstance(root, MappingNode):
        raise ConfigError(f"{path}:{line_of(root)}: expected a mapping of sections")
    side = AgentSide(None, None, frozenset(), path, os.path.dirname(os.path.abspath(path)))
    for key_node, value_node in root.value:
        if isinstance(key_node, ScalarNode) and key_node.value == "transport":
            if not isinstance(value_node, MappingNode):
                raise ConfigError(f"{path}:{line_of(value_node)}: transport: expected a mapping")
            tree: dict[str, Any] = _node_tree(value_node, "transport", side)
            return tree
    return {}


def _node_tree(node: Node, key: str, side: AgentSide) -> Any:
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
            tree[name] = _node_tree(value_node, f"{key}.{name}", side)
        return tree
    if isinstance(node, SequenceNode):
        return [_node_tree(item, f"{key}[{i}]", side) for i, item in enumerate(node.value)]
    value = scalar(node, (INT, FLOAT, BOOL)) if node.tag in (INT, FLOAT, BOOL) else None
    if value is None and node.tag == STR:
        value = node.value
    return Leaf(value, origin, key, side.base_dir)


def _merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    """The client's deep merge: `high` wins; two mappings merge key by key (names matched
    whatever their case, since the variables' names are lower-cased)."""
    merged = dict(low)
    lowered = {k.lower(): k for k in merged}
    for key, value in high.items():
        same = lowered.get(key.lower())
        if same is not None and isinstance(value, dict) and isinstance(merged[same], dict):
            merged[same] = _merge(merged[same], value)
            continue
        if same is not None:
            del merged[same]
        merged[key] = value
        lowered[key.lower()] = key
    return merged


def _with_url(tree: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
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
    kind = _get(tree, "type")
    if kind is None:
        return tree if tree else http
    if isinstance(kind, Leaf) and kind.value == "composite":
        members = _get(tree, "transports")
        if isinstance(members, dict) and _get(members, DEFAULT_HTTP_MEMBER) is None:
            return _merge(tree, {"transports": {DEFAULT_HTTP_MEMBER: http}})
    return tree


def _get(tree: dict[str, Any], *names: str) -> Any:
    """The value of the first of `names` present, matched whatever the case."""
    lowered = {k.lower(): v for k, v in tree.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return None


# --- the seed's endpoint ----------------------------------------------------------------------


def _complete_seed(lineage: LineageConfig, agent: AgentSide) -> tuple[LineageConfig, Origins]:
    """A seed `lineage.http.endpoint` with no path (`http://host:5000`, how OPENLINEAGE_URL is
    written) gets the client's `/api/v1/lineage`, instead of POSTs to `/`."""
    http = lineage.http
    if http is None or urlsplit(http.endpoint).path not in ("", "/"):
        return lineage, ()
    endpoint = urljoin(http.endpoint, DEFAULT_ENDPOINT)
    note = f"{agent.source} (completed with /{DEFAULT_ENDPOINT})"
    replaced = dataclasses.replace(lineage, http=dataclasses.replace(http, endpoint=endpoint))
    return replaced, (("lineage.http.endpoint", note),)


# --- the client's transport shape -----------------------------------------------------------

_HTTP_KEYS: Final = (
    "type",
    "name",
    "url",
    "endpoint",
    "timeout",
    "timeoutinmillis",
    "auth",
    "headers",
    "custom_headers",
    "compression",
    "verify",
    "cert",
    "key",
    "ca_file",
    "batch_size",
    "batch_endpoint",
    "concurrency",
)
_FILE_KEYS: Final = ("type", "name", "log_file_path", "location", "append", "rotation_size_mb")
_KAFKA_KEYS: Final = (
    "type",
    "name",
    "topic",
    "topicname",
    "config",
    "properties",
    "messagekey",
    "message_key",
    "flush",
)
_COMPOSITE_KEYS: Final = (
    "type",
    "transports",
    "continue_on_failure",
    "continueonfailure",
    "continue_on_success",
)


class _Builder:
    """Reads a merged tree into the lineage section, noting where each setting came from."""

    def __init__(self, base: LineageConfig, origins: list[tuple[str, str]]) -> None:
        self.base = base
        self.origins = origins

    def transport(self, tree: dict[str, Any], key: str) -> LineageConfig:
        kind = self.choice(tree, "type", key, TYPES)
        self.origins.append(("lineage.transport", kind.origin))
        if kind.value != "composite":
            return self.member(tree, kind, self.base, ())
        self.known(tree, _COMPOSITE_KEYS, kind)
        for flag in ("continue_on_failure", "continueonfailure", "continue_on_success"):
            value = _get(tree, flag)
            if value is not None and self.boolean(value, kind) is not True:
                raise self.leaf(value, kind).error(
                    "only true: every transport has its own queue and gets every event"
                )
        members = _get(tree, "transports")
        if isinstance(members, dict):
            listed = [m for m in members.values() if m]
        elif isinstance(members, list):
            listed = members
        else:
            raise kind.error("composite needs transports: a list or a mapping of transports")
        lineage = self.base
        names: tuple[str, ...] = ()
        for member in listed:
            if not isinstance(member, dict):
                raise self.leaf(member, kind).error("expected a transport mapping")
            member_kind = self.choice(member, "type", kind.key, TYPES[:-1])
            if member_kind.value in names:
                raise member_kind.error(
                    f"a second {member_kind.value!r} transport; the agent runs one of each"
                )
            lineage = self.member(member, member_kind, lineage, names)
            names = lineage.transport
        if not names:
            raise kind.error("composite needs at least one transport")
        return lineage

    def member(
        self, tree: dict[str, Any], kind: Leaf, lineage: LineageConfig, names: tuple[str, ...]
    ) -> LineageConfig:
        name = str(kind.value)
        if name == "http":
            self.known(tree, _HTTP_KEYS, kind)
            lineage = dataclasses.replace(lineage, http=self.http(tree, kind))
        elif name == "kafka":
            self.known(tree, _KAFKA_KEYS, kind)
            lineage = dataclasses.replace(lineage, kafka=self.kafka(tree, kind))
        elif name == "file":
            self.known(tree, _FILE_KEYS, kind)
            lineage = dataclasses.replace(lineage, file=self.file(tree, kind))
        else:
            self.known(tree, ("type", "name"), kind)
        return dataclasses.replace(lineage, transport=(*names, name))  # type: ignore[arg-type]

    # --- one transport each ---

    def http(self, tree: dict[str, Any], kind: Leaf) -> HttpConfig:
        url = self.text(_get(tree, "url"), kind, "url")
        endpoint_leaf = _get(tree, "endpoint")
        endpoint = DEFAULT_ENDPOINT
        if endpoint_leaf is not None:
            endpoint = self.text(endpoint_leaf, kind, "endpoint").value.strip()
        self.check_url(url)
        base_path = urlsplit(url.value).path.rstrip("/")
        if endpoint_leaf is None and base_path.endswith("/" + DEFAULT_ENDPOINT):
            raise url.error(
                f"already ends in /{DEFAULT_ENDPOINT}, and the client joins endpoint"
                f" ({DEFAULT_ENDPOINT} by default) to it: write the collector's base URL"
                " (http://host:5000) or set endpoint"
            )
        full = urljoin(url.value.strip(), endpoint)
        where = url.origin if endpoint_leaf is None else f"{url.origin} + {endpoint_leaf.origin}"
        self.origins.append(("lineage.http.endpoint", where))
        values: dict[str, Any] = {"endpoint": full}
        timeout = _get(tree, "timeout")
        millis = _get(tree, "timeoutinmillis")
        if timeout is not None:
            values["timeout"] = self.seconds(timeout, kind, 1.0, "timeout")
        elif millis is not None:
            values["timeout"] = self.seconds(millis, kind, 0.001, "timeoutInMillis")
        auth = _get(tree, "auth")
        if auth is not None:
            values["auth"] = self.auth(auth, kind)
        headers = _get(tree, "headers", "custom_headers")
        if headers is not None:
            values["headers"] = self.strings(headers, kind, "lineage.http.headers")
        compression = _get(tree, "compression")
        if compression is not None:
            leaf = self.leaf(compression, kind)
            values["compression"] = "none" if leaf.value is None else leaf.value
            if values["compression"] not in ("none", "gzip"):
                raise leaf.error(f"expected one of 'gzip', 'none', got {leaf.value!r}")
            self.origins.append(("lineage.http.compression", leaf.origin))
        verify = _get(tree, "verify")
        if verify is not None and self.boolean(verify, kind) is not True:
            raise self.leaf(verify, kind).error(
                "TLS verification stays on; trust a private CA with ca_file instead"
            )
        for path_key in ("cert", "key", "ca_file"):
            leaf = _get(tree, path_key)
            if leaf is not None:
                values[path_key] = self.path(leaf, kind)
                self.origins.append((f"lineage.http.{path_key}", self.leaf(leaf, kind).origin))
        for number, low, high in (("batch_size", 1, 10_000), ("concurrency", 1, 64)):
            leaf = _get(tree, number)
            if leaf is not None:
                values[number] = self.integer(leaf, kind, low, high)
                self.origins.append((f"lineage.http.{number}", self.leaf(leaf, kind).origin))
        batch = _get(tree, "batch_endpoint")
        if batch is not None:
            values["batch_endpoint"] = self.text(batch, kind, "batch_endpoint").value
        return HttpConfig(**values)

    def auth(self, tree: Any, kind: Leaf) -> HttpAuth:
        if isinstance(tree, Leaf) and isinstance(tree.value, str):
            raise tree.error("expected a mapping like {type: api_key, apiKey: ...}")
        if not isinstance(tree, dict):
            raise self.leaf(tree, kind).error(
                "expected a mapping like {type: api_key, apiKey: ...}"
            )
        self.known(tree, ("type", "apikey", "api_key", "token_env"), kind)
        auth_kind = self.choice(tree, "type", kind.key, ("api_key", "bearer"))
        self.origins.append(("lineage.http.auth.type", auth_kind.origin))
        key_leaf = _get(tree, "apikey", "api_key")
        env_leaf = _get(tree, "token_env")
        if key_leaf is not None:
            key = self.text(key_leaf, auth_kind, "apiKey")
            if not all("!" <= char <= "~" for char in key.value):
                raise key.error("holds characters a token may not have (only visible ASCII)")
            self.origins.append(("lineage.http.auth.api_key", key.origin))
            return HttpAuth(type=auth_kind.value, api_key=Secret(key.value.strip()))
        if env_leaf is not None:
            env = self.text(env_leaf, auth_kind, "token_env")
            self.origins.append(("lineage.http.auth.token_env", env.origin))
            return HttpAuth(type=auth_kind.value, token_env=env.value)
        raise auth_kind.error("needs apiKey (or token_env, a variable holding it)")

    def kafka(self, tree: dict[str, Any], kind: Leaf) -> KafkaTransportConfig:
        topic = self.text(_get(tree, "topic", "topicname"), kind, "topic")
        self.origins.append(("lineage.kafka.topic", topic.origin))
        settings: dict[str, str] = {}
        config = _get(tree, "config", "properties")
        if config is not None:
            settings = self.strings(config, kind, "lineage.kafka.config")
        key_leaf = _get(tree, "messagekey", "message_key")
        message_key = None
        if key_leaf is not None:
            message_key = self.text(key_leaf, kind, "messageKey").value
            self.origins.append(("lineage.kafka.message_key", key_leaf.origin))
        flush = _get(tree, "flush")
        if flush is not None:
            self.boolean(flush, kind)  # each batch is delivered before the next: always flushed
        return KafkaTransportConfig(topic=topic.value, config=settings, message_key=message_key)

    def file(self, tree: dict[str, Any], kind: Leaf) -> FileConfig:
        path = _get(tree, "log_file_path", "location")
        if path is None:
            raise kind.error("the file transport needs log_file_path")
        values: dict[str, Any] = {"path": self.path(path, kind)}
        self.origins.append(("lineage.file.path", self.leaf(path, kind).origin))
        append = _get(tree, "append")
        if append is not None and self.boolean(append, kind) is not True:
            raise self.leaf(append, kind).error(
                "only true: the agent appends to one JSON-lines file and rotates it at"
                " rotation_size_mb, never one file per event"
            )
        rotation = _get(tree, "rotation_size_mb")
        if rotation is not None:
            values["rotation_size_mb"] = float(self.integer(rotation, kind, 0, 1024 * 1024))
        return FileConfig(**values)

    # --- values ---

    def leaf(self, value: Any, kind: Leaf) -> Leaf:
        if isinstance(value, Leaf):
            return value
        return Leaf(None, kind.origin, kind.key, None)  # a mapping or list where a value goes

    def known(self, tree: dict[str, Any], keys: tuple[str, ...], kind: Leaf) -> None:
        for name, value in tree.items():
            if name.lower() == "retry" and kind.value == "http":
                raise self.first(value, kind).error(
                    "the agent never sends a request again once it may have arrived"
                    " (at-most-once); remove retry: a request that provably never left is"
                    " sent again by itself"
                )
            if name.lower() not in keys:
                where = self.first(value, kind)
                shown = ", ".join(repr(k) for k in keys if k not in ("type", "name"))
                raise ConfigError(
                    f"{where.origin}: {where.key}: unknown key for a {kind.value} transport"
                    f" (expected one of {shown})"
                )

    def first(self, value: Any, kind: Leaf) -> Leaf:
        """The first leaf under `value`, to say where a mapping was written."""
        if isinstance(value, Leaf):
            return value
        children = list(value.values()) if isinstance(value, dict) else list(value or ())
        return self.first(children[0], kind) if children else kind

    def choice(self, tree: dict[str, Any], name: str, key: str, choices: tuple[str, ...]) -> Leaf:
        value = _get(tree, name)
        if value is None:
            where = self.first(tree, Leaf(None, "OPENLINEAGE", key, None))
            raise ConfigError(f"{where.origin}: {key}.{name}: required key is missing")
        leaf = self.leaf(value, Leaf(None, "?", key, None))
        if not isinstance(leaf.value, str) or leaf.value.strip().lower() not in choices:
            expected = ", ".join(map(repr, choices))
            raise leaf.error(f"expected one of {expected}, got {leaf.value!r}")
        return dataclasses.replace(leaf, value=leaf.value.strip().lower())

    def text(self, value: Any, kind: Leaf, name: str) -> Leaf:
        if value is None:
            raise ConfigError(
                f"{kind.origin}: {kind.key.rsplit('.', 1)[0]}.{name}: required key is missing"
            )
        leaf = self.leaf(value, kind)
        if not isinstance(leaf.value, str) or not leaf.value.strip():
            raise leaf.error("expected a non-empty string")
        return leaf

    def boolean(self, value: Any, kind: Leaf) -> bool:
        leaf = self.leaf(value, kind)
        if isinstance(leaf.value, bool):
            return leaf.value
        if isinstance(leaf.value, str) and leaf.value.lower() in ("true", "false"):
            return leaf.value.lower() == "true"
        raise leaf.error(f"expected true or false, got {leaf.value!r}")

    def integer(self, value: Any, kind: Leaf, low: int, high: int) -> int:
        leaf = self.leaf(value, kind)
        number = leaf.value
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
            raise leaf.error(f"expected an integer from {low} to {high}, got {leaf.value!r}")
        return number

    def seconds(self, value: Any, kind: Leaf, unit: float, name: str) -> float:
        """A timeout: the client's number (seconds, or ms for `timeoutInMillis`) or a duration."""
        leaf = self.leaf(value, kind)
        raw = leaf.value
        seconds: float | None = None
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            seconds = float(raw) * unit
        elif isinstance(raw, str) and unit == 1.0:
            seconds = parse_duration(raw.strip())
        elif isinstance(raw, str) and raw.strip().isdigit():
            seconds = int(raw) * unit
        if seconds is None or not 0 < seconds <= 10 * MINUTE:
            raise leaf.error(f"expected a {name} > 0 and <= 10m, got {raw!r}")
        self.origins.append(("lineage.http.timeout", leaf.origin))
        return seconds

    def strings(self, value: Any, kind: Leaf, key: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.leaf(value, kind).error("expected a mapping of names to values")
        found: dict[str, str] = {}
        for name, item in value.items():
            leaf = self.leaf(item, kind)
            if leaf.value is None or isinstance(item, dict | list):
                raise leaf.error("expected a text value")
            text = leaf.value
            found[name] = ("true" if text else "false") if isinstance(text, bool) else str(text)
            self.origins.append((f"{key}.{name}", leaf.origin))
        return found

    def path(self, value: Any, kind: Leaf) -> str:
        leaf = self.text(value, kind, "path")
        text = str(leaf.value).strip()
        if text.startswith("file://"):
            text = urlsplit(text).path
        if "://" in text or "\0" in text:
            raise leaf.error("expected a local path or a file:// URL")
        if not os.path.isabs(text):
            if leaf.base_dir is None:
                raise leaf.error(
                    "expected an absolute path (an environment variable has no folder)"
                )
            text = os.path.join(leaf.base_dir, text)
        return os.path.normpath(text)

    def check_url(self, leaf: Leaf) -> None:
        text = leaf.value.strip()
        try:
            parts = urlsplit(text)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname)
            valid = valid and parts.port != 0
        except ValueError:
            valid = False
        if not valid or any(c.isspace() for c in text):
            # the URL itself is not shown: it may hold credentials
            raise leaf.error("expected an absolute http:// or https:// URL")
