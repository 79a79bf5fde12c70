"""The OpenLineage client's resolution, point for point: openlineage.yml found where the client
looks for it, a whole transport as JSON, OPENLINEAGE_URL beside a composite or another type,
and an agent file whose lineage section comes from the client's settings alone."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from agent.config.loader import parse_config
from agent.config.model import AgentConfig, EventFilter, HttpAuth, HttpConfig, Secret
from agent.errors import ConfigError
from tests.agentproc import cli

ROOT = Path(__file__).resolve().parent.parent


def load(text: str, env: dict[str, str], tmp_path: Path) -> AgentConfig:
    return parse_config(textwrap.dedent(text), str(tmp_path / "config.yaml"), environ=env)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def http_yml(url: str) -> str:
    return f"transport:\n  type: http\n  url: {url}\n"


def test_url_beside_composite_variables_is_a_default_http_member(tmp_path: Path) -> None:
    """OPENLINEAGE_URL with a composite of variables: the client adds the URL's http member."""
    env = {
        "OPENLINEAGE_URL": "http://localhost:5000",
        "OPENLINEAGE__TRANSPORT__TYPE": "composite",
        "OPENLINEAGE__TRANSPORT__TRANSPORTS__LOCAL__TYPE": "file",
        "OPENLINEAGE__TRANSPORT__TRANSPORTS__LOCAL__LOG_FILE_PATH": str(tmp_path / "ev.jsonl"),
        "HOME": str(tmp_path),
    }
    config = load("lineage: {}\n", env, tmp_path)
    assert config.lineage.transport == ("file", "http")  # the client's member order
    assert config.lineage.http == HttpConfig(endpoint="http://localhost:5000/api/v1/lineage")


def test_url_beside_a_composite_in_openlineage_yml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The composite may come from ./openlineage.yml; the URL member is merged into it."""
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "openlineage.yml",
        """\
        transport:
          type: composite
          transports:
            out: {type: console}
        """,
    )
    env = {"OPENLINEAGE_URL": "http://localhost:5000", "HOME": str(tmp_path / "home")}
    config = load("lineage: {}\n", env, tmp_path)
    assert set(config.lineage.transport) == {"console", "http"}


def test_url_beside_another_type_is_not_read(tmp_path: Path) -> None:
    """With a named non-composite type the client never reads OPENLINEAGE_URL."""
    env = {
        "OPENLINEAGE_URL": "http://localhost:5000",
        "OPENLINEAGE__TRANSPORT__TYPE": "console",
        "HOME": str(tmp_path),
    }
    assert load("lineage: {}\n", env, tmp_path).lineage.transport == ("console",)


def test_whole_transport_as_json_wins_over_its_keys(tmp_path: Path) -> None:
    """OPENLINEAGE__TRANSPORT as JSON replaces OPENLINEAGE__TRANSPORT__* (read after them)."""
    env = {
        "OPENLINEAGE__TRANSPORT": '{"type": "http", "url": "http://json:5000", "endpoint": "x"}',
        "OPENLINEAGE__TRANSPORT__TYPE": "console",
        "HOME": str(tmp_path),
    }
    config = load("lineage: {}\n", env, tmp_path)
    assert config.lineage.transport == ("http",)
    assert config.lineage.http == HttpConfig(endpoint="http://json:5000/x")
    assert dict(config.origins)["lineage.transport"] == "OPENLINEAGE__TRANSPORT"


def test_whole_transport_not_an_object_is_refused(tmp_path: Path) -> None:
    """A JSON value that is no object cannot be a transport: refused naming the variable."""
    with pytest.raises(ConfigError, match=r"^OPENLINEAGE__TRANSPORT: expected a JSON object"):
        load("lineage: {}\n", {"OPENLINEAGE__TRANSPORT": "[1]", "HOME": str(tmp_path)}, tmp_path)


@pytest.mark.parametrize("where", ["config", "cwd", "home"])
def test_openlineage_yml_is_searched_where_the_client_searches(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENLINEAGE_CONFIG, then ./openlineage.yml, then ~/.openlineage/openlineage.yml."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    env = {"HOME": str(home)}
    write(home / ".openlineage" / "openlineage.yml", http_yml("http://home:1"))
    if where in ("config", "cwd"):
        write(cwd / "openlineage.yml", http_yml("http://cwd:1"))
    if where == "config":
        env["OPENLINEAGE_CONFIG"] = str(write(tmp_path / "named.yml", http_yml("http://named:1")))
    http = load("lineage: {}\n", env, tmp_path).lineage.http
    assert http is not None
    assert (
        http.endpoint
        == {
            "config": "http://named:1/api/v1/lineage",
            "cwd": "http://cwd:1/api/v1/lineage",
            "home": "http://home:1/api/v1/lineage",
        }[where]
    )


def test_missing_config_file_falls_through_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OPENLINEAGE_CONFIG naming no file is passed over, as by the client."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "openlineage.yml", http_yml("http://cwd:1"))
    env = {"OPENLINEAGE_CONFIG": str(tmp_path / "absent.yml"), "HOME": str(tmp_path)}
    http = load("lineage: {}\n", env, tmp_path).lineage.http
    assert http is not None and http.endpoint == "http://cwd:1/api/v1/lineage"


def test_file_without_lineage_section_takes_the_url(tmp_path: Path) -> None:
    """No lineage section: OPENLINEAGE_URL alone is enough, as for the client."""
    env = {"OPENLINEAGE_URL": "http://localhost:5000", "HOME": str(tmp_path)}
    config = load("state_dir: /tmp/x\n", env, tmp_path)
    assert config.lineage.transport == ("http",)


def test_file_without_lineage_and_no_client_settings_is_refused(tmp_path: Path) -> None:
    """No lineage section and nothing of the client's: still refused, naming the section."""
    with pytest.raises(ConfigError, match="lineage: required section is missing"):
        load("state_dir: /tmp/x\n", {"HOME": str(tmp_path)}, tmp_path)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("msk_iam", "needs AWS IAM signing"),
        ("transform", "runs no code from its configuration"),
        ("datadog", "write that http transport instead"),
        ("gcplineage", "Google's Data Lineage client library"),
        ("amazon_datazone", "needs the AWS SDK"),
        ("noop", "set lineage.enabled: false"),
    ],
)
def test_client_transport_types_the_agent_lacks_are_refused_by_name(
    kind: str, reason: str, tmp_path: Path
) -> None:
    """Each of the client's other transport types is refused naming the variable and why."""
    env = {"OPENLINEAGE__TRANSPORT__TYPE": kind, "HOME": str(tmp_path)}
    with pytest.raises(ConfigError) as caught:
        load("lineage: {}\n", env, tmp_path)
    message = str(caught.value)
    assert message.startswith(
        f"OPENLINEAGE__TRANSPORT__TYPE: transport.type: transport '{kind}' is not supported: "
    )
    assert reason in message


