"""The HTTP transport against a real loopback collector: delivery, failure reasons, TLS, modes."""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trustme

from agent import __version__
from agent.config.model import HttpAuth, HttpConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.http.settings import check_endpoint
from agent.delivery.transports.http.transport import HttpTransport
from agent.delivery.transports.http.wire import ExpectRule
from agent.errors import (
    DeliveryError,
    NotSent,
    NotStored,
    StartError,
    TransportFailure,
    Unconfirmed,
)
from tests.collector import Collector, closed_port, slow, together
from tests.envelopes import start_envelope
from tests.olschema import example_run_event

TOKEN = "s3cr3t-Token_value.1234"

Factory = Callable[..., HttpTransport]


def run_event(i: int) -> bytes:
    """A compact RunEvent as the signer would hand it over."""
    event: dict[str, Any] = {
        "eventType": "START" if i % 2 == 0 else "COMPLETE",
        "eventTime": f"2025-01-01T00:00:{i % 60:02d}.000Z",
        "producer": "https://github.com/example/lineage-agent",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.UUID(int=i)), "facets": {}},
        "job": {"namespace": "spark", "name": f"app_{i}"},
        "inputs": [],
        "outputs": [],
    }
    return json.dumps(event, separators=(",", ":")).encode()


def envelope(i: int) -> Envelope:
    payload = run_event(i)
    return start_envelope(payload, str(uuid.UUID(int=i)))


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running


@pytest.fixture
async def make() -> AsyncIterator[Factory]:
    """Builds transports from HttpConfig keywords and closes them after the test."""
    made: list[HttpTransport] = []

    def factory(endpoint: str, *, token: str | None = None, **fields: Any) -> HttpTransport:
        if token is not None:
            fields.setdefault("auth", HttpAuth(type="bearer", token_env="OL_TOKEN"))
        transport = HttpTransport(HttpConfig(endpoint=endpoint, **fields), token=token)
        made.append(transport)
        return transport

    yield factory
    for transport in made:
        await transport.aclose()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


_Failure = TypeVar("_Failure", DeliveryError, NotSent, NotStored, Unconfirmed)


