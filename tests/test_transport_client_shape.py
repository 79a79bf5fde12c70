"""Transports in the OpenLineage client's shape: custom headers and an mTLS client
certificate on a real loopback collector, the console transport, the hand-over of a kafka
transport's settings, and whole agents configured only the client's way."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import signal
import ssl
from pathlib import Path

import pytest
import trustme
import yaml

from agent.config.model import HttpConfig, KafkaTransportConfig, LineageConfig
from agent.delivery.transports import factory
from agent.delivery.transports.console import ConsoleTransport
from agent.delivery.transports.http.transport import HttpTransport
from agent.errors import DeliveryError, NotSent, StartError, TransportFailure, Unconfirmed
from agent.telemetry import logs
from tests.agentproc import assert_identity, keygen, metric, run_agent, write_config
from tests.collector import Collector, closed_port
from tests.independent import public_key, verify
from tests.test_transport_http import envelope, run_event, server_context
from tests.tinyproxy import TinyProxy

#: A name nothing resolves: an event sent to it arrives only through the proxy.
UNRESOLVABLE = "collector.invalid"
PROXY_AUTH = "Basic " + base64.b64encode(b"agent:pw-5678").decode()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


async def test_custom_headers_reach_the_collector() -> None:
    """Each configured header goes with every POST, beside the transport's own."""
    with Collector() as collector:
        config = HttpConfig(
            endpoint=collector.url, headers={"X-Tenant": "payments", "X-Api-Key": "hdr-secret"}
        )
        transport = HttpTransport(config, token=None)
        try:
            await transport.send([envelope(1)])
        finally:
            await transport.aclose()
        (request,) = collector.requests
    assert request.headers["x-tenant"] == "payments"
    assert request.headers["x-api-key"] == "hdr-secret"
    assert request.headers["content-type"] == "application/json"


def mtls_server(ca: trustme.CA) -> ssl.SSLContext:
    """A server that asks every client for a certificate signed by `ca`."""
    context = server_context(ca, "127.0.0.1")
    context.verify_mode = ssl.CERT_REQUIRED
    ca.configure_trust(context)
    return context


async def test_mtls_client_certificate_is_presented(ca: trustme.CA, tmp_path: Path) -> None:
    """With cert and key the agent passes a collector that requires a client certificate;
    without them the same collector gets no event."""
    ca_file, cert, key = tmp_path / "ca.pem", tmp_path / "client.pem", tmp_path / "client.key"
    ca.cert_pem.write_to_path(str(ca_file))
    client = ca.issue_cert("lineage-agent@example.com")
    client.cert_chain_pems[0].write_to_path(str(cert))
    client.private_key_pem.write_to_path(str(key))
    with Collector(tls=mtls_server(ca)) as collector:
        with_cert = HttpTransport(
            HttpConfig(endpoint=collector.url, ca_file=str(ca_file), cert=str(cert), key=str(key)),
            token=None,
        )
        without = HttpTransport(
            HttpConfig(endpoint=collector.url, ca_file=str(ca_file), timeout=2.0), token=None
        )
        try:
            await with_cert.send([envelope(1)])
            assert [r.body for r in collector.requests] == [run_event(1)]
            with pytest.raises(TransportFailure):
                await without.send([envelope(2)])
        finally:
            await with_cert.aclose()
            await without.aclose()
        assert len(collector.events) == 1


def test_unreadable_client_key_is_a_start_error(ca: trustme.CA, tmp_path: Path) -> None:
    """A key that does not match the certificate refuses the start, naming both files."""
    cert, key = tmp_path / "client.pem", tmp_path / "other.key"
    ca.issue_cert("a@example.com").cert_chain_pems[0].write_to_path(str(cert))
    ca.issue_cert("b@example.com").private_key_pem.write_to_path(str(key))
    config = HttpConfig(endpoint="https://127.0.0.1:1/x", cert=str(cert), key=str(key))
    with pytest.raises(StartError) as caught:
        HttpTransport(config, token=None)
    assert str(caught.value).startswith(
        f"lineage.http.cert: cannot load client certificate {cert} with key {key}:"
    )
    assert "PRIVATE KEY" not in str(caught.value)


