"""The OpenLineage client's `transport: {type: ...}` shape translated into the lineage section:
one merged tree of settings (`clientsources`: variables, openlineage.yml, the agent's own
mapping) read transport by transport, composite included, each setting's origin noted for
`config check`. Errors name that origin and the key, never a secret's value."""

from __future__ import annotations

import dataclasses
import os
from typing import Any
from urllib.parse import urljoin, urlsplit

from agent.config.clientkeys import (
    AUTH_FIELDS,
    AUTH_KEYS,
    AUTH_SECRETS,
    COMPOSITE_KEYS,
    DEFAULT_ENDPOINT,
    FILE_KEYS,
    HTTP_KEYS,
    KAFKA_KEYS,
    REFUSED,
    TYPES,
)
from agent.config.clientretry import read_retry
from agent.config.clientsources import Leaf, get
from agent.config.kinds import parse_duration
from agent.config.model import (
    HOUR,
    MINUTE,
    FileConfig,
    HttpAuth,
    HttpConfig,
    KafkaTransportConfig,
    LineageConfig,
    Secret,
)
from agent.config.rules import missing_auth
from agent.errors import ConfigError

#: A missing auth key in the client's spelling.
_CLIENT_NAMES = {
    "token_env": "apiKey (or token_env, a variable holding it)",
    "token_endpoint": "tokenEndpoint",
    "client_id": "clientId",
    "client_secret_env": "clientSecret (or client_secret_env, a variable holding it)",
}