def server_context(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    return context


async def failure(
    transport: HttpTransport, batch: list[Envelope], kind: type[_Failure]
) -> _Failure:
    """The failure a send raises, which must be of `kind`: dropped (DeliveryError), never
    sent (NotSent) or unconfirmed (Unconfirmed)."""
    with pytest.raises(TransportFailure) as caught:
        await transport.send(batch)
    assert type(caught.value) is kind, caught.value
    assert isinstance(caught.value, kind)
    return caught.value


async def test_delivers_payload_bytes_unchanged(collector: Collector, make: Factory) -> None:
    """A 201 answer delivers; the collector receives the payload bytes exactly as sent."""
    transport = make(collector.url)
    sent = envelope(1)
    await transport.send([sent])
    (request,) = collector.requests
    assert (request.method, request.path, request.body) == ("POST", "/api/v1/lineage", sent.payload)
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == f"lineage-agent/{__version__}"
    assert "authorization" not in request.headers
    assert "content-encoding" not in request.headers
    assert collector.events == [json.loads(sent.payload)]


@pytest.mark.parametrize("status", [200, 202, 204])
async def test_any_2xx_delivers(collector: Collector, make: Factory, status: int) -> None:
    """Every 2xx answer counts as delivered."""
    collector.set_behaviour(status)
    await make(collector.url).send([envelope(1)])
    assert len(collector.requests) == 1


@pytest.mark.parametrize(
    ("status", "reason", "detail"),
    [
        (400, "http_4xx", "HTTP 400 Bad Request"),
        (401, "http_4xx", "HTTP 401 Unauthorized"),
        (413, "http_4xx", "HTTP 413 Request Entity Too Large"),
        (501, "http_5xx", "HTTP 501 Not Implemented"),
        (505, "http_5xx", "HTTP 505 HTTP Version Not Supported"),
    ],
)
async def test_error_status_maps_to_reason(
    collector: Collector, make: Factory, status: int, reason: str, detail: str
) -> None:
    """4xx and 5xx answers not in `retry.status_forcelist` raise DeliveryError with their
    reason and the status as detail."""
    collector.set_behaviour(status)
    error = await failure(make(collector.url), [envelope(1)], DeliveryError)
    assert (error.reason, error.detail, str(error)) == (reason, detail, f"{reason}: {detail}")
    assert len(collector.requests) == 1  # never retried


async def test_error_answer_keeps_connection(collector: Collector, make: Factory) -> None:
    """After an error status the connection is reused; failures cost no reconnect."""
    transport = make(collector.url)
    collector.set_behaviour(503)
    await failure(transport, [envelope(1)], NotStored)
    collector.set_behaviour(201)
    await transport.send([envelope(2)])
    assert collector.connections == 1


async def test_redirect_is_not_followed(collector: Collector, make: Factory) -> None:
    """A 302 is refused as http_4xx naming the redirect, and nothing is sent to its target."""
    collector.set_behaviour(302)
    error = await failure(make(collector.url), [envelope(1)], DeliveryError)
    assert error.reason == "http_4xx"
    assert error.detail == (
        f"unexpected redirect 302 Found to {collector.base_url}/moved/api/v1/lineage"
    )
    assert [request.path for request in collector.requests] == ["/api/v1/lineage"]


async def test_slow_answer_times_out_on_time(collector: Collector, make: Factory) -> None:
    """Without a late-answer wait, an answer slower than the timeout is unconfirmed
    (`timeout`: the collector may store it) once the timeout passed, before the answer."""
    collector.set_behaviour(slow(60.0))
    transport = make(collector.url, timeout=0.3, late_answer_wait=0)
    began = time.monotonic()
    error = await failure(transport, [envelope(1)], Unconfirmed)
    took = time.monotonic() - began
    assert (error.reason, error.detail) == (
        "timeout",
        f"no complete response from 127.0.0.1:{collector.port} within 0.3s",
    )
    # Ended by its own timeout, not by the answer a minute later: the margin is for a busy
    # machine, which can only lengthen the wait, never shorten it below the timeout.
    assert 0.3 <= took < 30.0


async def test_hung_collector_times_out(collector: Collector, make: Factory) -> None:
    """A collector that never answers leaves the send unconfirmed (`timeout`, past the
    late-answer wait), and the next send works again."""
    collector.set_behaviour("hang")
    transport = make(collector.url, timeout=0.2, late_answer_wait=0.2)
    assert (await failure(transport, [envelope(1)], Unconfirmed)).reason == "timeout"
    collector.set_behaviour(201)
    await transport.send([envelope(2)])
    assert collector.events == [json.loads(run_event(2))]


async def test_refused_connection_is_connect(make: Factory) -> None:
    """Nothing listening on the port: never sent (`connect`), with the OS error text."""
    port = closed_port()
    error = await failure(make(f"http://127.0.0.1:{port}/api/v1/lineage"), [envelope(1)], NotSent)
    assert (error.reason, error.detail) == (
        "connect",
        f"cannot connect to 127.0.0.1:{port}: Connection refused",
    )


async def test_reset_is_network(collector: Collector, make: Factory) -> None:
    """A connection reset after the request was read is unconfirmed (`network`)."""
    collector.set_behaviour("reset")
    error = await failure(make(collector.url), [envelope(1)], Unconfirmed)
    assert (error.reason, error.detail) == (
        "network",
        f"connection to 127.0.0.1:{collector.port} failed mid-request: Connection reset by peer",
    )


async def test_truncated_answer_is_network(collector: Collector, make: Factory) -> None:
    """A response cut off in its body is unconfirmed (`network`)."""
    collector.set_behaviour("close_mid_response")
    error = await failure(make(collector.url), [envelope(1)], Unconfirmed)
    assert (error.reason, error.detail) == (
        "network",
        f"connection to 127.0.0.1:{collector.port} failed mid-request: peer closed connection "
        "without sending complete message body (received 11 bytes, expected 64)",
    )


async def test_https_with_ca_file_and_bearer_token(
    ca: trustme.CA, make: Factory, tmp_path: Path
) -> None:
    """Over https with the test CA as ca_file the event arrives with the bearer token."""
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with Collector(tls=server_context(ca, "127.0.0.1")) as collector:
        assert collector.url.startswith("https://")
        await make(collector.url, token=TOKEN, ca_file=str(ca_file)).send([envelope(1)])
        (request,) = collector.requests
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.body == run_event(1)


async def test_refusal_detail_never_holds_token(
    ca: trustme.CA, make: Factory, tmp_path: Path
) -> None:
    """A 401 over https names only the status: the token is nowhere in the error."""
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with Collector(401, tls=server_context(ca, "127.0.0.1")) as collector:
        transport = make(collector.url, token=TOKEN, ca_file=str(ca_file))
        error = await failure(transport, [envelope(1)], DeliveryError)
    assert str(error) == "http_4xx: HTTP 401 Unauthorized"
    assert TOKEN not in repr(error.__dict__)


async def test_untrusted_certificate_is_tls(ca: trustme.CA, make: Factory) -> None:
    """A certificate from a CA the system does not trust: never sent (`tls`)."""
    with Collector(tls=server_context(ca, "127.0.0.1")) as collector:
        error = await failure(make(collector.url), [envelope(1)], NotSent)
        assert collector.requests == []
    assert (error.reason, error.detail) == (
        "tls",
        f"certificate of 127.0.0.1:{collector.port} did not verify: "
        "unable to get local issuer certificate",
    )


async def test_wrong_host_certificate_is_tls(ca: trustme.CA, make: Factory, tmp_path: Path) -> None:
    """A trusted certificate for another host name: never sent (`tls`); hostnames are
    checked."""
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with Collector(tls=server_context(ca, "collector.example")) as collector:
        error = await failure(make(collector.url, ca_file=str(ca_file)), [envelope(1)], NotSent)
    assert (error.reason, error.detail) == (
        "tls",
        f"certificate of 127.0.0.1:{collector.port} did not verify: "
        "IP address mismatch, certificate is not valid for '127.0.0.1'.",
    )


async def test_https_url_on_plain_port_times_out_connecting(
    collector: Collector, make: Factory
) -> None:
    """An https URL on a plain-HTTP port stalls in the handshake: never sent (`connect`: no
    connection within the timeout), in time."""
    transport = make(collector.url.replace("http://", "https://"), timeout=0.5)
    began = time.monotonic()
    error = await failure(transport, [envelope(1)], NotSent)
    # The plain server waits for a request line that the TLS client never sends.
    assert (error.reason, error.detail) == (
        "connect",
        f"no connection to 127.0.0.1:{collector.port} within 0.5s",
    )
    # Without its own timeout the send would wait as long as the server holds the connection
    # (until this test ends): a wide margin tells the two apart on a busy machine.
    assert time.monotonic() - began < 15.0


async def test_batch_mode_posts_array_to_batch_endpoint(
    collector: Collector, make: Factory
) -> None:
    """With batch_size > 1 the batch goes to `<endpoint>/batch` as one JSON array."""
    batch = [envelope(i) for i in range(3)]
    await make(collector.url, batch_size=3).send(batch)
    (request,) = collector.requests
    assert request.path == "/api/v1/lineage/batch"
    assert request.body == b"[" + b",".join(e.payload for e in batch) + b"]"
    assert collector.events == [json.loads(e.payload) for e in batch]


async def test_batch_endpoint_can_be_configured(collector: Collector, make: Factory) -> None:
    """An explicit batch_endpoint is used instead of the derived one."""
    transport = make(collector.url, batch_size=10, batch_endpoint=collector.base_url + "/bulk")
    await transport.send([envelope(1)])
    assert [request.path for request in collector.requests] == ["/bulk"]
    assert collector.requests[0].body == b"[" + run_event(1) + b"]"


async def test_batch_of_many_in_single_mode_is_refused(collector: Collector, make: Factory) -> None:
    """With batch_size 1 a batch of two is a caller bug, not a delivery failure."""
    with pytest.raises(ValueError) as caught:
        await make(collector.url).send([envelope(1), envelope(2)])
    assert str(caught.value) == "batch_size is 1 but the batch holds 2 events"
    assert collector.requests == []


async def test_gzip_bodies_decode_at_collector(collector: Collector, make: Factory) -> None:
    """With compression gzip the body is gzip with Content-Encoding set, and decodes exactly."""
    batch = [envelope(i) for i in range(20)]
    await make(collector.url, compression="gzip", batch_size=20).send(batch)
    (request,) = collector.requests
    assert request.headers["content-encoding"] == "gzip"
    assert request.content == b"[" + b",".join(e.payload for e in batch) + b"]"
    assert gzip.decompress(request.body) == request.content
    assert len(request.body) < len(request.content) / 3
    assert len(collector.events) == 20


async def test_keep_alive_reuses_one_connection(collector: Collector, make: Factory) -> None:
    """Sequential sends share one keep-alive connection."""
    transport = make(collector.url)
    for i in range(25):
        await transport.send([envelope(i)])
    assert collector.connections == 1
    assert len(collector.events) == 25


async def test_expect_asked_on_a_new_connection_only(collector: Collector, make: Factory) -> None:
    """`Expect: 100-continue` goes with the first request of a connection; requests on the
    kept-alive connection the collector has just answered on skip the round trip."""
    transport = make(collector.url)
    for i in range(3):
        await transport.send([envelope(i)])
    asked = [r.headers.get("expect") for r in collector.requests]
    assert asked == ["100-continue", None, None]
    assert collector.connections == 1


async def test_expect_asked_after_idling_and_for_large_bodies(collector: Collector) -> None:
    """A connection idle for `ExpectRule.idle` seconds, or a body of `ExpectRule.body`
    bytes, asks for `100 Continue` again."""
    config = HttpConfig(endpoint=collector.url)
    idle = HttpTransport(config, token=None, expect=ExpectRule(idle=0.0, body=1 << 30))
    large = HttpTransport(config, token=None, expect=ExpectRule(idle=3600.0, body=200))
    try:
        for transport in (idle, large):
            await transport.send([envelope(0)])
            await transport.send([envelope(1)])
        small = start_envelope(b"{}", str(uuid.UUID(int=2)))
        await large.send([small])
    finally:
        await idle.aclose()
        await large.aclose()
    asked = [r.headers.get("expect") for r in collector.requests]
    assert asked == ["100-continue", "100-continue", "100-continue", "100-continue", None]


async def test_sequential_sends_arrive_in_order(collector: Collector, make: Factory) -> None:
    """Events sent one after another arrive in the order sent."""
    transport = make(collector.url, concurrency=4)
    for i in range(40):
        await transport.send([envelope(i)])
    assert [event["run"]["runId"] for event in collector.events] == [
        str(uuid.UUID(int=i)) for i in range(40)
    ]


async def test_concurrency_sends_in_parallel(collector: Collector, make: Factory) -> None:
    """`concurrency` requests are in flight at once, each on its own connection."""
    # The collector answers none until all four wait for their answer at once (503 to each
    # after 30 s otherwise): sends one after another could not succeed.
    collector.set_behaviour(together(4))
    transport = make(collector.url, concurrency=4)
    await asyncio.gather(*(transport.send([envelope(i)]) for i in range(4)))
    assert collector.connections == 4


async def test_aclose_is_idempotent_and_final(collector: Collector, make: Factory) -> None:
    """aclose twice is fine; a send after it is never sent (the pipeline keeps the batch for
    the transport that replaced it), not a crash."""
    transport = make(collector.url)
    await transport.send([envelope(1)])
    await transport.aclose()
    await transport.aclose()
    error = await failure(transport, [envelope(2)], NotSent)
    assert (error.reason, error.detail) == ("connect", "transport closed")
    assert len(collector.requests) == 1


async def test_empty_batch_sends_nothing(collector: Collector, make: Factory) -> None:
    """An empty batch is a no-op."""
    await make(collector.url).send([])
    assert collector.requests == []


def test_missing_token_variable_is_named() -> None:
    """A token variable that is not set is an error naming the variable."""
    config = HttpConfig("https://lineage.example/api/v1/lineage", auth=HttpAuth("bearer", "OL_T"))
    with pytest.raises(StartError) as caught:
        check_endpoint(config, {})
    assert str(caught.value) == (
        "lineage.http.auth.token_env: environment variable OL_T is not set"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "lineage.http.auth.token_env: environment variable OL_T is empty"),
        (
            "tok en",
            "lineage.http.auth.token_env: environment variable OL_T holds characters that are "
            "not allowed in a bearer token (only visible ASCII)",
        ),
    ],
)
def test_unusable_token_is_refused_without_value(value: str, message: str) -> None:
    """An empty or malformed token is refused; the message never shows the value."""
    config = HttpConfig("https://lineage.example/api/v1/lineage", auth=HttpAuth("bearer", "OL_T"))
    with pytest.raises(StartError) as caught:
        check_endpoint(config, {"OL_T": value})
    assert str(caught.value) == message