async def test_only_credential_header_values_are_log_secrets() -> None:
    """Values of headers named like credentials are scrubbed from log lines; a plain one
    (X-Env) stays readable everywhere else."""
    config = HttpConfig(
        endpoint="https://m.example.com/api/v1/lineage",
        headers={"X-Env": "production-eu", "X-Api-Key": "hdr-k3y-value", "Cookie": "sid=c00kie"},
    )
    built = await factory.build_transports(LineageConfig(transport=("http",), http=config))
    await built["http"].aclose()
    line = {"event": "production-eu hdr-k3y-value sid=c00kie"}
    assert logs.scrub_secrets(None, "info", line)["event"] == (
        f"production-eu {logs.REDACTED} {logs.REDACTED}"
    )


async def test_https_collector_through_a_connect_proxy(ca: trustme.CA, tmp_path: Path) -> None:
    """HTTPS_PROXY with credentials: the event goes through a CONNECT tunnel (TLS verified
    end to end with the collector's name), to a name only the proxy reaches."""
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with (
        Collector(tls=server_context(ca, UNRESOLVABLE)) as collector,
        TinyProxy(require=PROXY_AUTH) as proxy,
    ):
        url = f"https://{UNRESOLVABLE}:{collector.port}/api/v1/lineage"
        env = {"HTTPS_PROXY": proxy.url.replace("http://", "http://agent:pw-5678@")}
        transport = HttpTransport(
            HttpConfig(endpoint=url, ca_file=str(ca_file)), token=None, environ=env
        )
        try:
            await transport.send([envelope(1)])
            await transport.send([envelope(2)])  # the kept-alive tunnel
        finally:
            await transport.aclose()
        assert [r.body for r in collector.requests] == [run_event(1), run_event(2)]
        assert proxy.connects == [f"{UNRESOLVABLE}:{collector.port}"]
        assert "proxy-authorization" not in collector.requests[0].headers


async def send_one(url: str, environ: dict[str, str]) -> None:
    """One event to `url` through a transport with that proxy environment."""
    transport = HttpTransport(HttpConfig(endpoint=url), token=None, environ=environ)
    try:
        await transport.send([envelope(1)])
    finally:
        await transport.aclose()


async def test_http_collector_through_a_forward_proxy() -> None:
    """HTTP_PROXY: the request goes to the proxy in absolute form; the collector gets it
    without the proxy's credentials."""
    with Collector() as collector, TinyProxy(require=PROXY_AUTH) as proxy:
        url = f"http://{UNRESOLVABLE}:{collector.port}/api/v1/lineage"
        await send_one(url, {"http_proxy": proxy.url.replace("http://", "http://agent:pw-5678@")})
        (request,) = collector.requests
        assert (request.path, request.body) == ("/api/v1/lineage", run_event(1))
        assert "proxy-authorization" not in request.headers
        assert proxy.forwards == [url]


async def test_percent_encoded_proxy_password_is_decoded_once() -> None:
    """A proxy password written percent-encoded in the URL (`%2541` for `%41`) reaches the
    proxy decoded exactly once."""
    expected = "Basic " + base64.b64encode(b"agent:pw%41").decode()
    with Collector() as collector, TinyProxy(require=expected) as proxy:
        url = f"http://{UNRESOLVABLE}:{collector.port}/api/v1/lineage"
        await send_one(url, {"http_proxy": proxy.url.replace("http://", "http://agent:pw%2541@")})
        assert [r.body for r in collector.requests] == [run_event(1)]


