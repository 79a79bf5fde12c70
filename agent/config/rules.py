"""The rules over several keys of a config, run once the walk built it: a transport named
needs its section, bearer auth and credential headers need https, a client certificate needs
its key, producer settings that could write a record twice are refused. Each broken rule is
named where it was written: the line of the agent's YAML, or a client setting's origin."""

from __future__ import annotations

from urllib.parse import urlsplit

from agent.config.model import (
    AUTH_HEADERS,
    KAFKA_FIXED,
    KAFKA_REFUSED,
    AgentConfig,
    HttpAuth,
    KafkaTransportConfig,
)
from agent.config.walk import Reader
from agent.errors import ConfigError


def check_rules(config: AgentConfig, reader: Reader, origins: dict[str, str]) -> None:
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
    for key in missing_auth(auth) if auth is not None else ():
        reader.errors.append(
            ConfigError(f"{where(f'lineage.http.auth.{key}')} required key is missing")
        )
    if auth is not None:
        endpoint = auth.token_endpoint
        if endpoint is not None and urlsplit(endpoint).scheme != "https":
            reader.errors.append(
                ConfigError(
                    f"{where('lineage.http.auth.token_endpoint')} needs an https:// URL;"
                    " refusing to send credentials over http"
                )
            )
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


def missing_auth(auth: HttpAuth) -> list[str]:
    """The keys `auth`'s type needs and lacks (a secret given inline by the client's
    configuration stands for its variable)."""
    missing = []
    if auth.type in ("jwt", "oauth2") and auth.token_endpoint is None:
        missing.append("token_endpoint")
    if auth.type == "oauth2":
        if auth.client_id is None:
            missing.append("client_id")
        if auth.client_secret_env is None and auth.client_secret is None:
            missing.append("client_secret_env")
    elif auth.token_env is None and auth.api_key is None:
        missing.append("token_env")
    return missing


def _check_kafka(kafka: KafkaTransportConfig, reader: Reader, origins: dict[str, str]) -> None:
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
