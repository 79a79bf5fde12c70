"""Shipping throughput: the same RunEvents through lineage-agent and through the
openlineage-python client, to the same loopback collector in its own process.

Contenders, each against a fresh collector process:
* the agent's real pieces in this process, wired as the daemon wires them (Signer, Pipeline,
  the delivery spool in the state directory, Delivery with its lanes, BoundedQueue of the
  default size, HttpTransport, the SQLite ledger): one event per POST (the default), and
  batches of `batch_size` per POST; and one event per POST again with `Expect:
  100-continue` on every request (the rule before it was limited to new and idle
  connections and large bodies), to show what the handshake costs;
* the peer's `HttpTransport` (requests, one POST per `emit`) and `AsyncHttpTransport`
  (httpx2 in a worker thread), with their default settings, sending the same events
  unsigned. The peer is handed the same dicts the agent gets: that skips its attrs
  conversion and the START-before-terminal bookkeeping `AsyncHttpTransport` keeps only for
  RunEvent objects, so the comparison errs in the peer's favour.
The collector's ceiling is measured with a trivial raw-socket client (pre-built requests,
the same connection count as the agent) to show it is not what limits the contenders.

The producer feeds the agent as fast as the queue takes events (it waits while the queue is
full), so the figures are sustained rates with nothing dropped. Every contender gets the same
`events` events but stops after `time_cap` seconds (its rate is then taken over what it sent;
the detail says so), so that a slow peer on a busy machine cannot stretch the whole run.

Signing: pynacl's `SigningKey.sign` on the canonical bytes of the same events is the floor
of any signed path; the agent's whole per-event path (batch mode, end to end: the CPU time
of the agent's process per event delivered, the collector's excluded) and its in-process
part alone (`Pipeline.submit`: canonical bytes, signature, JSON, digest, queue) are
compared with it. CPU time, not wall time, is the cost: on two shared cores the wall time
of the end-to-end run also holds the collector's turns on the CPU.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.bench.harness import CollectorProcess, Context, Figure, Result, Target, median

LINEAGE_PATH = "/api/v1/lineage"


@dataclass(frozen=True)
class Params:
    events: int = 50_000
    batch_size: int = 100
    ceiling_requests: int = 20_000
    ceiling_batches: int = 400
    connections: int = 4  # the agent's default http.concurrency
    sign_rounds: int = 3
    time_cap: float = 30.0  # seconds per contender; the rate is taken over what was sent


FULL = Params()
SMOKE = Params(events=300, ceiling_requests=300, ceiling_batches=6, sign_rounds=1, time_cap=30)


@dataclass
class Run:
    """One contender's pass: how many events left the client, how many the collector took."""

    sent: int
    seconds: float
    cpu_seconds: float
    accepted: int = 0
    capped: bool = False
    dropped: int = 0

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds if self.seconds > 0 else 0.0

    def detail(self) -> dict[str, Any]:
        return {
            "events_sent": self.sent,
            "events_accepted_by_collector": self.accepted,
            "seconds": round(self.seconds, 3),
            "cpu_us_per_event": round(self.cpu_seconds / max(self.sent, 1) * 1e6, 1),
            "stopped_by_time_cap": self.capped,
            "dropped": self.dropped,
        }


# -- the agent ---------------------------------------------------------------------------------


async def _agent(
    url: str,
    events: Sequence[Mapping[str, Any]],
    batch_size: int,
    state_dir: Path,
    cap: float,
    expect: Any = None,
) -> Run:
    from nacl.signing import SigningKey
    from prometheus_client import CollectorRegistry

    from agent.config.model import HttpConfig, LineageConfig
    from agent.delivery.pipeline import Pipeline
    from agent.delivery.queue import BoundedQueue
    from agent.delivery.shipping import Delivery
    from agent.delivery.signing import Signer
    from agent.delivery.spool import Spool
    from agent.delivery.transports.base import Transport
    from agent.delivery.transports.factory import lanes_for
    from agent.delivery.transports.http.transport import HttpTransport
    from agent.delivery.transports.http.wire import EXPECT
    from agent.state.db import StateDB
    from agent.telemetry.health import HealthTracker
    from agent.telemetry.metrics import Metrics

    lineage = LineageConfig(
        transport=("http",), http=HttpConfig(endpoint=url, batch_size=batch_size)
    )
    assert lineage.http is not None
    metrics, health = Metrics(CollectorRegistry()), HealthTracker()
    state = StateDB(state_dir)
    spool = open_spool(Spool, state_dir, lineage)
    pipeline = Pipeline(Signer(SigningKey.generate()).sign_event, metrics, health, spool)
    lanes, batch = lanes_for(lineage, "http")
    queue = BoundedQueue(lineage.queue_size, lanes)
    transport: Transport = HttpTransport(lineage.http, token=None, expect=expect or EXPECT)
    delivery = Delivery(
        transport,
        queue,
        batch_size=batch,
        metrics=metrics,
        health=health,
        ledger=state,
        spool=spool,
    )
    pipeline.add(delivery)
    delivery.start()

    async def flush_ledger() -> None:  # as the daemon does, off the per-event path
        while True:
            await asyncio.sleep(1.0)
            state.flush()

    flusher = asyncio.create_task(flush_ledger())
    began, cpu = time.perf_counter(), time.process_time()
    deadline = began + cap
    sent, capped = await submit_capped(pipeline, queue, events, deadline)
    await until_settled(lambda: delivery.delivered + delivery.dropped, sent, deadline)
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    flusher.cancel()
    await delivery.drain(time.monotonic() + 5)
    await delivery.aclose()
    spool.close()
    state.close()
    return Run(sent, seconds, cpu_seconds, capped=capped, dropped=delivery.dropped)