async def test_proxy_refusing_or_absent_is_not_sent(ca: trustme.CA, tmp_path: Path) -> None:
    """A proxy that answers 407 to the tunnel, or is not there, leaves the event queued
    (`NotSent` connect): no byte of it left. NO_PROXY sends directly (here: to a name that
    does not resolve, so `connect` too, and the proxy never asked)."""
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with (
        Collector(tls=server_context(ca, UNRESOLVABLE)) as collector,
        TinyProxy(require=PROXY_AUTH) as proxy,
    ):
        url = f"https://{UNRESOLVABLE}:{collector.port}/api/v1/lineage"
        cases = [
            ({"HTTPS_PROXY": proxy.url}, "did not open a tunnel"),
            ({"HTTPS_PROXY": f"http://127.0.0.1:{closed_port()}"}, "cannot connect to proxy"),
            ({"HTTPS_PROXY": proxy.url, "NO_PROXY": ".invalid"}, f"{UNRESOLVABLE}"),
        ]
        for env, words in cases:
            transport = HttpTransport(
                HttpConfig(endpoint=url, ca_file=str(ca_file), timeout=3.0),
                token=None,
                environ=env,
            )
            try:
                with pytest.raises(NotSent) as caught:
                    await transport.send([envelope(1)])
            finally:
                await transport.aclose()
            assert caught.value.reason == "connect"
            assert words in str(caught.value)
            assert "pw-5678" not in str(caught.value)
        assert collector.requests == []
        assert len(proxy.connects) == 0


async def test_console_writes_one_signed_event_per_line() -> None:
    """The console transport writes each payload as one line, as the file transport does;
    a closed reader makes the batch a `write_error` drop."""
    read_end, write_end = os.pipe()
    transport = ConsoleTransport(write_end)
    try:
        await transport.send([envelope(1), envelope(2)])
        data = os.read(read_end, 65536)
        assert data == run_event(1) + b"\n" + run_event(2) + b"\n"
        os.close(read_end)
        with pytest.raises(DeliveryError) as caught:
            await transport.send([envelope(3)])
        assert caught.value.reason == "write_error"
    finally:
        await transport.aclose()
        os.close(write_end)


async def test_console_batch_cut_short_is_unconfirmed() -> None:
    """A write that fails after part of the batch left is `Unconfirmed` (lines may have been
    read); one that fails before any byte left is a `write_error` drop. A non-blocking pipe
    of one page stops the write where it is full."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(write_end, False)
    transport = ConsoleTransport(write_end)
    batch = [envelope(i) for i in range(40)]
    assert sum(len(e.payload) + 1 for e in batch) > 4096
    try:
        with pytest.raises(Unconfirmed) as cut:
            await transport.send(batch)
        assert cut.value.reason == "network"
        with pytest.raises(DeliveryError) as refused:
            await transport.send(batch)  # the pipe is full: nothing of this one leaves
        assert refused.value.reason == "write_error"
        assert len(os.read(read_end, 65536)) == 4096
    finally:
        await transport.aclose()
        os.close(read_end)
        os.close(write_end)


async def test_factory_builds_kafka_beside_console_and_names_a_missing_kafka_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kafka and console built side by side from the client's shape; a build without the
    kafka module is refused by name, at start."""
    settings = KafkaTransportConfig(topic="ol", config={"bootstrap.servers": "127.0.0.1:9"})
    lineage = LineageConfig(transport=("kafka", "console"), kafka=settings)
    built = await factory.build_transports(lineage)
    try:
        assert sorted(built) == ["console", "kafka"]
    finally:
        for transport in built.values():
            await transport.aclose()
    monkeypatch.setattr(factory, "KAFKA_MODULE", "agent.delivery.transports.no_such_kafka")
    with pytest.raises(StartError, match=r"^lineage\.kafka: kafka transport not available"):
        await factory.build_transports(lineage)


