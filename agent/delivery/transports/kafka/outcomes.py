"""What a librdkafka error means for a record, and which errors make the brokers doubtful.

Outcomes, from the delivery report (or from `produce` refusing the record at once):
- delivered: the broker acknowledged the record as `acks` asks;
- `NotSent` (provably never left, so the pipeline keeps the event and produces it again):
  `connect` when the record was not produced at all because no broker answers (below),
  `unavailable` when the broker answered that it wrote nothing (no leader, not enough
  replicas), `buffer_full` when the producer's own buffer was full;
- `Unconfirmed` (the broker may have written it; never resent): `timeout` for
  `_MSG_TIMED_OUT` and the request timeouts, or no report within `message.timeout.ms` plus a
  margin, `network` (the connection broke with the request in flight), `shutdown`;
- `DeliveryError` (dropped): `too_large` (over `message.max.bytes` or the broker's limit),
  `refused` (any other answer of the broker: authorization, unknown topic, policy, ...).

`_MSG_TIMED_OUT` is unconfirmed although a record that waited in the producer's queue for a
broker and never left ends with it too: librdkafka gives a produce request that timed out in
flight, which the broker may have written, the same code (rdkafka_request.c translates it),
and confluent-kafka does not expose the persistence status that would tell them apart. So
that an outage does not turn every record into an unconfirmed one, the transport produces
nothing while it has reason to doubt the brokers (at start, after a connection error or a
timed-out record): it first asks a broker for the topic's metadata (one request for all
lanes, at most `PROBE_TIMEOUT`), and until one answers, each record is `NotSent("connect")`
without being produced. What an outage costs is then the records in flight when it began.
"""

from __future__ import annotations

from typing import Final

from confluent_kafka import KafkaError

from agent.errors import DeliveryError, NotSent, Unconfirmed

_NOT_SENT: Final = {
    KafkaError._PURGE_QUEUE: "connect",
    KafkaError.NOT_LEADER_FOR_PARTITION: "unavailable",
    KafkaError.LEADER_NOT_AVAILABLE: "unavailable",
    KafkaError.NOT_ENOUGH_REPLICAS: "unavailable",
}
_UNCONFIRMED: Final = {
    # librdkafka reports a produce request that timed out in flight (possibly written) as
    # _MSG_TIMED_OUT too, like a record that never left its queue; the report cannot tell
    # them apart, so neither is produced again.
    KafkaError._MSG_TIMED_OUT: "timeout",
    KafkaError._TIMED_OUT: "timeout",
    KafkaError.REQUEST_TIMED_OUT: "timeout",
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "timeout",
    KafkaError._TRANSPORT: "network",
    KafkaError.NETWORK_EXCEPTION: "network",
    KafkaError._PURGE_INFLIGHT: "shutdown",
}
_TOO_LARGE: Final = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE}
#: Client errors and delivery reports that make the brokers' reachability doubtful: records
#: are produced again only once a metadata request was answered (the transport's `_reachable`).
TROUBLE: Final = {
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._AUTHENTICATION,
    KafkaError._SSL,
    KafkaError._RESOLVE,
}


def failure(error: KafkaError, topic: str) -> DeliveryError | NotSent | Unconfirmed:
    """The TransportFailure that a librdkafka error means for the record."""
    code = error.code()
    detail = f"{error.name()}: {error.str()} (topic {topic})"
    not_sent = _NOT_SENT.get(code)
    if not_sent == "connect":
        return NotSent("connect", detail)
    if not_sent == "unavailable":
        return NotSent("unavailable", detail)
    unconfirmed = _UNCONFIRMED.get(code)
    if unconfirmed == "timeout":
        return Unconfirmed("timeout", detail)
    if unconfirmed == "network":
        return Unconfirmed("network", detail)
    if unconfirmed == "shutdown":
        return Unconfirmed("shutdown", detail)
    if code in _TOO_LARGE:
        return DeliveryError("too_large", detail)
    return DeliveryError("refused", detail)
