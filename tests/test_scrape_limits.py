"""The /metrics endpoint's limits: idle connections can neither hold the agent's threads and
descriptors nor keep a scrape out."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from agent.telemetry.metrics import Metrics, MetricsServer
from agent.telemetry.scrapeserver import ScrapeServer
from tests.agentproc import keygen, run_agent, write_config
from tests.waits import wait


def idle(address: tuple[str, int], count: int) -> list[socket.socket]:
    """`count` connections that send nothing."""
    return [socket.create_connection(address, timeout=5) for _ in range(count)]


def closed(sock: socket.socket, seconds: float) -> bool:
    """Whether the server ends the connection within `seconds`."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


@contextmanager
def server(timeout: float, most: int = ScrapeServer.max_connections) -> Iterator[MetricsServer]:
    """A real metrics server on loopback with the given limits."""
    registry = CollectorRegistry()
    Metrics(registry)
    metrics = MetricsServer(
        registry,
        "127.0.0.1:0",
        lambda: b"{}",
        request_timeout=timeout,
        max_connections=most,
    )
    metrics.start()
    try:
        yield metrics
    finally:
        metrics.stop()


def test_idle_connections_are_closed_after_the_timeout() -> None:
    """A connection that sends no request, or half of one, is closed after the timeout."""
    with server(timeout=0.5) as metrics:
        silent, half = idle(metrics.address, 2)
        half.sendall(b"GET /metrics HTTP/1.1\r\n")  # headers never end
        began = time.monotonic()
        # Closed after the timeout (a busy machine can only make that later), and closed at
        # all: the hang guarded against is a connection held for good.
        assert closed(silent, 30) and closed(half, 30)
        assert time.monotonic() - began >= 0.4
        for sock in (silent, half):
            sock.close()


def test_a_scrape_gets_through_the_limit_of_idle_connections() -> None:
    """With the limit of idle connections open, a scrape closes the oldest and is answered;
    the server never runs more threads than the limit allows."""
    threads = threading.active_count()
    with server(timeout=30, most=4) as metrics:
        host, port = metrics.address
        held = idle(metrics.address, 4)
        try:
            # The server's own count: the process's threads may include ones an earlier test
            # left to end on their own, so their number cannot say when all four are in.
            wait(lambda: metrics.connections == 4)
            answer = httpx.get(f"http://{host}:{port}/metrics", timeout=30)
            assert answer.status_code == 200
            assert "lineage_events_dropped_total" in answer.text
            # The oldest was shut before the scrape was taken on; the others stay open (a
            # busy machine cannot make an open connection look closed).
            assert closed(held[0], 30)
            assert [closed(sock, 0.3) for sock in held[1:]] == [False, False, False]
            assert threading.active_count() <= threads + 1 + 4  # serve_forever and the limit
        finally:
            for sock in held:
                sock.close()


def test_idle_flood_leaves_the_agent_and_its_metrics_answering(tmp_path: Path) -> None:
    """The real agent with 16 + 34 idle connections to /metrics: a scrape is answered at
    once, and the agent holds no more threads and descriptors than the limit allows."""
    keygen(tmp_path)
    config = write_config(tmp_path, {"transport": "file", "file": {"path": str(tmp_path / "e")}})
    with run_agent(config, events=5) as agent:
        pid = agent.proc.pid
        assert agent.metrics_url is not None
        host, port = agent.metrics_url.split("/")[2].rsplit(":", 1)
        fds, tasks = len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))
        held = idle((host, int(port)), ScrapeServer.max_connections + 34)
        # The flood held: a thread for each connection up to the limit.
        wait(lambda: len(os.listdir(f"/proc/{pid}/task")) >= tasks + ScrapeServer.max_connections)
        began = time.monotonic()
        assert agent.scrape()["lineage_events_emitted_total{event_type=START}"] > 0
        # Not queued behind the idle connections: that would wait out their request timeout.
        assert time.monotonic() - began < ScrapeServer.request_timeout
        assert len(os.listdir(f"/proc/{pid}/fd")) <= fds + ScrapeServer.max_connections
        assert len(os.listdir(f"/proc/{pid}/task")) <= tasks + ScrapeServer.max_connections
        for sock in held:
            sock.close()
        assert agent.stop() == 0
