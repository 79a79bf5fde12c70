"""Liveness lookups the event log cannot steer: only a host and a port are taken from it, no
link-local or metadata address is contacted, `liveness.allowed_hosts` narrows the hosts, one
request a look, one global rate; measured with a loopback server counting what reaches it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.config.hosts import REFUSAL_REASONS, Address, parse_authority, parse_host
from agent.spark.follow.driver import rest
from agent.spark.follow.driver.outbound import Guard, TokenBucket
from tests.hostile_liveness import Counting, followed, hostile_apps, look_once

APP = "app-20261127161443-0007"


@pytest.fixture
def server() -> Iterator[Counting]:
    """A loopback server counting requests, shut at the end of the test."""
    counting = Counting()
    try:
        yield counting
    finally:
        counting.close()


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def driver(tmp_path: Path, host: str, ui_port: str, app_id: str = APP) -> Any:
    """A stale log whose driver gives `host` and `spark.ui.port`, its master unreachable."""
    props = {
        "spark.master": f"spark://127.0.0.1:{free_port()}",
        "spark.master.ui.port": str(free_port()),
        "spark.driver.host": host,
        "spark.ui.port": ui_port,
    }
    return followed(tmp_path, app_id, props)


async def test_the_issues_hostile_logs_send_nothing_they_chose(
    tmp_path: Path, server: Counting
) -> None:
    """The three logs of the issue (driver host, ResourceManager web address and AM proxy base
    with user info, a path and a query) make no request at all, where 19 went out before,
    and each refusal is counted."""
    refused: list[str] = []
    apps = [
        followed(tmp_path, app_id, case["spark"], case["hadoop"])
        for app_id, case in hostile_apps(server.port).items()
    ]
    assert await look_once(apps, guard=Guard(on_refused=refused.append)) == 3
    assert server.requests == []
    assert sorted(refused) == ["path", "userinfo", "userinfo"]


@pytest.mark.parametrize(
    ("host", "ui_port", "reason"),
    [
        ("user:secret@127.0.0.1:{port}/admin/x?y=1#", "{port}", "userinfo"),
        ("127.0.0.1:{port}/admin/x", "{port}", "path"),
        ("127.0.0.1?x=1", "{port}", "query"),
        ("127.0.0.1#frag", "{port}", "fragment"),
        ("127.0.0.1 /admin", "{port}", "whitespace"),
        ("127.0.0.1\r\nX-Injected: 1", "{port}", "whitespace"),
        ("127.0.0.1\x1b[2J", "{port}", "control"),
        ("127.0.0.1\u200b", "{port}", "control"),
        ("[::ffff:169.254.169.254]", "{port}", "forbidden_address"),
        ("[fe80::1%eth0]", "{port}", "bad_host"),
        ("169.254.169.254", "{port}", "forbidden_address"),
        ("metadata.google.internal", "{port}", "forbidden_address"),
        ("0x7f000001", "{port}", "bad_host"),
    ],
)
async def test_a_hostile_driver_host_is_refused(
    tmp_path: Path, server: Counting, host: str, ui_port: str, reason: str
) -> None:
    """A driver host that is more than a host, no host, or a forbidden address makes no
    request; the refusal is counted with its reason."""
    refused: list[str] = []
    app = driver(tmp_path, host.format(port=server.port), ui_port.format(port=server.port))
    assert await look_once([app], guard=Guard(on_refused=refused.append)) == 1
    assert server.requests == []
    assert refused == [reason]


async def test_a_huge_port_is_not_a_port(tmp_path: Path, server: Counting) -> None:
    """`spark.ui.port` of 99999999 is no port: the UI is looked for where Spark's default
    puts it, never at a port the number wraps to."""
    app = driver(tmp_path, "127.0.0.1", "99999999")
    assert app.log.driver.ui_port is None
    assert await look_once([app], guard=Guard()) == 1
    assert server.requests == []


async def test_a_name_resolving_to_the_metadata_address_is_never_asked(
    tmp_path: Path, server: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver host whose name resolves to 169.254.169.254 is refused on the resolved
    address. `getaddrinfo` is patched because this machine has no DNS to serve such a name."""
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "driver.evil.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    refused: list[str] = []
    app = driver(tmp_path, "driver.evil.test", str(server.port))
    assert await look_once([app], guard=Guard(on_refused=refused.append)) == 1
    assert refused == ["forbidden_address"]
    assert server.requests == []


