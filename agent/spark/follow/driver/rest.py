"""Asking a driver itself whether it runs an application: its UI's REST API.

Each driver's UI serves `/api/v1/applications/<id>` for its own application only, so an
answer naming the id proves that this application's driver is alive, whoever runs it and
whatever the agent may read in /proc. The request is the agent's own: that path, the id
checked against Spark's id grammar, sent to the host the log names (parsed strictly, checked
by `outbound.Guard`) and nothing else of the log.

At most one request a look: a UI on a port Spark chose is looked for on the ports Spark
tries, in its order (the one that answered last time first), and the request goes to the
first port that accepts a connection; its answer ends the look, whatever it says. A port
that refuses costs no request (each attempt still takes a token of the global rate). A driver
whose UI sits behind another application's UI on the same host (4041 while 4040 is taken) is
then known by its other signals: its port on this node, its cluster manager.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

import httpx

from agent.config.hosts import Address, parse_host
from agent.spark.eventlog.names import is_app_id
from agent.spark.follow.driver.outbound import Guard, default_guard

LOOPBACK: Final = "127.0.0.1"
# Seconds per port: a closed port refuses at once, but a UI's first REST answer (Jersey
# starting up in a driver that shares a busy node) can take many seconds.
TIMEOUT: Final = httpx.Timeout(15.0, connect=1.0)
BUDGET: Final = 30.0  # seconds for all the ports of one look
ANSWER_BUDGET: Final = 20.0  # seconds for one port's answer, however slowly its bytes come
MAX_PORTS: Final = 17  # Spark's default: 4040 and the 16 ports of spark.port.maxRetries


def ui_port_of(
    host: str,
    ports: Sequence[int],
    app_id: str,
    first: int | None = None,
    *,
    guard: Guard | None = None,
) -> int | None:
    """The port whose REST API answers for `app_id` on `host` (blocking; call from a
    thread), trying `first` before the others; None when none does."""
    guard = guard or default_guard()
    if not is_app_id(app_id):
        guard.refuse("bad_app_id", app_id[:64], "the application id")
        return None
    order = [first, *(p for p in ports if p != first)] if first else list(ports)
    if not order:
        return None
    # Resolved and checked once: every port is asked at the address checked here.
    checked = guard.target(parse_host(host), order[0], app_id=app_id, what="spark.driver.host")
    if checked is None:
        return None
    deadline = time.monotonic() + BUDGET
    with httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=False) as client:
        for port in order[:MAX_PORTS]:
            if not guard.take(app_id, "spark.driver.host"):
                return None
            target = replace(checked, port=port)
            reply = target.get_json(client, f"/api/v1/applications/{app_id}", budget=ANSWER_BUDGET)
            if reply.connected:
                body = reply.body
                return port if isinstance(body, dict) and body.get("id") == app_id else None
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
    parsed = parse_host(host)
    if not isinstance(parsed, Address):
        return False
    address = parsed.ip
    if address is None:
        try:
            infos = socket.getaddrinfo(parsed.host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False
        return any(is_local(str(info[4][0]).partition("%")[0]) for info in infos[:4])
    if address.is_loopback:
        return True
    if address.is_link_local:
        return False  # needs a scope to bind, and is never asked
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))  # only an address of this node can be bound
        except OSError:
            return False
    return True