def test_token_is_read_and_trimmed() -> None:
    """The token comes from the named variable, without surrounding whitespace."""
    config = HttpConfig("https://lineage.example/api/v1/lineage", auth=HttpAuth("bearer", "OL_T"))
    assert check_endpoint(config, {"OL_T": f" {TOKEN}\n"}) == TOKEN
    assert check_endpoint(HttpConfig("http://lineage.example/api/v1/lineage"), {}) is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"endpoint": "http://lineage.example/api", "auth": HttpAuth("bearer", "OL_T")},
            "lineage.http.endpoint: bearer auth needs an https:// endpoint; refusing to send a "
            "token over http",
        ),
        (
            {
                "endpoint": "https://lineage.example/api",
                "batch_endpoint": "http://lineage.example/api/batch",
                "auth": HttpAuth("bearer", "OL_T"),
            },
            "lineage.http.batch_endpoint: bearer auth needs an https:// endpoint; refusing to "
            "send a token over http",
        ),
        (
            {"endpoint": "ftp://lineage.example/api"},
            "lineage.http.endpoint: expected an http:// or https:// URL with a host",
        ),
        (
            {"endpoint": "https://user:pw@lineage.example/api"},
            "lineage.http.endpoint: credentials in the URL are not supported; use "
            "lineage.http.auth",
        ),
    ],
)
def test_bad_endpoints_are_refused(fields: dict[str, Any], message: str) -> None:
    """Endpoints that would leak a token or cannot be used are refused with the key named."""
    with pytest.raises(StartError) as caught:
        check_endpoint(HttpConfig(**fields), {"OL_T": TOKEN})
    assert str(caught.value) == message


