"""Kafka transport: each signed event is one record of `topic`, keyed by its run.

The client is confluent-kafka (librdkafka), chosen over aiokafka by what at-most-once needs,
the two being even on speed (docs/performance.md has the figures: latency, rate and CPU within
the machine's noise of each other, aiokafka 3 MiB smaller): aiokafka retries a batch after a
retriable error, a request timeout included, until the batch expires, and offers no switch to
turn that off, so a record the broker wrote but did not acknowledge in time is written again;
librdkafka sends a record at most once with `message.send.max.retries: 0` and says in the
delivery report why a record failed.
Forced and default settings: `settings`; what each outcome of a record means: `outcomes`.

Order and keys: the record key is the client's (`keys`: `run:<namespace>/<name>` of the root
parent job, else the parent job, else the run's own job; or `message_key` for every record), so
an application's events and its steps' land in one partition. The pipeline hands this transport
batches of one on `settings.LANES` lanes, chosen by that key, and a lane produces its next record
only once the delivery report of the previous one came: an event never leaves while an earlier
one of the same key is unresolved, whatever `max.in.flight` says.

Bounded buffering: librdkafka holds at most one awaited record per lane, each of them an
event the agent's queue still counts as in flight, so the queue's bound covers both. Its
`queue.buffering.max.messages` is capped at the lanes (or the queue size, when smaller) plus
one record per lane whose report was served but which librdkafka has not released yet.

The producer's callbacks run in one thread of this transport that polls librdkafka; the
reports one poll served go to the event loop together, with one `call_soon_threadsafe`.
Closing flushes for at most `CLOSE_FLUSH` seconds (what is then still in the producer was
counted unconfirmed at the drain deadline) and purges the rest, so that nothing leaves after
the agent stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

import confluent_kafka
import structlog
from confluent_kafka import KafkaError, KafkaException

from agent.config.model import KafkaTransportConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.kafka.keys import message_key
from agent.delivery.transports.kafka.outcomes import TROUBLE, failure
from agent.delivery.transports.kafka.settings import producer_settings, secret_values, timeout_ms
from agent.errors import DeliveryError, NotSent, StartError, Unconfirmed

#: Seconds the transport waits for a report beyond `message.timeout.ms` before it stops
#: waiting and counts the event unconfirmed (librdkafka ends an in-flight request later).
REPORT_MARGIN: Final = 5.0
#: Seconds a metadata request that checks the brokers are reachable may take.
PROBE_TIMEOUT: Final = 5.0
#: Seconds `aclose` lets the producer finish what is in flight before it purges the rest.
CLOSE_FLUSH: Final = 1.0
#: Seconds between two warnings of the client's own log of one kind (debug lines meanwhile).
CLIENT_LOG_EVERY: Final = 60.0
_POLL: Final = 0.1  # seconds one poll of the reporting thread waits for a report

log = structlog.get_logger(__name__)

_Report = tuple["asyncio.Future[KafkaError | None]", "KafkaError | None"]  # a record's report


class KafkaTransport:
    """Produces each event as one keyed record and waits for its report; see the module
    docstring. Built in a thread (the producer may read key and CA files)."""

    name = "kafka"

    def __init__(self, config: KafkaTransportConfig, *, queue_size: int) -> None:
        settings = producer_settings(config, queue_size)
        self._topic = config.topic
        self._key = None if config.message_key is None else config.message_key.encode()
        self._secrets = secret_values(config)
        try:
            self._producer = confluent_kafka.Producer(
                {**settings, "error_cb": self._client_error, "logger": _ClientLog()}
            )
        except (KafkaException, ValueError, TypeError) as exc:
            raise StartError(f"lineage.kafka.config: {self._hide(str(exc))}") from None
        self._wait = timeout_ms(settings) / 1000 + REPORT_MARGIN
        # Filled by the producer's delivery callbacks, which run only in the reports' thread
        # (inside its `poll`, or the closing `flush` once that thread ended).
        self._reports: list[tuple[asyncio.AbstractEventLoop, _Report]] = []
        # Trouble seen (counted by the reports' thread) and the count a successful metadata
        # request last cleared; while the first is ahead, records wait (`_reachable`).
        self._trouble = 1  # nothing is known of the brokers before the first request
        self._cleared = 0
        self._probe: asyncio.Task[str | None] | None = None
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kafka-reports", daemon=True)
        self._poller.start()

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Produce the batch's one event and wait for its report."""
        # One record per send: a refusal after an earlier record of the same batch went
        # would have the pipeline offer that record again (at-most-once broken).
        if len(batch) != 1:
            raise ValueError(f"the kafka transport sends one event at a time, got {len(batch)}")
        await self._send_one(batch[0])

    async def aclose(self) -> None:
        """Flush for at most CLOSE_FLUSH seconds, purge what is left, stop the reports'
        thread; idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._probe is not None:
            self._probe.cancel()  # its thread ends within PROBE_TIMEOUT, unawaited
        await asyncio.to_thread(self._close)

    # -- internals -------------------------------------------------------------------------

    async def _send_one(self, envelope: Envelope) -> None:
        if self._closed.is_set():
            raise DeliveryError("shutdown", "the kafka transport is closed")
        if self._trouble > self._cleared:
            problem = await self._reachable()
            if problem is not None:
                raise NotSent("connect", problem)
        loop = asyncio.get_running_loop()
        report: asyncio.Future[KafkaError | None] = loop.create_future()
        key = self._key if self._key is not None else message_key(envelope.payload).encode()
        try:
            self._producer.produce(
                self._topic,
                envelope.payload,
                key,
                on_delivery=functools.partial(self._delivered, loop, report),
            )
        except BufferError:
            raise NotSent("buffer_full", "the producer's buffer is full") from None
        except KafkaException as exc:
            raise failure(exc.args[0], self._topic) from None
        try:
            async with asyncio.timeout(self._wait):
                error = await report
        except TimeoutError:
            raise Unconfirmed(
                "timeout", f"no delivery report within {self._wait:g}s (topic {self._topic})"
            ) from None
        if error is not None:
            raise failure(error, self._topic)

    async def _reachable(self) -> str | None:
        """Ask a broker for the topic's metadata (one request for every lane that waits);
        None when it answered, else what went wrong. Until one answers, no record is
        produced: a record that waits in librdkafka's queue for a broker and times out there
        is reported as one that may have been written, and would be lost as unconfirmed."""
        if self._probe is None:
            self._probe = asyncio.create_task(self._ask_metadata(self._trouble))
        probe = self._probe
        try:
            return await asyncio.shield(probe)
        finally:
            if probe.done() and self._probe is probe:
                self._probe = None

    async def _ask_metadata(self, trouble: int) -> str | None:
        # In a thread of its own, not the loop's executor: a stop must not wait for a
        # request to a broker that is down (the thread ends within PROBE_TIMEOUT anyway).
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str | None] = loop.create_future()

        def ask() -> None:
            problem = None
            try:
                self._producer.list_topics(self._topic, PROBE_TIMEOUT)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                problem = f"no broker answered a metadata request: {error.name()}: {error.str()}"
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_answer, answer, problem)

        threading.Thread(target=ask, name="kafka-probe", daemon=True).start()
        problem = await answer
        if problem is None:
            self._cleared = max(self._cleared, trouble)
        return problem

    def _poll(self) -> None:
        """Serve delivery reports, errors and logs until closed (the reports' thread)."""
        while not self._closed.is_set():
            try:
                self._producer.poll(_POLL)
            except Exception:  # a callback's bug: the reports must keep flowing
                log.exception("kafka_poll_failed", topic=self._topic)
            self._hand_over()

    def _hand_over(self) -> None:
        """Settle the futures of the reports one poll served: one wake-up of the event loop
        per poll, not one per record."""
        if not self._reports:
            return
        served, self._reports = self._reports, []
        by_loop: dict[asyncio.AbstractEventLoop, list[_Report]] = {}
        for loop, report in served:
            by_loop.setdefault(loop, []).append(report)
        for loop, reports in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, reports)

    def _close(self) -> None:
        self._poller.join()
        left = self._producer.flush(CLOSE_FLUSH)
        if left:
            log.warning("kafka_close_purged", topic=self._topic, records=left)
            self._producer.purge()
            self._producer.flush(0)  # serve the purged records' reports
        self._hand_over()

    def _delivered(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[KafkaError | None],
        error: KafkaError | None,
        _message: Any,
    ) -> None:
        """A record's delivery report (the producer's callback, in the reports' thread)."""
        if error is not None and error.code() in TROUBLE:
            self._trouble += 1
        self._reports.append((loop, (future, error)))

    def _client_error(self, error: KafkaError) -> None:
        # Connection trouble stops producing until a broker answers again; it shows in the
        # pipeline's log line, so only a fatal error (the producer is unusable) gets its own.
        if error.code() in TROUBLE:
            self._trouble += 1
        if error.fatal():
            log.error("kafka_client_fatal", code=error.name(), detail=self._hide(error.str()))

    def _hide(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


def _settle(reports: list[_Report]) -> None:
    """Hand each record's report to the sender awaiting it (on the event loop)."""
    for future, error in reports:
        if not future.done():  # its sender may have given up waiting (timeout, cancelled)
            future.set_result(error)


def _answer(future: asyncio.Future[str | None], problem: str | None) -> None:
    if not future.done():
        future.set_result(problem)


class _ClientLog:
    """librdkafka's own log lines (served in the reports' thread) as structlog events."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}  # librdkafka's facility (FAIL, ERROR, ...) -> when

    def log(self, level: int, fmt: str, *args: Any) -> None:
        # confluent-kafka hands over `logging` levels and (facility, client name, text).
        # librdkafka's errors (a refused connection, a failed handshake) are warnings here, one
        # per facility and CLIENT_LOG_EVERY: the client retries its connection every few
        # hundred milliseconds, and what becomes of the events is the pipeline's to log.
        text = fmt % args if args else fmt
        facility = str(args[0]) if args else ""
        now = time.monotonic()
        if level >= logging.WARNING and now - self._last.get(facility, -CLIENT_LOG_EVERY) >= (
            CLIENT_LOG_EVERY
        ):
            self._last[facility] = now
            log.warning("kafka_client_log", detail=text)
        else:
            log.debug("kafka_client_log", detail=text)
