"""Every metric of the agent, on an injected registry, and the loopback scrape endpoint.

Every name starts with `lineage_`, except the standard `process_*` family (open files against
the limit, memory, CPU) that dashboards and alerts expect under its usual names. Every
labelled counter shows each of its documented label values at 0 from the start, so that
`increase()` sees the first occurrence, and no counter exports a `_created` series.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import ipaddress
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final
from wsgiref.simple_server import make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from agent import __version__
from agent.errors import DROP_REASONS, NOT_SENT_REASONS, NOT_STORED_STATUSES, UNCONFIRMED_REASONS
from agent.telemetry.scrapeserver import QuietHandler, ScrapeServer, ScrapeServer6

# Delivery latency of one event, from entering the pipeline to the transport's answer.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The `event_type` values of `lineage_events_emitted_total` (OpenLineage's run states).
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "FAIL", "ABORT")
#: The `reason` values of `lineage_eventlog_lines_skipped_total` (agent.spark.follow.problems).
SKIP_REASONS = ("corrupt_json", "malformed_event", "too_long", "read_error", "special_file")
#: The `cause` values of `lineage_applications_ended_total`: `driver_lost` when an in-progress
#: log went stale with no driver alive, `log_ended` when a log ended without ApplicationEnd.
END_CAUSES = ("driver_lost", "log_ended")
#: The `reason` values of `lineage_events_resent_total` (agent.delivery.retry).
RESEND_REASONS = ("unconfirmed_terminal",)
#: The `reason` values of `lineage_liveness_refused_total` (agent.config.hosts.RefusalReason).
LIVENESS_REFUSALS = (
    "userinfo",
    "path",
    "query",
    "fragment",
    "whitespace",
    "control",
    "bad_host",
    "bad_port",
    "bad_app_id",
    "forbidden_address",
    "not_allowed",
    "unresolved",
    "rate_limited",
)


class Metrics:
    """The agent's metrics; one instance per process, built on the registry it is given."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # `_created` series double every counter and no alert or panel reads them; the switch
        # is prometheus_client's only one and is process-wide (every registry of the process).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry
        # process_open_fds / process_max_fds: the alert on the open-files limit of the unit.
        ProcessCollector(registry=registry)
        counter = functools.partial(Counter, registry=registry)
        gauge = functools.partial(Gauge, registry=registry)
        self.dropped = counter(
            "lineage_events_dropped",
            "Events that will never be delivered, for any reason (one per event and transport).",
        )
        self.dropped_by_reason = counter(
            "lineage_events_dropped_by_reason",
            "Dropped events by transport and reason.",
            ["transport", "reason"],
        )
        self.unconfirmed = counter(
            "lineage_events_unconfirmed",
            "Events whose request left without an answer (timeout, broken connection): the "
            "collector may have stored them; never sent again and not counted as dropped.",
            ["transport", "reason"],
        )
        self.not_sent = counter(
            "lineage_delivery_not_sent",
            "Requests that provably never left (no connection, no TLS session); their events "
            "stayed queued and went again. Counts attempts, not events.",
            ["transport", "reason"],
        )
        self.retries = counter(
            "lineage_delivery_retries",
            "Requests sent again because the collector answered that it did not store them "
            "(429, 500, 502, 503, 504 by default), by the status it answered. Counts attempts, "
            "not events.",
            ["transport", "status"],
        )
        self.resent = counter(
            "lineage_events_resent",
            "Events sent a second time, byte-identical: a run's terminal event whose request "
            "got no answer (unconfirmed_terminal). Its outcome is counted once, as usual.",
            ["transport", "reason"],
        )
        self.late_answers = counter(
            "lineage_http_late_answers",
            "Answers that came after the request's timeout, within the late-answer wait (the "
            "run's next event waited for them).",
            ["transport"],
        )
        self.emitted = counter(
            "lineage_events_emitted",
            "RunEvents produced and signed by the agent, by OpenLineage event type.",
            ["event_type"],
        )
        self.offered = counter(
            "lineage_events_offered",
            "Events offered to a transport's queue: those produced while it was configured. "
            "Per transport, offered = delivered + dropped + unconfirmed + queue depth at every "
            "scrape.",
            ["transport"],
        )
        self.delivered = counter(
            "lineage_events_delivered",
            "Events accepted by a transport (HTTP 2xx or written to the file).",
            ["transport"],
        )
        self.queue_depth = gauge(
            "lineage_queue_depth",
            "Events accepted and not yet resolved (waiting, in flight, or waiting for a "
            "collector that did not answer to try again).",
            ["transport"],
        )
        self.queue_capacity = gauge(
            "lineage_queue_capacity",
            "Capacity of the bounded queue in events.",
            ["transport"],
        )
        self.latency = Histogram(
            "lineage_delivery_latency_seconds",
            "Time from an event entering the pipeline to its delivery.",
            ["transport"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.reloads = counter(
            "lineage_config_reloads",
            "Configuration reloads by result.",
            ["result"],
        )
        self.applications = gauge(
            "lineage_applications_tracked",
            "Spark applications the agent is following.",
        )
        self.leases_held = gauge(
            "lineage_state_leases_held",
            "Spark applications this agent owns through a lease in the shared state database.",
        )
        self.restored = counter(
            "lineage_events_restored",
            "Events an earlier run of the agent left in the spool unsent, offered again at "
            "start (counted in lineage_events_offered_total too).",
            ["transport"],
        )
        self.spool_bytes = gauge(
            "lineage_spool_bytes",
            "Bytes the spool of events not yet resolved holds on disk.",
        )
        self.spool_capacity = gauge(
            "lineage_spool_capacity_bytes",
            "The spool's size bound; an event past it is dropped as spool_full.",
        )
        self.spool_corrupt = counter(
            "lineage_spool_corrupt_records",
            "Stretches of the spool skipped at start because their frame or checksum was wrong "
            "(a torn write, a damaged disk).",
        )
        self.handed_over = counter(
            "lineage_events_handed_over",
            "Events another agent claimed and fell silent without recording an outcome for, "
            "taken over by this one (a shared state): the collector may have them; never sent "
            "again.",
        )
        self.eventlog_bytes = counter(
            "lineage_eventlog_read_bytes",
            "Bytes read from Spark event-log files (as stored, before decompression).",
        )
        self.eventlog_lines_skipped = counter(
            "lineage_eventlog_lines_skipped",
            "Event-log lines skipped: corrupt JSON, malformed events, over the length bound, or "
            "unreadable.",
            ["reason"],
        )
        self.applications_ended = counter(
            "lineage_applications_ended",
            "Spark applications whose runs the agent ended itself, without an ApplicationEnd: "
            "driver_lost (stale in-progress log, no driver alive), log_ended (the log ended).",
            ["cause"],
        )
        self.store_requests = counter(
            "lineage_eventlog_store_requests",
            "Requests to the stores holding event logs (S3, GCS, Azure, HDFS) by kind: list, "
            "head (a file's size) and get (a range of bytes).",
            ["request"],
        )
        for request in ("list", "head", "get"):
            self.store_requests.labels(request=request)
        # Per followed directory on a store (its URL without a password): a few at most.
        self.store_up = gauge(
            "lineage_eventlog_store_up",
            "1 when the last look at an event-log directory on a store listed it whole, 0 "
            "while it fails (unreachable, refused, or no whole answer within "
            "spark.store_request_timeout).",
            ["store"],
        )
        self.store_failures = counter(
            "lineage_eventlog_store_failures",
            "Looks at an event-log directory on a store that could not list it.",
            ["store"],
        )
        self.store_last_listing = gauge(
            "lineage_eventlog_store_last_listing_timestamp_seconds",
            "Unix time the last whole listing of an event-log directory on a store ended.",
            ["store"],
        )
        self.store_listing_seconds = gauge(
            "lineage_eventlog_store_listing_seconds",
            "How long the last look at an event-log directory on a store took, failed or not.",
            ["store"],
        )
        self.liveness_refused = counter(
            "lineage_liveness_refused",
            "Liveness lookups refused before any request: a driver or manager address from an "
            "event log that is more than a host and a port, forbidden (link-local, cloud "
            "metadata), outside liveness.allowed_hosts, unresolved, or over the rate limit.",
            ["reason"],
        )
        for reason in LIVENESS_REFUSALS:
            self.liveness_refused.labels(reason=reason)
        self.eventlog_files_ignored = counter(
            "lineage_eventlog_files_ignored",
            "Files and directories in event-log directories whose names Spark does not write "
            "(each counted once): they change no application's state.",
        )
        self.build = Info("lineage_build", "Build information.", registry=registry)
        self.build.info({"version": __version__})
        for result in ("ok", "error"):
            self.reloads.labels(result=result)
        for event_type in EVENT_TYPES:
            self.emitted.labels(event_type=event_type)
        for skipped in SKIP_REASONS:
            self.eventlog_lines_skipped.labels(reason=skipped)
        for cause in END_CAUSES:
            self.applications_ended.labels(cause=cause)

    def register_transport(self, transport: str, capacity: int) -> None:
        """Create a transport's series at zero so that scrapes show them before any traffic."""
        self.offered.labels(transport=transport)
        self.restored.labels(transport=transport)
        self.delivered.labels(transport=transport)
        self.queue_depth.labels(transport=transport).set(0)
        self.queue_capacity.labels(transport=transport).set(capacity)
        self.latency.labels(transport=transport)
        for dropped in DROP_REASONS:
            self.dropped_by_reason.labels(transport=transport, reason=dropped)
        for reason in UNCONFIRMED_REASONS:
            self.unconfirmed.labels(transport=transport, reason=reason)
        for not_sent in NOT_SENT_REASONS:
            self.not_sent.labels(transport=transport, reason=not_sent)
        for status in NOT_STORED_STATUSES:
            self.retries.labels(transport=transport, status=str(status))
        for resent in RESEND_REASONS:
            self.resent.labels(transport=transport, reason=resent)
        self.late_answers.labels(transport=transport)

    def drop(self, transport: str, reason: str, count: int = 1) -> None:
        self.dropped.inc(count)
        self.dropped_by_reason.labels(transport=transport, reason=reason).inc(count)


#: Seconds a scrape waits for the event loop to render it before it renders from its own
#: thread: a wedged loop must not take `/metrics`, the place to see it, down with it.
SNAPSHOT_WAIT: Final = 2.0


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


def render_in(loop: asyncio.AbstractEventLoop | None, registry: CollectorRegistry) -> bytes:
    """`registry` rendered in `loop`'s thread, which changes every accounting counter: no event
    moves between a scrape's first line and its last, so produced = delivered + dropped +
    unconfirmed + queued holds in each scrape, not only once the agent is at rest."""
    if loop is None:
        return render(registry)
    taken: concurrent.futures.Future[bytes] = concurrent.futures.Future()

    def take() -> None:
        if taken.set_running_or_notify_cancel():
            try:
                taken.set_result(render(registry))
            except BaseException as error:
                taken.set_exception(error)

    try:
        loop.call_soon_threadsafe(take)
        return taken.result(SNAPSHOT_WAIT)
    except (RuntimeError, TimeoutError):  # the loop is closed, or held: as it stands
        if not taken.cancel() and taken.done():
            return taken.result()
        return render(registry)


def parse_listen(listen: str) -> tuple[str, int]:
    """Split `host:port` or `[v6]:port` (validated by the config loader)."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class MetricsServer:
    """`/metrics` (Prometheus text) and `/healthz` (JSON) on a background thread."""

    def __init__(
        self,
        registry: CollectorRegistry,
        listen: str,
        health: Callable[[], bytes],
        *,
        request_timeout: float = ScrapeServer.request_timeout,
        max_connections: int = ScrapeServer.max_connections,
    ):
        """Bind `listen`; the limits are `ScrapeServer`'s (tests make them small). Made in
        the agent's event loop, the one that changes the counters, it renders scrapes there
        (`render_in`)."""
        host, port = parse_listen(listen)
        server_class: type[ScrapeServer] = ScrapeServer
        try:
            if ipaddress.ip_address(host).version == 6:
                server_class = ScrapeServer6
        except ValueError:
            pass  # a host name: IPv4 resolution as usual
        self._registry = registry
        self._health = health
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._server = make_server(host, port, self._app, server_class, QuietHandler)
        self._server.request_timeout = request_timeout
        self._server.max_connections = max_connections
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def connections(self) -> int:
        """The connections the server holds now, each with its thread (bounded)."""
        return self._server.connections

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body = render_in(self._loop, self._registry)
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [body]
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [self._health()]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; try /metrics or /healthz\n"]
