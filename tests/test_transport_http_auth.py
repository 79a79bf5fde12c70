"""jwt and oauth2 auth against a real loopback token endpoint (`tests.tokens`) and the
project's collector over TLS: the header the collector sees, one fetch shared and cached,
a fresh token before expiry and after a 401, and a failing endpoint that costs no event and
shows no secret."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trustme

from agent.config.loader import parse_config
from agent.config.model import HttpAuth, HttpConfig, LineageConfig, Secret
from agent.delivery.transports.factory import build_transports
from agent.delivery.transports.http.auth import TokenEndpoint
from agent.delivery.transports.http.settings import tls_context
from agent.delivery.transports.http.transport import HttpTransport
from agent.errors import DeliveryError, NotSent
from tests.collector import Collector, per_request
from tests.test_transport_http import envelope
from tests.tokens import TokenServer

CLIENT_ID = "lineage agent/1"  # a space and a slash: form-encoded before base64 (RFC 6749)
SECRET = "c1ient-s3cret:with+odd&chars"
API_KEY = "k3y-7d1f0b9a2c4e"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def served(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def collector(ca: trustme.CA) -> Iterator[Collector]:
    with Collector(tls=served(ca)) as running:
        yield running


@pytest.fixture
def tokens(ca: trustme.CA) -> Iterator[TokenServer]:
    server = TokenServer(served(ca), clients={CLIENT_ID: SECRET}, api_keys=(API_KEY,)).start()
    yield server
    server.stop()


class Clock:
    """Seconds the test moves on by hand: a token's lifetime without waiting it out."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def oauth2(tokens: TokenServer, **fields: Any) -> HttpAuth:
    given: dict[str, Any] = {"client_id": CLIENT_ID, "client_secret": Secret(SECRET), **fields}
    return HttpAuth(type="oauth2", token_endpoint=tokens.url, **given)


@pytest.fixture
async def make(collector: Collector, ca_file: str) -> AsyncIterator[Any]:
    """Builds a transport with `auth`'s token provider on the given clock."""
    made: list[HttpTransport] = []

    def factory(auth: HttpAuth, clock: Clock | None = None) -> HttpTransport:
        config = HttpConfig(endpoint=collector.url, auth=auth, ca_file=ca_file, timeout=5.0)
        secret = (auth.client_secret or auth.api_key or Secret("")).reveal()
        provider = TokenEndpoint(
            auth, secret, tls_context(ca_file), config.timeout, clock=clock or Clock()
        )
        transport = HttpTransport(config, auth=provider)
        made.append(transport)
        return transport

    yield factory
    for transport in made:
        await transport.aclose()