def test_the_checked_address_is_the_one_connected_to(
    server: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name is resolved once: a second answer of the resolver (DNS rebinding to the
    metadata address) is never used; the request goes to the checked address with the name
    as its Host. `getaddrinfo` is patched: no DNS here."""
    answers = iter(["127.0.0.1", "169.254.169.254", "169.254.169.254"])
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "driver.rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    ports = [server.port, server.port]
    assert rest.ui_port_of("driver.rebind.test", ports, APP, guard=Guard()) is None
    assert [path for path, _ in server.requests] == [f"/api/v1/applications/{APP}"]


def test_one_request_a_look_however_many_ui_ports(server: Counting) -> None:
    """Ports that refuse cost no request; the first port that answers ends the look, so 17
    candidate ports give one request, to the agent's own path."""
    ports = [free_port(), free_port(), *([server.port] * 15)]
    assert rest.ui_port_of("127.0.0.1", ports, APP, guard=Guard()) is None
    assert [path for path, _ in server.requests] == [f"/api/v1/applications/{APP}"]


def test_an_application_id_spark_never_gives_is_not_asked(server: Counting) -> None:
    """The id in the REST path must be one Spark gives: `../admin?x` is refused."""
    refused: list[str] = []
    guard = Guard(on_refused=refused.append)
    assert rest.ui_port_of("127.0.0.1", [server.port], "../admin?x=1", guard=guard) is None
    assert (server.requests, refused) == ([], ["bad_app_id"])


@pytest.mark.parametrize(
    ("allowed", "requests", "refused"),
    [
        ((), 1, []),
        (("127.0.0.0/8",), 1, []),
        (("127.0.0.1",), 1, []),
        (("10.0.0.0/8", "*.example.com"), 0, ["not_allowed"]),
        (("*.rebind.test",), 1, []),
        (("rebind.test",), 0, ["not_allowed"]),
    ],
)
def test_allowed_hosts_narrow_the_lookups(
    server: Counting,
    monkeypatch: pytest.MonkeyPatch,
    allowed: tuple[str, ...],
    requests: int,
    refused: list[str],
) -> None:
    """`liveness.allowed_hosts`: a name, a wildcard below a domain, an address or a network
    lets a host be asked; anything else is refused. `getaddrinfo` is patched: no DNS here."""
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "driver.rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    seen: list[str] = []
    guard = Guard.of(allowed, 10.0, seen.append)
    assert rest.ui_port_of("driver.rebind.test", [server.port], APP, guard=guard) is None
    assert (len(server.requests), seen) == (requests, refused)


def test_the_global_rate_spaces_requests(server: Counting) -> None:
    """All lookups share one bucket: at 5 requests a second, 10 looks take about a second
    past the first 5, from several threads at once."""
    guard = Guard(rate=5.0)
    began = time.monotonic()
    threads = [
        threading.Thread(
            target=rest.ui_port_of,
            args=("127.0.0.1", [server.port], APP, None),
            kwargs={"guard": guard},
        )
        for _ in range(10)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.requests) == 10
    assert time.monotonic() - began >= 0.9


def test_a_bucket_without_tokens_refuses_after_its_wait() -> None:
    """A token bucket emptied gives no token within a wait shorter than its refill."""
    bucket = TokenBucket(2.0)
    assert [bucket.take(0) for _ in range(3)] == [True, True, False]
    assert bucket.take(1.0)


def test_every_refusal_reason_is_exported_at_zero() -> None:
    """`lineage_liveness_refused_total` shows each reason from the start."""
    from prometheus_client import CollectorRegistry

    from agent.telemetry.metrics import LIVENESS_REFUSALS, Metrics

    assert LIVENESS_REFUSALS == REFUSAL_REASONS
    registry = CollectorRegistry()
    Metrics(registry)
    for reason in REFUSAL_REASONS:
        value = registry.get_sample_value("lineage_liveness_refused_total", {"reason": reason})
        assert value == 0.0, reason


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_no_text_parses_to_more_than_a_host_and_a_port(text: str) -> None:
    """Whatever a log holds, a parsed value is a bare host (no `@/?#`, space or control
    character) and a port from 1 to 65535, or a refusal; the parsers never raise."""
    for parsed in (parse_host(text), parse_authority(text)):
        if isinstance(parsed, Address):
            assert not any(c in parsed.host for c in "@/?# \t\r\n%")
            assert parsed.host.isascii() and parsed.host.isprintable()
            assert parsed.port is None or 0 < parsed.port <= 65535
        else:
            assert parsed in REFUSAL_REASONS