def test_a_refused_member_of_a_composite_names_its_line(tmp_path: Path) -> None:
    """A refused type inside a composite in the agent's file names file, line and key."""
    text = """\
        lineage:
          transport:
            type: composite
            transports:
              - {type: console}
              - {type: datadog, apiKey: x}
        """
    with pytest.raises(ConfigError, match=r"config\.yaml:6: lineage\.transport\.transports"):
        load(text, {"HOME": str(tmp_path)}, tmp_path)


def test_async_http_is_the_agents_http_transport(tmp_path: Path) -> None:
    """async_http takes OPENLINEAGE_URL as the client does and is the agent's http transport;
    its max_concurrent_requests is the agent's concurrency."""
    env = {
        "OPENLINEAGE_URL": "http://localhost:5000",
        "OPENLINEAGE__TRANSPORT__TYPE": "async_http",
        "OPENLINEAGE__TRANSPORT__MAX_CONCURRENT_REQUESTS": "8",
        "HOME": str(tmp_path),
    }
    config = load("lineage: {}\n", env, tmp_path)
    assert config.lineage.transport == ("http",)
    assert config.lineage.http == HttpConfig(
        endpoint="http://localhost:5000/api/v1/lineage", concurrency=8
    )


def test_client_filters_and_tags_are_read_from_variables_and_openlineage_yml(
    tmp_path: Path,
) -> None:
    """filters from a JSON variable, tags from openlineage.yml merged over the variables'
    (whose names the client lower-cases), each origin noted."""
    yml = write(
        tmp_path / "openlineage.yml",
        "transport: {type: console}\ntags:\n  job: {Team: data}\n  run: {env: prod}\n",
    )
    env = {
        "OPENLINEAGE_CONFIG": str(yml),
        "OPENLINEAGE__FILTERS": '[{"type": "exact", "match": "a"},'
        ' {"type": "regex", "regex": "tmp_.*"}]',
        "OPENLINEAGE__TAGS__JOB__OWNER": "ops",
        "HOME": str(tmp_path),
    }
    config = load("lineage: {}\n", env, tmp_path)
    assert config.lineage.filters == (
        EventFilter("exact", "a"),
        EventFilter("regex", "tmp_.*"),
    )
    assert config.lineage.job_tags == (("owner", "ops"), ("Team", "data"))
    assert config.lineage.run_tags == (("env", "prod"),)
    origins = dict(config.origins)
    assert origins["lineage.filters"] == "OPENLINEAGE__FILTERS"
    assert origins["lineage.tags"] == "OPENLINEAGE__TAGS__JOB__OWNER"


