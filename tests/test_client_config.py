"""The OpenLineage client's configuration: its variables, its openlineage.yml and its
`transport: {type: ...}` shape in the agent's file, their precedence, where each value came
from, and the errors that name the place and never the secret."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from agent.config.loader import parse_config
from agent.config.model import (
    AgentConfig,
    FileConfig,
    HttpAuth,
    HttpConfig,
    KafkaTransportConfig,
    Secret,
)
from agent.config.redact import redacted
from agent.delivery.transports.http.settings import check_endpoint
from agent.errors import ConfigError, StartError
from agent.service.preflight import check_startup
from tests.agentproc import cli

ROOT = Path(__file__).resolve().parent.parent
SECRET = "f048521b-dfe8-47cd-9c65-0cb07d57591e"


def load(text: str, env: dict[str, str], tmp_path: Path) -> AgentConfig:
    path = tmp_path / "config.yaml"
    return parse_config(textwrap.dedent(text), str(path), environ=env)


def error_of(text: str, env: dict[str, str], tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load(text, env, tmp_path)
    return str(caught.value)


def openlineage_yml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "openlineage.yml"
    path.write_text(textwrap.dedent(text))
    return str(path)


# --- the variables -----------------------------------------------------------------------------


def test_openlineage_url_alone_is_an_http_transport_to_the_lineage_api(tmp_path: Path) -> None:
    """OPENLINEAGE_URL as the client takes it: http, to `urljoin(url, 'api/v1/lineage')`."""
    config = load("lineage: {}\n", {"OPENLINEAGE_URL": "http://localhost:5000"}, tmp_path)
    assert config.lineage.transport == ("http",)
    assert config.lineage.http == HttpConfig(endpoint="http://localhost:5000/api/v1/lineage")
    assert config.origins == (
        ("lineage.transport", "OPENLINEAGE_URL"),
        ("lineage.http.endpoint", "OPENLINEAGE_URL"),
    )


def test_endpoint_and_api_key_variables(tmp_path: Path) -> None:
    """OPENLINEAGE_ENDPOINT is joined as the client joins it; OPENLINEAGE_API_KEY is the
    api_key auth, kept as a Secret that redacted() shows as ***."""
    env = {
        "OPENLINEAGE_URL": "https://lineage.example.com/base/",
        "OPENLINEAGE_ENDPOINT": "api/v1/lineage",
        "OPENLINEAGE_API_KEY": SECRET,
    }
    config = load("lineage: {}\n", env, tmp_path)
    http = config.lineage.http
    assert http is not None
    assert http.endpoint == "https://lineage.example.com/base/api/v1/lineage"
    assert http.auth == HttpAuth(type="api_key", api_key=Secret(SECRET))
    assert SECRET not in repr(config)
    auth = redacted(config)["lineage"]["http"]["auth"]
    assert (auth["type"], auth["token_env"], auth["api_key"]) == ("api_key", None, "***")
    assert check_endpoint(http, {}) == SECRET
    assert ("lineage.http.auth.api_key", "OPENLINEAGE_API_KEY") in config.origins


def test_api_key_over_plain_http_is_refused(tmp_path: Path) -> None:
    """An api key is never sent over plain http, as a bearer token is not; the error names
    the variable that gave the URL."""
    env = {"OPENLINEAGE_URL": "http://localhost:5000", "OPENLINEAGE_API_KEY": SECRET}
    message = error_of("lineage: {}\n", env, tmp_path)
    assert message == (
        "OPENLINEAGE_URL: lineage.http.endpoint: api key auth needs an https:// endpoint;"
        " refusing to send a token over http"
    )
    assert SECRET not in message


def test_double_underscore_variables_nest_and_parse_json(tmp_path: Path) -> None:
    """OPENLINEAGE__TRANSPORT__*: `__` nests, names lower-case, JSON values as JSON; a whole
    section given as JSON replaces the keys set inside it (the client's reverse order)."""
    env = {
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__URL": "https://collector.example.com:8443",
        "OPENLINEAGE__TRANSPORT__ENDPOINT": "/events/lineage",
        "OPENLINEAGE__TRANSPORT__TIMEOUT": "2.5",
        "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip",
        "OPENLINEAGE__TRANSPORT__AUTH__APIKEY": "overwritten-key",
        "OPENLINEAGE__TRANSPORT__AUTH": f'{{"type": "api_key", "apiKey": "{SECRET}"}}',
        "OPENLINEAGE__TRANSPORT__CUSTOM_HEADERS__X_ORG": "data",
        "OPENLINEAGE__FACETS__SPARK_UNKNOWN__DISABLED": "true",  # the client's, not ours
    }
    config = load("lineage: {}\n", env, tmp_path)
    assert config.lineage.http == HttpConfig(
        endpoint="https://collector.example.com:8443/events/lineage",
        timeout=2.5,
        auth=HttpAuth(type="api_key", api_key=Secret(SECRET)),
        compression="gzip",
        headers={"x_org": "data"},
    )
    origins = dict(config.origins)
    assert origins["lineage.http.timeout"] == "OPENLINEAGE__TRANSPORT__TIMEOUT"
    assert origins["lineage.http.auth.api_key"] == "OPENLINEAGE__TRANSPORT__AUTH"


def test_disabled_turns_lineage_off_whatever_else_says(tmp_path: Path) -> None:
    """OPENLINEAGE_DISABLED=true: lineage.enabled false, as the client's no-op transport."""
    env = {"OPENLINEAGE_DISABLED": "True", "OPENLINEAGE_URL": "http://localhost:5000"}
    config = load("lineage: {enabled: true}\n", env, tmp_path)
    assert config.lineage.enabled is False
    assert config.origins == (("lineage.enabled", "OPENLINEAGE_DISABLED"),)


# --- openlineage.yml ---------------------------------------------------------------------------


def test_python_client_openlineage_yml_works_as_written(tmp_path: Path) -> None:
    """The client's documented http example, read from OPENLINEAGE_CONFIG; other sections of
    the file (facets, filters) are the client's and left alone; origins are file:line."""
    path = openlineage_yml(
        tmp_path,
        f"""\
        transport:
          type: http
          url: https://backend:5000
          auth:
            type: api_key
            apiKey: {SECRET}
        facets:
          environment_variables: [USER]
        """,
    )
    config = load("lineage: {}\n", {"OPENLINEAGE_CONFIG": path}, tmp_path)
    assert config.lineage.http == HttpConfig(
        endpoint="https://backend:5000/api/v1/lineage",
        auth=HttpAuth(type="api_key", api_key=Secret(SECRET)),
    )
    assert dict(config.origins)["lineage.transport"] == f"{path}:2"
    assert dict(config.origins)["lineage.http.auth.api_key"] == f"{path}:6"


def test_listener_openlineage_yml_kafka_and_java_names(tmp_path: Path) -> None:
    """The Java client's names (topicName, properties, timeoutInMillis, location) read like
    the Python client's; kafka settings pass through as text; composite runs each member."""
    path = openlineage_yml(
        tmp_path,
        """\
        transport:
          type: composite
          continueOnFailure: true
          transports:
            collector:
              type: http
              url: https://marquez.example.com
              timeoutInMillis: 2500
              headers: {X-Tenant: payments}
            events:
              type: kafka
              topicName: openlineage.events
              messageKey: ledger
              properties:
                bootstrap.servers: "broker1:9092,broker2:9092"
                acks: 0
                enable.idempotence: false
            local:
              type: file
              location: events/lineage.jsonl
              append: true
        """,
    )
    config = load("lineage: {}\n", {"OPENLINEAGE_CONFIG": path}, tmp_path)
    lineage = config.lineage
    assert lineage.transport == ("http", "kafka", "file")
    assert lineage.http == HttpConfig(
        endpoint="https://marquez.example.com/api/v1/lineage",
        timeout=2.5,
        headers={"X-Tenant": "payments"},
    )
    assert lineage.kafka == KafkaTransportConfig(
        topic="openlineage.events",
        config={
            "bootstrap.servers": "broker1:9092,broker2:9092",
            "acks": "0",
            "enable.idempotence": "false",
        },
        message_key="ledger",
    )
    assert lineage.file == FileConfig(path=str(tmp_path / "events" / "lineage.jsonl"))


def test_composite_gets_openlineage_url_as_default_http(tmp_path: Path) -> None:
    """With a composite transport of named members, OPENLINEAGE_URL adds `default_http`."""
    env = {
        "OPENLINEAGE__TRANSPORT__TYPE": "composite",
        "OPENLINEAGE__TRANSPORT__TRANSPORTS__OUT__TYPE": "console",
        "OPENLINEAGE_URL": "http://localhost:5000",
    }
    config = load("lineage: {}\n", env, tmp_path)
    assert config.lineage.transport == ("console", "http")
    assert config.lineage.http == HttpConfig(endpoint="http://localhost:5000/api/v1/lineage")


# --- precedence --------------------------------------------------------------------------------


def test_precedence_agent_file_over_openlineage_yml_over_variables(tmp_path: Path) -> None:
    """Key by key: the agent's mapping beats openlineage.yml, which beats OPENLINEAGE__
    variables; OPENLINEAGE_URL is unused once a type is named."""
    path = openlineage_yml(
        tmp_path,
        """\
        transport:
          type: http
          url: https://from-yml.example.com
          timeout: 4
        """,
    )
    env = {
        "OPENLINEAGE_CONFIG": path,
        "OPENLINEAGE__TRANSPORT__TYPE": "console",
        "OPENLINEAGE__TRANSPORT__TIMEOUT": "7",
        "OPENLINEAGE__TRANSPORT__COMPRESSION": "gzip",
        "OPENLINEAGE_URL": "http://from-url:5000",
    }
    text = """\
        lineage:
          transport:
            endpoint: /v2/lineage
        """
    config = load(text, env, tmp_path)
    assert config.lineage.transport == ("http",)
    assert config.lineage.http == HttpConfig(
        endpoint="https://from-yml.example.com/v2/lineage", timeout=4.0, compression="gzip"
    )
    origins = dict(config.origins)
    assert origins["lineage.transport"] == f"{path}:2"
    assert origins["lineage.http.endpoint"] == f"{path}:3 + {tmp_path / 'config.yaml'}:3"
    assert origins["lineage.http.timeout"] == f"{path}:4"
    assert origins["lineage.http.compression"] == "OPENLINEAGE__TRANSPORT__COMPRESSION"


def test_seed_transport_decides_alone(tmp_path: Path) -> None:
    """`lineage.transport: file` (the seed's shape) is not overridden by the client's
    sources, and the origins say which of them were set and not read."""
    env = {"OPENLINEAGE_URL": "http://localhost:5000", "OPENLINEAGE__TRANSPORT__TYPE": "console"}
    config = load("lineage: {transport: file}\n", env, tmp_path)
    assert config.lineage.transport == ("file",)
    assert config.origins == (
        (
            "lineage.transport",
            f"{tmp_path / 'config.yaml'}:1 (OPENLINEAGE_URL, OPENLINEAGE__TRANSPORT__TYPE"
            " not read)",
        ),
    )
    assert load("lineage: {transport: file}\n", {}, tmp_path).origins == ()


def test_seed_base_endpoint_is_completed(tmp_path: Path) -> None:
    """A seed endpoint with no path (`http://localhost:5000`) posts to /api/v1/lineage, not /."""
    text = """\
        lineage:
          transport: http
          http: {endpoint: 'http://localhost:5000'}
        """
    config = load(text, {}, tmp_path)
    assert config.lineage.http is not None
    assert config.lineage.http.endpoint == "http://localhost:5000/api/v1/lineage"
    assert config.origins == (
        ("lineage.http.endpoint", f"{tmp_path / 'config.yaml'}:3 (completed with /api/v1/lineage)"),
    )


# --- errors ------------------------------------------------------------------------------------

ERRORS = [
    pytest.param(
        """\
        lineage:
          transport:
            type: http
            url: http://marquez:5000/api/v1/lineage
        """,
        {},
        "{cfg}:4: lineage.transport.url: already ends in /api/v1/lineage, and the client joins"
        " endpoint (api/v1/lineage by default) to it: write the collector's base URL"
        " (http://host:5000) or set endpoint",
        id="url-with-lineage-path",
    ),
    pytest.param(
        "lineage: {}\n",
        {"OPENLINEAGE__TRANSPORT__TYPE": "htp"},
        "OPENLINEAGE__TRANSPORT__TYPE: transport.type: expected one of 'http', 'async_http',"
        " 'kafka', 'console', 'file', 'composite', got 'htp'",
        id="bad-type-from-env",
    ),
    pytest.param(
        """\
        lineage:
          transport:
            type: http
            url: https://marquez:5000
            verify: false
        """,
        {},
        "{cfg}:5: lineage.transport.verify: TLS verification stays on; trust a private CA"
        " with ca_file instead",
        id="verify-false",
    ),
    pytest.param(
        """\
        lineage:
          transport:
            type: http
            url: https://marquez:5000
            urlParams: {a: b}
        """,
        {},
        "{cfg}:5: lineage.transport.urlParams.a: unknown key for a http transport (expected"
        " one of 'url', 'endpoint', 'timeout', 'timeoutinmillis', 'auth', 'headers',"
        " 'custom_headers', 'compression', 'verify', 'cert', 'key', 'ca_file', 'batch_size',"
        " 'batch_endpoint', 'concurrency', 'retry', 'late_answer_wait',"
        " 'max_concurrent_requests', 'max_queue_size')",
        id="unknown-http-key",
    ),
    pytest.param(
        """\
        lineage:
          transport:
            type: http
            url: https://marquez:5000
            retry: {total: 5, backof_factor: 2}
        """,
        {},
        "{cfg}:5: lineage.transport.retry.backof_factor: unknown key in retry (expected one of"
        " 'total', 'connect', 'read', 'status', 'backoff_factor', 'backoff_max',"
        " 'status_forcelist', 'allowed_methods', 'respect_retry_after_header',"
        " 'backoff_jitter')",
        id="http-retry-unknown-key",
    ),
    pytest.param(
        """\
        lineage:
          transport:
            type: http
            url: https://marquez:5000
            retry:
              total: many
        """,
        {},
        "{cfg}:6: lineage.transport.retry.total: expected an integer from 0 to 100, got 'many'",
        id="http-retry-bad-total",
    ),
    pytest.param(
        """\
        lineage:
          transport: {type: file, log_file_path: /tmp/x.jsonl, append: false}
        """,
        {},
        "{cfg}:2: lineage.transport.append: only true: the agent appends to one JSON-lines"
        " file and rotates it at rotation_size_mb, never one file per event",
        id="file-append-false",
    ),
    pytest.param(
        """\
        lineage:
          transport:
            type: composite
            transports:
              - {type: console}
              - {type: console}
        """,
        {},
        "{cfg}:6: lineage.transport.transports[1].type: a second 'console' transport; the agent"
        " runs one of each",
        id="composite-twice",
    ),
    pytest.param(
        """\
        lineage:
          transport: {type: http}
        """,
        {},
        "{cfg}:2: lineage.transport.url: required key is missing",
        id="http-without-url",
    ),
    pytest.param(
        """\
        lineage:
          transport: {timeout: 3}
        """,
        {"OPENLINEAGE_URL": "http://localhost:5000"},
        "{cfg}:2: lineage.transport.type: required key is missing",
        id="no-type",
    ),
    pytest.param(
        """\
        lineage:
          transport: {type: http, url: 'https://m:5000'}
          http: {endpoint: 'https://m:5000/api/v1/lineage'}
        """,
        {},
        "{cfg}:3: lineage.http: not read when lineage.transport is the client's {{type: ...}}"
        " mapping; write its keys inside lineage.transport",
        id="seed-section-beside-mapping",
    ),
    pytest.param(
        "lineage: {}\n",
        {"OPENLINEAGE_URL": "localhost:5000"},
        "OPENLINEAGE_URL: expected an absolute http:// or https:// URL",
        id="url-without-scheme",
    ),
    pytest.param(
        "lineage: {}\n",
        {
            "OPENLINEAGE__TRANSPORT__TYPE": "http",
            "OPENLINEAGE__TRANSPORT__URL": "https://m",
            "OPENLINEAGE__TRANSPORT__CERT": "client.pem",
        },
        "OPENLINEAGE__TRANSPORT__CERT: transport.cert: expected an absolute path (an"
        " environment variable has no folder)",
        id="relative-cert-from-env",
    ),
]


@pytest.mark.parametrize(("text", "env", "message"), ERRORS)
def test_errors_name_the_place_and_key(
    text: str, env: dict[str, str], message: str, tmp_path: Path
) -> None:
    """Each bad client setting fails with one exact message naming file:line or variable."""
    assert error_of(text, env, tmp_path) == message.format(cfg=tmp_path / "config.yaml")


def test_errors_never_show_the_key(tmp_path: Path) -> None:
    """A malformed api key is refused by its place, its text never shown."""
    env = {"OPENLINEAGE_URL": "https://m:5000", "OPENLINEAGE_API_KEY": "bad key\twith spaces"}
    message = error_of("lineage: {}\n", env, tmp_path)
    assert message == ("OPENLINEAGE_API_KEY: holds characters a token may not have (visible ASCII)")


# --- headers, mTLS, proxies --------------------------------------------------------------------


def test_header_values_are_hidden_and_bad_headers_refused(tmp_path: Path) -> None:
    """Header values never show in redacted(); framing headers and a second Authorization
    are refused by name."""
    text = """\
        lineage:
          transport: http
          http:
            endpoint: https://m.example.com/api/v1/lineage
            headers: {X-Api-Key: secret-header-value, X-Tenant: payments}
        """
    config = load(text, {}, tmp_path)
    assert redacted(config)["lineage"]["http"]["headers"] == {
        "X-Api-Key": "***",
        "X-Tenant": "***",
    }
    http = config.lineage.http
    assert http is not None
    check_endpoint(http, {})
    for name, message in [
        ("Content-Length", "the transport sets this header itself"),
        ("Bad Name", "not a valid header name"),
    ]:
        bad = HttpConfig(endpoint=http.endpoint, headers={name: "1"})
        with pytest.raises(StartError, match=f"^lineage.http.headers.{name}: {message}$"):
            check_endpoint(bad, {})


@pytest.mark.parametrize("name", ["Authorization", "proxy-authorization"])
def test_credential_header_over_http_is_refused(tmp_path: Path, name: str) -> None:
    """A custom Authorization header to an http:// endpoint is refused like a bearer token,
    at the header's line, without its value."""
    text = f"""\
        lineage:
          transport: http
          http:
            endpoint: http://m.example.com/api/v1/lineage
            headers:
              X-Tenant: payments
              {name}: Basic c2VjcmV0LXZhbHVl
        """
    message = error_of(text, {}, tmp_path)
    assert message.startswith(f"{tmp_path / 'config.yaml'}:")
    assert message.endswith(
        f"lineage.http.headers.{name}: a credential header needs https:// endpoints;"
        " refusing to send it over http"
    )
    assert "c2VjcmV0" not in message
    built = HttpConfig(endpoint="http://m.example.com/x", headers={name: "Basic c2VjcmV0"})
    with pytest.raises(StartError, match=f"^lineage.http.headers.{name}: a credential header"):
        check_endpoint(built, {})


def test_cert_without_key_is_refused(tmp_path: Path) -> None:
    """A client certificate needs its key: the error names where cert was written."""
    text = """\
        lineage:
          transport: http
          http:
            endpoint: https://m.example.com/api/v1/lineage
            cert: client.pem
        """
    assert error_of(text, {}, tmp_path) == (
        f"{tmp_path / 'config.yaml'}:5: lineage.http.cert: a client certificate needs both"
        " cert and key; lineage.http.key is missing"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"HTTPS_PROXY": "https://user:pw-1234@proxy:3128"},
            "HTTPS_PROXY: only an http:// proxy can carry the events (this one is https://);"
            " exempt the collector with NO_PROXY or point the variable at an http:// proxy",
        ),
        (
            {"ALL_PROXY": "socks5://proxy:1080"},
            "ALL_PROXY: only an http:// proxy can carry the events (this one is socks5://);"
            " exempt the collector with NO_PROXY or point the variable at an http:// proxy",
        ),
        ({"ALL_PROXY": "socks5://proxy:1080", "NO_PROXY": ".example.com"}, None),
        ({"HTTP_PROXY": "socks5://proxy:1080"}, None),  # an https collector: not its variable
        ({"https_proxy": "http://user:pw-1234@proxy:3128"}, None),  # usable: honoured
    ],
)
def test_unusable_proxy_variables_are_refused(env: dict[str, str], message: str | None) -> None:
    """A proxy variable naming a proxy the agent cannot use is refused at config check,
    naming the variable, never its value; NO_PROXY exempts."""
    http = HttpConfig(endpoint="https://lineage.example.com/api/v1/lineage")
    if message is None:
        check_endpoint(http, env)
        return
    with pytest.raises(StartError) as caught:
        check_endpoint(http, env)
    assert str(caught.value) == message