async def test_oauth2_token_reaches_the_collector_fetched_once(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """Client credentials in a Basic header, the token as Bearer on every event, one fetch
    for twenty events."""
    transport = make(oauth2(tokens, scope="lineage:write"))
    for i in range(20):
        await transport.send([envelope(i)])
    assert {r.headers["authorization"] for r in collector.requests} == {"Bearer tok-1"}
    assert len(collector.requests) == 20
    ((headers, form),) = tokens.requests
    assert form == {"grant_type": "client_credentials", "scope": "lineage:write"}
    pair = base64.b64decode(headers["authorization"].removeprefix("Basic ")).decode()
    assert pair == "lineage+agent%2F1:c1ient-s3cret%3Awith%2Bodd%26chars"
    assert headers["content-type"] == "application/x-www-form-urlencoded"


async def test_concurrent_requests_share_one_fetch(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """Requests that all find no token wait on a single fetch."""
    transport = make(oauth2(tokens))
    await asyncio.gather(*(transport.send([envelope(i)]) for i in range(4)))
    assert len(tokens.requests) == 1
    assert len(collector.requests) == 4


async def test_token_is_fetched_again_before_it_expires(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """A token living 300 s with a 120 s buffer serves until 180 s, then a new one is used."""
    tokens.expires_in = 300
    clock = Clock()
    transport = make(oauth2(tokens), clock)
    await transport.send([envelope(1)])
    clock.now += 179
    await transport.send([envelope(2)])
    clock.now += 2
    await transport.send([envelope(3)])
    seen = [r.headers["authorization"] for r in collector.requests]
    assert seen == ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]


async def test_token_without_lifetime_is_fetched_per_request(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """An answer without expires_in (nor a JWT exp) is not cached, as the client does."""
    tokens.expires_in = None
    transport = make(oauth2(tokens))
    for i in range(3):
        await transport.send([envelope(i)])
    seen = [r.headers["authorization"] for r in collector.requests]
    assert seen == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-3"]


async def test_a_401_drops_the_token_once(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """The collector refusing tok-1 makes the next request fetch tok-2, which stays."""
    collector.set_behaviour(
        per_request(lambda r: 401 if r.headers["authorization"] == "Bearer tok-1" else 201)
    )
    transport = make(oauth2(tokens))
    with pytest.raises(DeliveryError):
        await transport.send([envelope(1)])
    for i in range(2, 5):
        await transport.send([envelope(i)])
    assert len(tokens.requests) == 2
    assert [r.headers["authorization"] for r in collector.requests][-1] == "Bearer tok-2"


async def test_client_secret_post_sends_the_credentials_in_the_form(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """client_secret_post: no Basic header, id and secret in the form."""
    transport = make(oauth2(tokens, client_auth_method="client_secret_post"))
    await transport.send([envelope(1)])
    ((headers, form),) = tokens.requests
    assert "authorization" not in headers
    assert (form["client_id"], form["client_secret"]) == (CLIENT_ID, SECRET)
    assert collector.requests[0].headers["authorization"] == "Bearer tok-1"


async def test_jwt_exchanges_the_api_key(
    collector: Collector, tokens: TokenServer, make: Any
) -> None:
    """jwt: the API key exchanged with the client's form, the answer's `token` field used."""
    tokens.field = "token"
    auth = HttpAuth(type="jwt", token_endpoint=tokens.url, api_key=Secret(API_KEY))
    await make(auth).send([envelope(1)])
    ((_, form),) = tokens.requests
    assert form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "response_type": "token",
        "apikey": API_KEY,
    }
    assert collector.requests[0].headers["authorization"] == "Bearer tok-1"


@pytest.mark.parametrize("broken", ["status", "wrong secret", "closed"])
async def test_failing_token_endpoint_sends_nothing_and_keeps_the_event(
    broken: str,
    collector: Collector,
    tokens: TokenServer,
    ca_file: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A token that cannot be had is NotSent (the batch stays queued, nothing reached the
    collector), the same batch leaves once the endpoint answers; no secret in any output."""
    caplog.set_level(logging.DEBUG)
    auth = oauth2(
        tokens,
        client_secret=Secret("not-" + SECRET) if broken == "wrong secret" else Secret(SECRET),
    )
    if broken == "status":
        tokens.status = 503
    if broken == "closed":
        auth = replace(auth, token_endpoint="https://127.0.0.1:1/oauth/token")
    http = HttpConfig(endpoint=collector.url, auth=auth, ca_file=ca_file, timeout=5.0)
    built = await build_transports(LineageConfig(transport=("http",), http=http))
    transport = built["http"]
    try:
        batch = [envelope(1)]
        with pytest.raises(NotSent) as caught:
            await transport.send(batch)
        assert caught.value.reason == "connect"
        assert collector.requests == []
        if broken == "closed":
            return
        tokens.status = 200
        if broken == "wrong secret":
            tokens.clients[CLIENT_ID] = "not-" + SECRET
        await transport.send(batch)
        assert collector.events == [json.loads(batch[0].payload)]
    finally:
        await transport.aclose()
    shown = str(caught.value) + caplog.text + "".join(capsys.readouterr())
    for secret in (SECRET, base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode(), "tok-1"):
        assert secret not in shown


async def test_oauth2_from_the_agents_yaml_with_the_secret_in_a_variable(
    collector: Collector,
    tokens: TokenServer,
    ca_file: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent's own keys, the client secret read from `client_secret_env`, build a
    transport whose events carry the fetched token."""
    monkeypatch.setenv("LINEAGE_CLIENT_SECRET", SECRET)
    text = f"""\
lineage:
  transport: http
  http:
    endpoint: {collector.url}
    ca_file: {ca_file}
    auth:
      type: oauth2
      token_endpoint: {tokens.url}
      client_id: {CLIENT_ID}
      client_secret_env: LINEAGE_CLIENT_SECRET
      token_refresh_buffer: 30s
"""
    config = parse_config(text, "config.yaml")
    built = await build_transports(config.lineage)
    try:
        await built["http"].send([envelope(1)])
    finally:
        await built["http"].aclose()
    assert collector.requests[0].headers["authorization"] == "Bearer tok-1"
    assert SECRET not in repr(config)