def open_spool(kind: Any, state_dir: Path, lineage: Any) -> Any:
    """The delivery spool as the daemon opens it by default (`lineage.spool`), in
    `state_dir`/spool."""
    settings = lineage.spool
    spool = kind(state_dir / "spool", int(settings.max_size_mb * 1024 * 1024), fsync=settings.fsync)
    spool.open()
    return spool


async def submit_capped(
    pipeline: Any, queue: Any, events: Sequence[Mapping[str, Any]], deadline: float
) -> tuple[int, bool]:
    """Submits `events` to `pipeline` in turn, waiting while `queue` is full, until all are in
    or the perf_counter `deadline` has passed (looked at every 256 events): (sent, capped)."""
    sent, capped = 0, False
    for event in events:
        while queue.depth >= queue.capacity:
            await asyncio.sleep(0.001)  # the queue holds far more than 1 ms of work
        pipeline.submit("bench", event)
        sent += 1
        if sent % 256 == 0:
            await asyncio.sleep(0)
            if time.perf_counter() > deadline:
                capped = True
                break
    return sent, capped


async def until_settled(settled: Callable[[], int], sent: int, deadline: float) -> None:
    """Returns once `settled()` counts `sent` events, or 30 s after the perf_counter
    `deadline`."""
    while settled() < sent:
        if time.perf_counter() > deadline + 30:
            break
        await asyncio.sleep(0.001)


def emit_capped(
    emit: Callable[[Any], object], events: Sequence[Mapping[str, Any]], began: float, cap: float
) -> tuple[int, bool]:
    """A peer transport's `emit` of each event in turn, until all are sent or `cap` seconds
    have passed since the perf_counter `began` (looked at every 256 events): (sent, capped)."""
    sent, capped = 0, False
    for event in events:
        emit(event)
        sent += 1
        if sent % 256 == 0 and time.perf_counter() - began > cap:
            capped = True
            break
    return sent, capped


def run_agent(
    url: str,
    events: Sequence[Mapping[str, Any]],
    batch_size: int,
    cap: float,
    expect: Any = None,
) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench-ship-") as state_dir:
        return asyncio.run(_agent(url, events, batch_size, Path(state_dir), cap, expect))


# -- the peer ----------------------------------------------------------------------------------


def run_peer_sync(base_url: str, events: Sequence[Mapping[str, Any]], cap: float) -> Run:
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    transport = HttpTransport(HttpConfig(url=base_url))
    began, cpu = time.perf_counter(), time.process_time()
    try:
        # dicts serialize like events
        sent, capped = emit_capped(transport.emit, events, began, cap)
    finally:
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
        transport.close()
    return Run(sent, seconds, cpu_seconds, capped=capped)


def run_peer_async(base_url: str, events: Sequence[Mapping[str, Any]], cap: float) -> Run:
    from openlineage.client.transport.async_http import AsyncHttpConfig, AsyncHttpTransport

    transport = AsyncHttpTransport(AsyncHttpConfig(url=base_url))
    began, cpu = time.perf_counter(), time.process_time()
    try:
        sent, capped = emit_capped(transport.emit, events, began, cap)
        transport.wait_for_completion(timeout=max(1.0, cap + 30 - (time.perf_counter() - began)))
    finally:
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
        transport.close(timeout=10)
    failed = transport.get_stats()["failed"]
    return Run(sent, seconds, cpu_seconds, capped=capped, dropped=failed)


# -- the collector's ceiling -------------------------------------------------------------------


