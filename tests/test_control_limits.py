"""The control socket's limits against the real agent: idle connections are closed, a flood of
them never takes the descriptors /metrics and `status` need, and a too-large request gets its
answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from agent.service.control.client import MAX_REQUEST, request
from agent.service.control.connections import Connections, ControlLimits
from tests.agentproc import AgentProcess, keygen, run_agent, write_config
from tests.waits import wait

ROOT = Path(__file__).resolve().parents[1]
LIMITS = ControlLimits()
TOO_LARGE = b'{"ok": false, "error": "request too large"}\n'


@contextmanager
def agent(tmp_path: Path, *args: str) -> Iterator[tuple[AgentProcess, Path]]:
    """The real daemon on the in-memory source; yields it and its control socket's path."""
    keygen(tmp_path)
    config = write_config(tmp_path, {"transport": "file", "file": {"path": str(tmp_path / "e")}})
    with run_agent(config, events=10, args=list(args)) as process:
        yield process, tmp_path / "control.sock"


def connect(path: Path, patience: float = 30.0) -> socket.socket:
    """A connection to `path`, waiting while the listen backlog is full."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    deadline = time.monotonic() + patience
    while True:
        try:
            sock.connect(str(path))
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                sock.close()
                raise
            time.sleep(0.002)
    sock.setblocking(True)
    return sock


def received(sock: socket.socket, seconds: float = 0.0) -> bytes | None:
    """What the agent sent before it closed the connection; None while it is still open
    (after waiting up to `seconds` for the end). A unix socket closed with part of a request
    unread ends in ECONNRESET after what was sent."""
    if seconds:
        sock.settimeout(seconds)
    else:
        sock.setblocking(False)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (BlockingIOError, TimeoutError):
        return None
    except ConnectionResetError:
        pass
    return data


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cli_status(socket_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "status", "--socket", str(socket_path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_idle_flood_leaves_status_and_metrics_answering(tmp_path: Path) -> None:
    """64 + 50 idle connections opened at once: the agent holds 64, closes the 50 oldest
    with the reason, answers `status` (closing one more) and /metrics, and holds no more
    descriptors than the limit allows."""
    with agent(tmp_path) as (process, path):
        pid = process.proc.pid
        before = descriptors(pid)
        held = [connect(path) for _ in range(LIMITS.max_connections + 50)]
        # The flood taken in: the 50th oldest got its notice once the last one was accepted
        # (peeked, not read: the answers are read below). Then the descriptors settle at the
        # limit (one pass of the event loop may accept a few more before closing the oldest).
        assert select.select([held[49]], [], [], 30)[0], "the flood was not taken in"
        wait(lambda: descriptors(pid) <= before + LIMITS.max_connections)

        # Answered at once, not after the idle timeout: the notices below say the idle
        # connections were closed to make room, none for having waited it out.
        status = cli_status(path)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["state"] == "running"
        metrics = httpx.get(str(process.metrics_url), timeout=5)
        assert metrics.status_code == 200
        assert any(name.startswith("lineage_events_emitted_total") for name in process.scrape())

        notice = (
            b'{"ok": false, "error": "closed: no request came, and 64 connections were open"}\n'
        )
        answers = [received(sock) for sock in held]
        assert answers[:51] == [notice] * 51
        assert answers[51:] == [None] * (len(held) - 51)
        assert descriptors(pid) <= before + LIMITS.max_connections
        [line] = [r for r in process.logs() if r.get("event") == "control_connection_limit"]
        assert (line["max_connections"], line["idle_closed"]) == (64, 1)
        for sock in held:
            sock.close()
        assert process.stop() == 0


def test_idle_connection_is_closed_after_the_timeout(tmp_path: Path) -> None:
    """A connection that sends no request, or only part of one, is closed after the idle
    timeout with the reason; one that keeps asking within it stays open."""
    # Asked every 0.3 s for 3 s, past a 2 s timeout: a busy machine has 1.7 s to lose
    # between two requests before `asking` would look idle.
    with agent(tmp_path, "--control-idle-timeout", "2") as (process, path):
        silent, dribbling, asking = connect(path), connect(path), connect(path)
        began = time.monotonic()
        for _ in range(10):
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                dribbling.sendall(b" ")  # a request line that never ends
            asking.sendall(b'{"command": "status"}\n')
            answer = b""
            while not answer.endswith(b"\n"):
                answer += asking.recv(65536)
            assert json.loads(answer)["ok"] is True
            time.sleep(0.3)
        notice = b'{"ok": false, "error": "closed: no request within 2s"}\n'
        assert received(silent, 30) == notice
        assert received(dribbling, 30) == notice
        assert time.monotonic() - began >= 2  # after the timeout, never before
        assert received(asking) is None  # still open: each request came within the timeout
        for sock in (silent, dribbling, asking):
            sock.close()
        assert process.stop() == 0


def test_oversized_request_is_answered_request_too_large(tmp_path: Path) -> None:
    """A 1 MB request line, and one byte over the limit, get `request too large` and the
    connection ends; a line of exactly the limit is served; the agent keeps answering."""
    with agent(tmp_path) as (process, path):
        sock = connect(path)
        sock.sendall(b'{"command": "status", "pad": "' + b"x" * 1_000_000 + b'"}\n')
        assert received(sock, 10) == TOO_LARGE
        sock.close()

        def padded(size: int) -> bytes:
            """A status request of `size` bytes before its newline."""
            head = b'{"command": "status", "pad": "'
            return head + b"x" * (size - len(head) - 2) + b'"}\n'

        sock = connect(path)
        sock.sendall(padded(MAX_REQUEST + 1))
        assert received(sock, 10) == TOO_LARGE
        sock.close()
        sock = connect(path)
        sock.sendall(padded(MAX_REQUEST))
        sock.shutdown(socket.SHUT_WR)
        assert json.loads(received(sock, 10) or b"")["state"] == "running"
        sock.close()

        # The agent's own client reads the answer even when the agent closed first.
        answer = request(str(path), {"command": "status", "pad": "x" * 4_000_000}, timeout=10)
        assert answer == {"ok": False, "error": "request too large"}
        assert request(str(path), {"command": "status"})["state"] == "running"
        assert process.stop() == 0


def test_busy_connections_refuse_a_newcomer(tmp_path: Path) -> None:
    """When every connection is busy with a request, one more is answered `busy` and closed
    (the agent's client reads that even when the close came before its request), and none of
    the busy ones is touched."""
    path = tmp_path / "s.sock"

    async def scenario() -> list[dict[str, Any]]:
        connections = Connections(ControlLimits(idle_timeout=5, max_connections=2))
        release = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if not connections.admit(writer):
                return
            try:
                line = await connections.read_request(reader, writer)
                await release.wait()  # a request in progress
                await connections.send(writer, b'{"ok": true, "asked": %s}\n' % line.strip())
            finally:
                connections.leave(writer)
                await connections.close(writer)

        server = await asyncio.start_unix_server(serve, path=str(path))
        loop = asyncio.get_running_loop()
        busy = [loop.run_in_executor(None, request, str(path), {"n": n}) for n in (1, 2)]
        while connections.count < 2:
            await asyncio.sleep(0.01)
        third = await loop.run_in_executor(None, request, str(path), {"n": 3})
        release.set()
        answers = [await asyncio.wait_for(answer, 10) for answer in busy]
        server.close()
        await server.wait_closed()
        return [third, *answers]

    third, first, second = asyncio.run(scenario())
    assert third == {"ok": False, "error": "busy: 2 requests are in progress; try again"}
    assert (first, second) == ({"ok": True, "asked": {"n": 1}}, {"ok": True, "asked": {"n": 2}})
