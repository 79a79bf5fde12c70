"""The client side of the control socket: one JSON request, one JSON answer.

`request` is what `lineage-agent status`, `describe`, `job stop` and `exec` send; `probe` is
how a starting agent tells a live agent's socket from a stale one.
"""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

from agent.errors import ControlError

MAX_REQUEST = 64 * 1024  # the largest request line the server reads
_PROBE_TIMEOUT = 2.0  # seconds a live agent has to accept a connection and answer


def request(path: str, payload: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Send one request to a running agent and return its answer (blocking)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except FileNotFoundError:
            raise ControlError(
                f"{path}: no agent is listening (is lineage-agent running?)"
            ) from None
        except PermissionError:
            raise ControlError(
                f"{path}: permission denied (join the socket's group or use sudo)"
            ) from None
        except ConnectionRefusedError:
            raise ControlError(f"{path}: no agent is listening (stale socket)") from None
        # The agent may close first (busy, request too large): its answer still says why.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(json.dumps(payload).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        raise ControlError(f"{path}: the agent closed the connection without answering")
    answer: dict[str, Any] = json.loads(data)
    return answer


def probe(path: str) -> int | None:
    """None when nobody listens at `path`; else the pid a live agent gives in its status
    answer, or 0 when the listener does not say (not an agent, or it refused us)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_PROBE_TIMEOUT)
        try:
            sock.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            return None
        except TimeoutError:
            return 0  # a listener whose backlog is full is alive
        try:
            sock.sendall(b'{"command": "status"}\n')
            data = b""
            while not data.endswith(b"\n") and len(data) < 4 * MAX_REQUEST:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            answer = json.loads(data)
            pid = answer.get("pid") if isinstance(answer, dict) else None
        except (OSError, ValueError):
            return 0
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else 0