def test_constructor_refuses_token_over_http() -> None:
    """The transport itself refuses a token for an http endpoint (defence in depth)."""
    config = HttpConfig("http://lineage.example/api", auth=HttpAuth("bearer", "OL_T"))
    with pytest.raises(StartError) as caught:
        HttpTransport(config, token=TOKEN)
    assert str(caught.value) == (
        "lineage.http.endpoint: bearer auth needs an https:// endpoint; refusing to send a "
        "token over http"
    )


@pytest.mark.parametrize(("auth", "token"), [(HttpAuth("bearer", "OL_T"), None), (None, TOKEN)])
def test_constructor_needs_token_exactly_with_auth(
    auth: HttpAuth | None, token: str | None
) -> None:
    """Auth without a token, or a token without auth, is a wiring error caught at build time."""
    config = HttpConfig("https://lineage.example/api", auth=auth)
    with pytest.raises(ValueError) as caught:
        HttpTransport(config, token=token)
    assert str(caught.value) == (
        "lineage.http.auth: a token is needed exactly when auth is configured"
    )


def test_unreadable_ca_file_is_refused(tmp_path: Path) -> None:
    """A ca_file that cannot be loaded is an error naming the key and the file."""
    missing = tmp_path / "nope.pem"
    with pytest.raises(StartError) as caught:
        HttpTransport(HttpConfig("https://lineage.example/api", ca_file=str(missing)), token=None)
    assert str(caught.value) == (
        f"lineage.http.ca_file: cannot load CA bundle {missing}: "
        "[Errno 2] No such file or directory"
    )


async def test_validating_collector_records_schema_violations(make: Factory) -> None:
    """With validate=True the collector keeps every event and lists the invalid ones."""
    valid = json.dumps(example_run_event(), separators=(",", ":")).encode()
    invalid = b'{"eventType":"START"}'
    with Collector(validate=True) as collector:
        transport = make(collector.url, batch_size=2)
        await transport.send(
            [replace(envelope(1), payload=valid), replace(envelope(2), payload=invalid)]
        )
    assert len(collector.events) == 2
    assert [event for event, _ in collector.invalid] == [{"eventType": "START"}]