class Builder:
    """Reads a merged tree into the lineage section, noting where each setting came from."""

    def __init__(self, base: LineageConfig, origins: list[tuple[str, str]]) -> None:
        self.base = base
        self.origins = origins

    def transport(self, tree: dict[str, Any], key: str) -> LineageConfig:
        kind = self.choice(tree, "type", key, TYPES)
        self.origins.append(("lineage.transport", kind.origin))
        if kind.value != "composite":
            return self.member(tree, kind, self.base, ())
        self.known(tree, COMPOSITE_KEYS, kind)
        for flag in ("continue_on_failure", "continueonfailure", "continue_on_success"):
            value = get(tree, flag)
            if value is not None and self.boolean(value, kind) is not True:
                raise self.leaf(value, kind).error(
                    "only true: every transport has its own queue and gets every event"
                )
        members = get(tree, "transports")
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
            self.known(tree, HTTP_KEYS, kind)
            lineage = dataclasses.replace(lineage, http=self.http(tree, kind))
        elif name == "kafka":
            self.known(tree, KAFKA_KEYS, kind)
            lineage = dataclasses.replace(lineage, kafka=self.kafka(tree, kind))
        elif name == "file":
            self.known(tree, FILE_KEYS, kind)
            lineage = dataclasses.replace(lineage, file=self.file(tree, kind))
        else:
            self.known(tree, ("type", "name"), kind)
        return dataclasses.replace(lineage, transport=(*names, name))  # type: ignore[arg-type]

    # --- one transport each ---

    def http(self, tree: dict[str, Any], kind: Leaf) -> HttpConfig:
        url = self.text(get(tree, "url"), kind, "url")
        endpoint_leaf = get(tree, "endpoint")
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
        timeout = get(tree, "timeout")
        millis = get(tree, "timeoutinmillis")
        if timeout is not None:
            values["timeout"] = self.seconds(timeout, kind, 1.0, "timeout")
        elif millis is not None:
            values["timeout"] = self.seconds(millis, kind, 0.001, "timeoutInMillis")
        auth = get(tree, "auth")
        if auth is not None:
            values["auth"] = self.auth(auth, kind)
        headers = get(tree, "headers", "custom_headers")
        if headers is not None:
            values["headers"] = self.strings(headers, kind, "lineage.http.headers")
        compression = get(tree, "compression")
        if compression is not None:
            leaf = self.leaf(compression, kind)
            values["compression"] = "none" if leaf.value is None else leaf.value
            if values["compression"] not in ("none", "gzip"):
                raise leaf.error(f"expected one of 'gzip', 'none', got {leaf.value!r}")
            self.origins.append(("lineage.http.compression", leaf.origin))
        verify = get(tree, "verify")
        if verify is not None and self.boolean(verify, kind) is not True:
            raise self.leaf(verify, kind).error(
                "TLS verification stays on; trust a private CA with ca_file instead"
            )
        for path_key in ("cert", "key", "ca_file"):
            leaf = get(tree, path_key)
            if leaf is not None:
                values[path_key] = self.path(leaf, kind)
                self.origins.append((f"lineage.http.{path_key}", self.leaf(leaf, kind).origin))
        size = get(tree, "max_queue_size")
        if size is not None:
            raise self.leaf(size, kind).error(
                "not read: the agent's queue, before every transport, is lineage.queue_size"
            )
        for number, low, high in (("batch_size", 1, 10_000), ("concurrency", 1, 64)):
            leaf = get(tree, number, "max_concurrent_requests" if number == "concurrency" else "")
            if leaf is not None:
                values[number] = self.integer(leaf, kind, low, high)
                self.origins.append((f"lineage.http.{number}", self.leaf(leaf, kind).origin))
        batch = get(tree, "batch_endpoint")
        if batch is not None:
            values["batch_endpoint"] = self.text(batch, kind, "batch_endpoint").value
        retry = get(tree, "retry")
        if retry is not None:
            values["retry"] = read_retry(retry, kind, self.origins)
        late = get(tree, "late_answer_wait")
        if late is not None:
            leaf = self.leaf(late, kind)
            seconds = (
                parse_duration(str(leaf.value))
                if isinstance(leaf.value, str | int | float)
                else None
            )
            if isinstance(leaf.value, bool) or seconds is None or not 0 <= seconds <= HOUR:
                raise leaf.error(f"expected a duration from 0s to 1h, got {leaf.value!r}")
            values["late_answer_wait"] = seconds
            self.origins.append(("lineage.http.late_answer_wait", leaf.origin))
        return HttpConfig(**values)

    def auth(self, tree: Any, kind: Leaf) -> HttpAuth:
        if isinstance(tree, Leaf) and isinstance(tree.value, str):
            raise tree.error("expected a mapping like {type: api_key, apiKey: ...}")
        if not isinstance(tree, dict):
            raise self.leaf(tree, kind).error(
                "expected a mapping like {type: api_key, apiKey: ...}"
            )
        self.known(tree, AUTH_KEYS, kind)
        auth_kind = self.choice(tree, "type", kind.key, ("api_key", "bearer", "jwt", "oauth2"))
        self.origins.append(("lineage.http.auth.type", auth_kind.origin))
        values: dict[str, Any] = {"type": auth_kind.value}
        for name, value in tree.items():
            field = AUTH_FIELDS.get(name.lower()) or AUTH_SECRETS.get(name.lower())
            if field is not None:
                leaf = self.text(value, auth_kind, name)
                text = leaf.value.strip()
                if field in AUTH_SECRETS.values():
                    if not all("!" <= char <= "~" for char in text):
                        raise leaf.error("holds characters a token may not have (visible ASCII)")
                    values[field] = Secret(text)
                else:
                    values[field] = text
                self.origins.append((f"lineage.http.auth.{field}", leaf.origin))
        method = values.get("client_auth_method", "client_secret_basic")
        if method not in ("client_secret_basic", "client_secret_post"):
            raise self.leaf(get(tree, "clientauthmethod", "client_auth_method"), kind).error(
                f"expected client_secret_basic or client_secret_post, got {method!r}"
            )
        fields = get(tree, "tokenfields", "token_fields")
        if fields is not None:  # a list, or one name (the client takes both)
            listed = fields if isinstance(fields, list) else [fields]
            values["token_fields"] = tuple(
                self.text(f, auth_kind, "tokenFields").value for f in listed
            )
        buffer = get(tree, "tokenrefreshbuffer", "token_refresh_buffer")
        if buffer is not None:
            values["token_refresh_buffer"] = float(self.integer(buffer, auth_kind, 0, 3600))
        auth = HttpAuth(**values)
        for missing in missing_auth(auth):
            raise auth_kind.error(f"needs {_CLIENT_NAMES[missing]}")
        return auth

    def kafka(self, tree: dict[str, Any], kind: Leaf) -> KafkaTransportConfig:
        topic = self.text(get(tree, "topic", "topicname"), kind, "topic")
        self.origins.append(("lineage.kafka.topic", topic.origin))
        settings: dict[str, str] = {}
        config = get(tree, "config", "properties")
        if config is not None:
            settings = self.strings(config, kind, "lineage.kafka.config")
        key_leaf = get(tree, "messagekey", "message_key")
        message_key = None
        if key_leaf is not None:
            message_key = self.text(key_leaf, kind, "messageKey").value
            self.origins.append(("lineage.kafka.message_key", key_leaf.origin))
        flush = get(tree, "flush")
        if flush is not None:
            self.boolean(flush, kind)  # each batch is delivered before the next: always flushed
        return KafkaTransportConfig(topic=topic.value, config=settings, message_key=message_key)

    def file(self, tree: dict[str, Any], kind: Leaf) -> FileConfig:
        path = get(tree, "log_file_path", "location")
        if path is None:
            raise kind.error("the file transport needs log_file_path")
        values: dict[str, Any] = {"path": self.path(path, kind)}
        self.origins.append(("lineage.file.path", self.leaf(path, kind).origin))
        append = get(tree, "append")
        if append is not None and self.boolean(append, kind) is not True:
            raise self.leaf(append, kind).error(
                "only true: the agent appends to one JSON-lines file and rotates it at"
                " rotation_size_mb, never one file per event"
            )
        rotation = get(tree, "rotation_size_mb")
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
        value = get(tree, name)
        if value is None:
            # named as written where a sibling was: lineage.transport.type in the agent's file
            sibling = next((v for v in tree.values() if isinstance(v, Leaf)), None)
            where = sibling or self.first(tree, Leaf(None, "OPENLINEAGE", key, None))
            prefix = sibling.key.rsplit(".", 1)[0] if sibling is not None else key
            raise ConfigError(f"{where.origin}: {prefix}.{name}: required key is missing")
        leaf = self.leaf(value, Leaf(None, "?", key, None))
        refused = REFUSED.get(str(leaf.value).strip().lower()) if name == "type" else None
        if refused is not None and "http" in choices:
            raise leaf.error(f"transport {leaf.value!r} is not supported: {refused}")
        if not isinstance(leaf.value, str) or leaf.value.strip().lower() not in choices:
            expected = ", ".join(map(repr, choices))
            raise leaf.error(f"expected one of {expected}, got {leaf.value!r}")
        chosen = leaf.value.strip().lower()
        # the client's async_http is an http transport sending from a queue: the agent's is one
        return dataclasses.replace(leaf, value="http" if chosen == "async_http" else chosen)

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