@pytest.mark.parametrize(
    ("env", "yml", "message"),
    [
        (
            {"OPENLINEAGE__FILTERS": '[{"type": "glob", "match": "x"}]'},
            None,
            "OPENLINEAGE__FILTERS: filters[0].type: a filter's type is exact",
        ),
        (
            {"OPENLINEAGE__FILTERS": '[{"type": "regex"}]'},
            None,
            "OPENLINEAGE__FILTERS: filters[0].type: a regex filter needs regex",
        ),
        (
            {},
            "filters:\n  - {type: regex, regex: '(?=a)'}\n",
            "{yml}:2: filters[0].regex: not a pattern RE2 reads",
        ),
        ({}, "tags:\n  dataset: {a: b}\n", "{yml}:2: tags.dataset.a: tags holds job and run only"),
    ],
)
def test_unreadable_filters_and_tags_are_refused_where_set(
    env: dict[str, str], yml: str | None, message: str, tmp_path: Path
) -> None:
    """A filter or tag the client would skip with a log line is refused, naming its place."""
    path = write(tmp_path / "openlineage.yml", yml) if yml is not None else None
    env = {**env, "HOME": str(tmp_path), "OPENLINEAGE_URL": "http://localhost:5000"}
    if path is not None:
        env["OPENLINEAGE_CONFIG"] = str(path)
    with pytest.raises(ConfigError) as caught:
        load("lineage: {}\n", env, tmp_path)
    assert str(caught.value).startswith(message.format(yml=path))


def test_oauth2_auth_is_read_in_the_clients_spellings(tmp_path: Path) -> None:
    """The client's oauth2 keys (camelCase, as its docs write them) give the agent's auth,
    the secret kept as a Secret."""
    auth = {
        "type": "oauth2",
        "tokenEndpoint": "https://login.example.com/token",
        "clientId": "agent",
        "clientSecret": "s3cret-value",
        "scope": "lineage",
        "clientAuthMethod": "client_secret_post",
        "tokenFields": "jwt",
        "tokenRefreshBuffer": "30",
    }
    env = {
        "OPENLINEAGE__TRANSPORT": json.dumps({"type": "http", "url": "https://x:1", "auth": auth}),
        "HOME": str(tmp_path),
    }
    http = load("lineage: {}\n", env, tmp_path).lineage.http
    assert http is not None and http.auth is not None
    assert http.auth == HttpAuth(
        type="oauth2",
        token_endpoint="https://login.example.com/token",
        client_id="agent",
        client_secret=Secret("s3cret-value"),
        scope="lineage",
        client_auth_method="client_secret_post",
        token_fields=("jwt",),
        token_refresh_buffer=30.0,
    )


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ({"type": "jwt", "tokenEndpoint": "https://t:1"}, "needs apiKey"),
        ({"type": "jwt", "apiKey": "k3y-value"}, "needs tokenEndpoint"),
        ({"type": "oauth2", "tokenEndpoint": "https://t:1", "clientSecret": "s"}, "needs clientId"),
        ({"type": "oauth2", "tokenEndpoint": "https://t:1", "clientId": "c"}, "needs clientSecret"),
    ],
)
def test_token_endpoint_auth_missing_a_key_is_refused_by_name(
    auth: dict[str, str], message: str, tmp_path: Path
) -> None:
    """jwt or oauth2 without one of the keys it needs is refused naming the variable."""
    env = {
        "OPENLINEAGE__TRANSPORT": json.dumps({"type": "http", "url": "https://x:1", "auth": auth}),
        "HOME": str(tmp_path),
    }
    with pytest.raises(ConfigError) as caught:
        load("lineage: {}\n", env, tmp_path)
    assert str(caught.value).startswith(
        f"OPENLINEAGE__TRANSPORT: transport.auth.type: {message}"
    ), caught.value


def test_config_check_names_the_openlineage_yml_for_its_settings(tmp_path: Path) -> None:
    """A start check failing on a setting of openlineage.yml names that file and line, not
    the agent's file, which does not hold it."""
    yml = write(
        tmp_path / "openlineage.yml",
        f"transport:\n  type: http\n  url: https://x.example.com\n  ca_file: {tmp_path}\n",
    )
    config = write(
        tmp_path / "config.yaml",
        f"lineage: {{}}\nsigning: {{key_path: {tmp_path / 'k'}}}\nstate_dir: {tmp_path}\n",
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "OPENLINEAGE_CONFIG": str(yml),
    }
    ran = cli("config", "check", str(config), env=env, timeout=60)
    assert ran.returncode != 0
    assert f"{yml}:4: lineage.http.ca_file: {tmp_path}: not a regular file" in ran.stderr
