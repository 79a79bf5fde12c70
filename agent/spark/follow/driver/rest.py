"""Asking a driver itself whether it runs an application: its UI's REST API.

Each driver's UI serves `/api/v1/applications/<id>` for its own application only, so an
answer naming the id proves that this application's driver is alive, whoever runs it and
whatever the agent may read in /proc. A UI on a port Spark chose is found by trying the
ports Spark tries, in its order; the one that answered is tried first next time. Whatever
listens there may be anything: its answer is read within a time and size bound.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Sequence
from typing import Final

import httpx

from agent.spark.follow.driver.httpjson import get_json

LOOPBACK: Final = "127.0.0.1"
# Seconds per port: a closed port refuses at once, but a UI's first REST answer (Jersey
# starting up in a driver that shares a busy node) can take many seconds.
TIMEOUT: Final = httpx.Timeout(15.0, connect=1.0)
BUDGET: Final = 30.0  # seconds for all the ports of one look
ANSWER_BUDGET: Final = 20.0  # seconds for one port's answer, however slowly its bytes come


def ui_port_of(
    host: str, ports: Sequence[int], app_id: str, first: int | None = None
) -> int | None:
    """The port whose REST API answers for `app_id` on `host` (blocking; call from a
    thread), trying `first` before the others; None when none does."""
    order = [first, *(p for p in ports if p != first)] if first else list(ports)
    deadline = time.monotonic() + BUDGET
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        for port in order:
            if _answers(client, host, port, app_id):
                return port
            if time.monotonic() > deadline:
                break
    return None


def ask_at(host: str | None) -> str:
    """Where to ask a driver that gave `host`: loopback for a driver on this node (its UI
    listens on every interface unless SPARK_LOCAL_IP says otherwise), else its host."""
    if not host or is_local(host):
        return LOOPBACK
    return host


def is_local(host: str) -> bool:
    """Whether `host` names this node: a loopback address, or one this node can bind."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError:
            return False
        return any(is_local(str(info[4][0])) for info in infos[:4])
    if address.is_loopback:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))  # only an address of this node can be bound
        except OSError:
            return False
    return True


def _answers(client: httpx.Client, host: str, port: int, app_id: str) -> bool:
    where = f"[{host}]" if ":" in host else host
    body = get_json(
        client, f"http://{where}:{port}/api/v1/applications/{app_id}", budget=ANSWER_BUDGET
    )
    return isinstance(body, dict) and body.get("id") == app_id