def request_bytes(body: bytes, path: str) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


def raw_client(port: int, requests: Sequence[bytes], count: int, connections: int) -> float:
    """Send `count` pre-built requests over `connections` keep-alive sockets, one at a time
    per socket, reading only up to the end of each (empty-bodied) answer; the seconds."""
    per = count // connections
    errors: list[BaseException] = []

    def worker(offset: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for i in range(per):
                    sock.sendall(requests[(offset + i) % len(requests)])
                    answer = b""
                    while not answer.endswith(b"\r\n\r\n"):
                        chunk = sock.recv(4096)
                        if not chunk:
                            raise ConnectionError("the collector closed the connection")
                        answer += chunk
                    if not answer.startswith(b"HTTP/1.1 2"):
                        raise ConnectionError(f"answer {answer[:40]!r}")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n * per,)) for n in range(connections)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"raw client failed: {errors[0]!r}")
    return seconds


# -- signing -----------------------------------------------------------------------------------


def sign_alone(canonical: Sequence[bytes]) -> float:
    """Seconds for pynacl to sign every canonical form once."""
    from nacl.signing import SigningKey

    key = SigningKey.generate()
    sign = key.sign
    began = time.perf_counter()
    for data in canonical:
        sign(data)
    return time.perf_counter() - began


def submit_alone(events: Sequence[Mapping[str, Any]], chunk: int = 1024) -> float:
    """Seconds for `Pipeline.submit` of every event into a queue nobody drains: canonical
    bytes, signature, JSON, digest, envelope, queue offer, metrics; no network. The queue is
    emptied between chunks, outside the clock, so it never holds more than the default
    queue size (a queue of every event would time the allocator instead)."""
    from nacl.signing import SigningKey
    from prometheus_client import CollectorRegistry

    from agent.delivery.pipeline import Pipeline
    from agent.delivery.queue import BoundedQueue
    from agent.delivery.shipping import Delivery
    from agent.delivery.signing import Signer
    from agent.telemetry.health import HealthTracker
    from agent.telemetry.metrics import Metrics
    from agent.testing import RecordingTransport

    metrics, health = Metrics(CollectorRegistry()), HealthTracker()
    pipeline = Pipeline(Signer(SigningKey.generate()).sign_event, metrics, health)
    queue = BoundedQueue(chunk, 4)
    delivery = Delivery(RecordingTransport(), queue, batch_size=1, metrics=metrics, health=health)
    pipeline.add(delivery)
    submit = pipeline.submit
    seconds = 0.0
    for start in range(0, len(events), chunk):
        part = events[start : start + chunk]
        began = time.perf_counter()
        for event in part:
            submit("bench", event)
        seconds += time.perf_counter() - began
        if queue.depth != len(part) or delivery.dropped:
            raise RuntimeError(f"submit queued {queue.depth} of {len(part)} events")
        queue.take_all_waiting()
    return seconds


# -- the benchmark -----------------------------------------------------------------------------


