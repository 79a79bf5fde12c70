"""The Kafka producer's settings, from `lineage.kafka.config`.

Forced settings, refused when written otherwise: `enable.idempotence: false` and
`message.send.max.retries` (alias `retries`) 0, no `transactional.id`. `acks` and everything
else (`security.protocol`, `sasl.*`, `ssl.*`, `compression.type`, `linger.ms`) are passed
through as written; values of secret settings (`sasl.password`, `ssl.key.password`, ...) never
reach a log line. Defaults the agent sets when the config does not: `message.timeout.ms`
10000 (librdkafka's is five minutes), `linger.ms` 1 and `client.id` lineage-agent.
StartError names the key of a setting that would break at-most-once delivery.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from agent.config.model import (
    KAFKA_FIXED,
    KAFKA_REFUSED,
    KafkaTransportConfig,
    is_secret_setting,
)
from agent.errors import StartError

#: Lanes (records awaiting their report at once); a run always maps to the same lane. The
#: factory sizes the queue with the same number (`factory.KAFKA_LANES`).
LANES: Final = 64

#: The agent's defaults, each with librdkafka's other names for it: a default is left out
#: when the config writes the setting under any of its names.
_DEFAULTS: Final[Mapping[tuple[str, ...], str]] = {
    ("message.timeout.ms", "delivery.timeout.ms"): "10000",
    ("linger.ms", "queue.buffering.max.ms"): "1",
    ("client.id",): "lineage-agent",
}


def producer_settings(config: KafkaTransportConfig, queue_size: int) -> dict[str, str]:
    """The librdkafka settings the producer is built with; StartError names the key of a
    setting that would break at-most-once delivery."""
    # The loader refuses these with file and line; a config made in code meets them here.
    for name, fixed in KAFKA_FIXED.items():
        value = config.config.get(name)
        if value is not None and value.strip().lower() != fixed:
            raise StartError(
                f"lineage.kafka.config.{name}: must be {fixed} (at-most-once delivery: "
                "the producer never sends a record twice)"
            )
    for name in KAFKA_REFUSED:
        if name in config.config:
            raise StartError(
                f"lineage.kafka.config.{name}: transactions are not supported "
                "(they retry until a record is written, which at-most-once delivery forbids)"
            )
    settings = {
        names[0]: value
        for names, value in _DEFAULTS.items()
        if not any(name in config.config for name in names)
    }
    settings.update(config.config)
    settings.pop("retries", None)  # an alias of message.send.max.retries
    settings["enable.idempotence"] = "false"
    settings["message.send.max.retries"] = "0"
    # A record's report reaches its lane a moment before librdkafka releases the record, so
    # the lane's next record may briefly meet it there: room for one of those per lane.
    bound = max(1, min(LANES, queue_size)) + LANES
    written = settings.get("queue.buffering.max.messages")
    if written is None or not written.isdigit() or int(written) > bound:
        settings["queue.buffering.max.messages"] = str(bound)
    return settings


def timeout_ms(settings: Mapping[str, str]) -> float:
    """`message.timeout.ms` (or its other name) as a number; StartError when it is none."""
    name = "message.timeout.ms" if "message.timeout.ms" in settings else "delivery.timeout.ms"
    try:
        value = float(settings[name])
    except (KeyError, ValueError):
        value = -1.0
    if not 0 <= value < float("inf"):
        raise StartError(f"lineage.kafka.config.{name}: expected a number of milliseconds")
    return value


def secret_values(config: KafkaTransportConfig) -> list[str]:
    """The values of secret settings, for the log scrubber."""
    return [value for name, value in config.config.items() if is_secret_setting(name)]
