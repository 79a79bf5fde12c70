"""Build the configured transports: the one place that knows every kind."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
from collections.abc import Callable
from typing import Final

from agent.config.model import HttpConfig, LineageConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.base import Transport
from agent.delivery.transports.console import ConsoleTransport
from agent.delivery.transports.file import FileTransport
from agent.delivery.transports.http.auth import TokenEndpoint
from agent.delivery.transports.http.proxy import proxy_secrets
from agent.delivery.transports.http.settings import (
    check_endpoint,
    read_secret,
    secret_headers,
    tls_context,
)
from agent.delivery.transports.http.transport import HttpTransport
from agent.delivery.transports.kafka.keys import message_key
from agent.errors import StartError
from agent.telemetry import logs
from agent.telemetry.metrics import Metrics

#: Imported only when a kafka transport is configured: its client library (librdkafka)
#: is not needed by agents that never use it.
KAFKA_MODULE: Final = "agent.delivery.transports.kafka.transport"
#: The client library that module imports: the agent's own module is always there, the
#: library only where it was installed.
KAFKA_CLIENT: Final = "confluent_kafka"


def kafka_available() -> bool:
    """Whether this build has the kafka transport: its module and its client library."""
    try:
        return all(
            importlib.util.find_spec(name) is not None for name in (KAFKA_MODULE, KAFKA_CLIENT)
        )
    except ImportError:
        return False


async def build_transports(
    lineage: LineageConfig,
    names: tuple[str, ...] | None = None,
    *,
    file_lock_of: Transport | None = None,
    metrics: Metrics | None = None,
) -> dict[str, Transport]:
    """A transport per configured name (or per name in `names`); the bearer token is read
    from the environment now, so a reload picks up a rotated token. `file_lock_of` is this
    agent's running file transport of the same path, whose lock the new one shares;
    `metrics` counts the HTTP transport's late answers."""
    late = None if metrics is None else metrics.late_answers.labels(transport="http").inc
    built: dict[str, Transport] = {}
    try:
        for name in lineage.transport if names is None else names:
            if name == "http":
                if lineage.http is None:
                    raise StartError("lineage.http: the http transport needs an endpoint")
                token = check_endpoint(lineage.http)
                logs.register_secret(token)
                # Built in threads: reading a CA file or taking a lock may block (a slow
                # mount), and a reload runs on the event loop.
                for value in [*secret_headers(lineage.http), *proxy_secrets(lineage.http)]:
                    logs.register_secret(value)
                auth = await asyncio.to_thread(token_endpoint, lineage.http)
                built[name] = await asyncio.to_thread(
                    HttpTransport, lineage.http, token=token, auth=auth, on_late=late
                )
            elif name == "kafka":
                built[name] = await _build_kafka(lineage)
            elif name == "console":
                built[name] = ConsoleTransport()
            else:
                holder = file_lock_of if isinstance(file_lock_of, FileTransport) else None
                built[name] = await asyncio.to_thread(FileTransport, lineage.file, lock_of=holder)
    except BaseException:
        for transport in built.values():
            await transport.aclose()
        raise
    return built


def token_endpoint(http: HttpConfig) -> TokenEndpoint | None:
    """The token provider of jwt or oauth2 auth (None for the others), its secret and every
    token it fetches kept out of the logs; it trusts what the collector's connections trust."""
    if http.auth is None or http.auth.type not in ("jwt", "oauth2"):
        return None
    secret = read_secret(http.auth)
    logs.register_secret(secret)
    context = tls_context(http.ca_file, http.cert, http.key)
    return TokenEndpoint(http.auth, secret, context, http.timeout, on_token=logs.register_secret)


def lanes_for(lineage: LineageConfig, name: str) -> tuple[int, int]:
    """(lanes, batch size) for a transport: HTTP requests in flight, file writes in batches,
    Kafka records awaiting their delivery report (one event each)."""
    if name == "http" and lineage.http is not None:
        return lineage.http.concurrency, lineage.http.batch_size
    if name == "kafka":
        return KAFKA_LANES, 1
    return 1, 256


def lane_key_for(name: str) -> Callable[[Envelope], str] | None:
    """What picks a transport's lane when not the runId: Kafka's record key, so that the events
    of an application and of its steps, one partition's, leave in the order they came."""
    if name == "kafka":
        return lambda envelope: message_key(envelope.payload)
    return None


#: Kafka records awaiting their report at once (`transports.kafka.settings.LANES`, kept here so that
#: sizing a queue does not load librdkafka).
KAFKA_LANES = 64


async def _build_kafka(lineage: LineageConfig) -> Transport:
    """The Kafka transport, its module (and librdkafka) loaded only when one is configured."""
    try:
        kafka = importlib.import_module(KAFKA_MODULE)
    except ModuleNotFoundError as exc:
        raise StartError(f"lineage.kafka: kafka transport not available ({exc})") from None
    if lineage.kafka is None:
        raise StartError("lineage.kafka.topic: the kafka transport needs a topic")
    for secret in kafka.secret_values(lineage.kafka):
        logs.register_secret(secret)
    # In a thread: the producer may resolve names and read key files as it starts.
    transport: Transport = await asyncio.to_thread(
        kafka.KafkaTransport, lineage.kafka, queue_size=lineage.queue_size
    )
    return transport