def run(context: Context) -> Result:
    from agent.delivery.canonical import canonicalize
    from agent.delivery.transports.http.wire import EXPECT_ALWAYS
    from agent.testing import sample_run_events

    params = SMOKE if context.smoke else FULL
    result = Result("shipping", "python -m tests.bench shipping")
    events = list(sample_run_events(params.events))
    result.setup = {
        "events": params.events,
        "event_bytes_median": int(median([len(canonicalize(e)) for e in events[:1000]])),
        "agent": "in-process: Signer + Pipeline + spool + Delivery + BoundedQueue(1024, 4 "
        "lanes) + HttpTransport + SQLite ledger, as the daemon wires them",
        "peer": "openlineage-python 1.54 HttpTransport and AsyncHttpTransport, defaults",
        "collector": "tests/collector.py in its own process, a fresh one per contender",
        "time_cap_seconds": params.time_cap,
    }

    payloads = [request_bytes(_json(e), LINEAGE_PATH) for e in events[:2000]]
    batches = [
        request_bytes(
            b"[" + b",".join(_json(e) for e in events[i : i + params.batch_size]) + b"]",
            LINEAGE_PATH + "/batch",
        )
        for i in range(0, min(len(events), 20 * params.batch_size), params.batch_size)
    ]

    def contender(run_it: Any) -> Run:
        with CollectorProcess.standard() as collector:
            outcome: Run = run_it(collector)
            collector.stop()
            outcome.accepted = collector.accepted()
        if outcome.accepted != outcome.sent - outcome.dropped:
            result.notes.append(
                f"collector accepted {outcome.accepted} of {outcome.sent} events sent "
                f"({outcome.dropped} dropped by the client)"
            )
        return outcome

    with CollectorProcess.standard() as collector:
        single_s = raw_client(collector.port, payloads, params.ceiling_requests, params.connections)
        batch_s = raw_client(collector.port, batches, params.ceiling_batches, params.connections)
    ceiling = params.ceiling_requests / single_s
    ceiling_batch = params.ceiling_batches * params.batch_size / batch_s

    cap = params.time_cap
    agent_one = contender(lambda c: run_agent(c.url, events, 1, cap))
    peer_sync = contender(lambda c: run_peer_sync(c.base_url, events, cap))
    peer_async = contender(lambda c: run_peer_async(c.base_url, events, cap))
    agent_batch = contender(lambda c: run_agent(c.url, events, params.batch_size, cap))
    agent_expect = contender(lambda c: run_agent(c.url, events, 1, cap, EXPECT_ALWAYS))

    faster = max(
        (peer_sync, "HttpTransport"),
        (peer_async, "AsyncHttpTransport"),
        key=lambda pair: pair[0].rate,
    )
    peer_name = f"openlineage-python {faster[1]}, one event per POST (faster of the two)"
    result.add(
        Figure(
            "one_event_per_post",
            agent_one.rate,
            "events/s",
            peer_name,
            faster[0].rate,
            Target(">=", 5.0),
            {
                "agent": agent_one.detail(),
                "peer_http_transport": peer_sync.detail() | {"rate": round(peer_sync.rate, 1)},
                "peer_async_http_transport": peer_async.detail()
                | {"rate": round(peer_async.rate, 1)},
            },
        )
    )
    result.add(
        Figure(
            "batch_per_post",
            agent_batch.rate,
            "events/s",
            peer_name,
            faster[0].rate,
            Target(">=", 15.0),
            {"batch_size": params.batch_size, "agent": agent_batch.detail()},
        )
    )
    result.add(
        Figure(
            "one_event_per_post_expect_on_every_request",
            agent_expect.rate,
            "events/s",
            peer_name,
            faster[0].rate,
            None,
            {
                "what": "the agent as in one_event_per_post, but every POST says `Expect: "
                "100-continue` and waits for `100 Continue` before its body",
                "agent": agent_expect.detail(),
            },
        )
    )
    result.add(
        Figure(
            "collector_headroom_one_event_per_post",
            ceiling,
            "requests/s",
            "agent, one event per POST",
            agent_one.rate,
            Target(">=", 2.0),
            {
                "client": f"raw sockets, {params.connections} keep-alive connections",
                "requests": params.ceiling_requests,
            },
        )
    )
    result.add(
        Figure(
            "collector_headroom_batch",
            ceiling_batch,
            "events/s",
            "agent, batch mode",
            agent_batch.rate,
            Target(">=", 2.0),
            {"batch_size": params.batch_size, "batches": params.ceiling_batches},
        )
    )

    # Signing: the floor, measured around the agent's in-process part to share the noise.
    canonical = [canonicalize(e) for e in events]
    signs, submits = [], []
    for _ in range(params.sign_rounds):
        signs.append(sign_alone(canonical))
        submits.append(submit_alone(events))
    sign_us = median(signs) / len(events) * 1e6
    submit_us = median(submits) / len(events) * 1e6
    whole_us = agent_batch.cpu_seconds / max(agent_batch.sent, 1) * 1e6
    result.add(
        Figure(
            "signed_path_per_event_batch_end_to_end",
            whole_us,
            "us/event",
            "pynacl SigningKey.sign on the same canonical bytes",
            sign_us,
            Target("<=", 1.5),
            {
                "what": "CPU time of the agent's process per event, batch mode, from submit "
                "to the collector's answer (canonicalize, sign, orjson, sha256, spool, "
                "queue, metrics, HTTP, ledger)",
                "signed_events_per_second": round(agent_batch.rate, 1),
                "wall_us_per_event": round(1e6 / agent_batch.rate, 1) if agent_batch.rate else None,
                "signatures_per_second_alone": round(1e6 / sign_us, 1),
            },
        )
    )
    result.add(
        Figure(
            "signed_path_per_event_in_process",
            submit_us,
            "us/event",
            "pynacl SigningKey.sign on the same canonical bytes",
            sign_us,
            None,
            {
                "what": "Pipeline.submit alone: canonicalize, sign, orjson, sha256, envelope, "
                "queue offer, metrics",
                "rounds": params.sign_rounds,
            },
        )
    )
    return result


def _json(event: Mapping[str, Any]) -> bytes:
    import orjson

    return orjson.dumps(event)