def test_kafka_available_needs_the_client_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without confluent_kafka the kafka transport is not available, though the agent's own
    module is always found."""
    assert factory.kafka_available()
    monkeypatch.setattr(factory, "KAFKA_CLIENT", "no_such_confluent_kafka")
    assert not factory.kafka_available()


# --- whole agents ------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    keygen(tmp_path)
    return tmp_path


def test_agent_with_only_openlineage_url_delivers_to_the_lineage_api(workdir: Path) -> None:
    """An agent whose only lineage setting is OPENLINEAGE_URL (a base URL, as written for
    Marquez) posts every event to that collector's /api/v1/lineage; events verify."""
    with Collector(validate=True) as collector:
        config = write_config(workdir, {"namespace": "spark"})
        env = {"OPENLINEAGE_URL": collector.base_url}
        with run_agent(config, events=10, env=env) as agent:
            events = collector.wait_for(10, timeout=30)
            samples = agent.scrape()
            assert metric(samples, "lineage_events_delivered_total", transport="http") == 10
            assert_identity(samples, "http")
            assert agent.stop() == 0
        assert {r.path for r in collector.requests} == {"/api/v1/lineage"}
    assert collector.invalid == []
    key = public_key(workdir / "ed25519.key")
    for event in events:
        verify(event, key)


def test_agent_with_a_listener_users_openlineage_yml(workdir: Path) -> None:
    """A listener user's openlineage.yml (composite of http with headers and console, Java
    names) works as written: the collector gets every event with the header, and stdout
    carries the same signed events, one per line."""
    with Collector(validate=True) as collector:
        ol_yml = workdir / "openlineage.yml"
        ol_yml.write_text(
            yaml.safe_dump(
                {
                    "transport": {
                        "type": "composite",
                        "continueOnFailure": True,
                        "transports": [
                            {
                                "type": "http",
                                "url": collector.base_url,
                                "timeoutInMillis": 5000,
                                "headers": {"X-Tenant": "payments"},
                            },
                            {"type": "console"},
                        ],
                    }
                }
            )
        )
        config = write_config(workdir, {"namespace": "spark"})
        env = {"OPENLINEAGE_CONFIG": str(ol_yml)}
        with run_agent(config, events=6, env=env) as agent:
            events = collector.wait_for(6, timeout=30)
            samples = agent.scrape()
            assert metric(samples, "lineage_events_delivered_total", transport="http") == 6
            assert metric(samples, "lineage_events_delivered_total", transport="console") == 6
            assert_identity(samples, "console")
            assert agent.stop() == 0
            printed = [line for line in agent.logs() if "eventType" in line]
        assert {r.headers["x-tenant"] for r in collector.requests} == {"payments"}
    key = public_key(workdir / "ed25519.key")
    assert sorted(json.dumps(e, sort_keys=True) for e in printed) == sorted(
        json.dumps(e, sort_keys=True) for e in events
    )
    for event in printed:
        verify(event, key)


def test_api_key_and_headers_from_the_environment_never_logged(
    workdir: Path, ca: trustme.CA
) -> None:
    """The client's shape in the agent's file, its api key and a header from
    OPENLINEAGE__TRANSPORT__* variables: sent as written, in no log line, also at debug and
    across a reload."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    ca_file = workdir / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    key, header = "ol-api-key-5e3cr3t-9876", "hdr-value-5e3cr3t-5432"
    with Collector(tls=server, validate=True) as collector:
        lineage = {
            "transport": {"type": "http", "url": collector.base_url, "ca_file": str(ca_file)}
        }
        config = write_config(workdir, lineage, logging={"level": "debug", "format": "json"})
        env = {
            "OPENLINEAGE__TRANSPORT__AUTH": json.dumps({"type": "api_key", "apiKey": key}),
            "OPENLINEAGE__TRANSPORT__HEADERS__X_API_TOKEN": header,
        }
        with run_agent(config, events=4, env=env) as agent:
            collector.wait_for(4, timeout=30)
            agent.signal(signal.SIGHUP)
            agent.wait_log("reload_ok")
            assert agent.stop() == 0
            output = agent.raw_output()
    assert {r.headers["authorization"] for r in collector.requests} == {f"Bearer {key}"}
    assert {r.headers["x_api_token"] for r in collector.requests} == {header}
    assert key not in output
    assert header not in output