def test_config_check_refuses_an_unusable_proxy(tmp_path: Path) -> None:
    """`config check` (the preflight `run` shares) refuses a socks proxy for the collector."""
    text = """\
        lineage:
          transport: {type: http, url: 'https://lineage.example.com'}
        """
    config = load(text, {}, tmp_path)
    checked = check_startup(config, service=False, environ={"ALL_PROXY": "socks5://p:1080"})
    assert [e for e in checked.errors if e.startswith("ALL_PROXY: only an http:// proxy")]


def test_loopback_collector_ignores_proxy_variables() -> None:
    """A collector on loopback is never behind a proxy: the variables do not matter."""
    http = HttpConfig(endpoint="http://127.0.0.1:5000/api/v1/lineage")
    check_endpoint(http, {"HTTP_PROXY": "socks5://proxy:1080"})


# --- config check ------------------------------------------------------------------------------


def test_config_check_says_where_each_value_came_from(tmp_path: Path) -> None:
    """`config check` prints each client setting's origin and, one line each, where the agent
    deliberately differs from the client; never the api key."""
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            lineage: {{namespace: spark}}
            signing: {{key_path: {tmp_path / "ed25519.key"}}}
            state_dir: {tmp_path / "state"}
            """
        )
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")},
        "OPENLINEAGE_URL": "https://lineage.example.com",
        "OPENLINEAGE_API_KEY": SECRET,
    }
    result = cli("config", "check", str(config), env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "ok",
        "from: lineage.transport: OPENLINEAGE_URL",
        "from: lineage.http.endpoint: OPENLINEAGE_URL",
        "from: lineage.http.auth.type: OPENLINEAGE_API_KEY",
        "from: lineage.http.auth.api_key: OPENLINEAGE_API_KEY",
    ]
    differs = [line.split(":")[1].strip() for line in lines if line.startswith("differs: ")]
    assert differs == ["lineage.queue_size", "signing.key_path"]  # one line each, by setting
    assert SECRET not in result.stdout + result.stderr


def test_preflight_with_kafka_missing_says_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kafka transport on a build without its module: a clear refusal at config check."""
    from agent.delivery.transports import factory

    monkeypatch.setattr(factory, "KAFKA_MODULE", "agent.delivery.transports.no_such_kafka")
    monkeypatch.setattr("agent.service.preflight.kafka_available", factory.kafka_available)
    text = """\
        lineage:
          transport: {type: kafka, topic: t, config: {bootstrap.servers: "127.0.0.1:9"}}
        """
    config = load(text, {}, tmp_path)
    checked = check_startup(config, service=False, environ={})
    assert [
        e for e in checked.errors if e.startswith("lineage.kafka: kafka transport not available")
    ]
