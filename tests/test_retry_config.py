"""`lineage.http.retry`, `lineage.http.late_answer_wait` and
`lineage.resend_unconfirmed_terminal`: read from the agent's YAML, from the OpenLineage
client's `transport: {type: http, retry: {...}}` shape (in the agent's file, an
openlineage.yml or the variables), with the daemon's defaults; bad keys named word for word."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agent.config.loader import parse_config
from agent.config.model import AgentConfig, RetryConfig
from agent.errors import ConfigError
from tests.test_config_check import check, write


def load(text: str, tmp_path: Path, env: dict[str, str] | None = None) -> AgentConfig:
    return parse_config(textwrap.dedent(text), str(tmp_path / "config.yaml"), environ=env or {})


def error_of(text: str, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(text, tmp_path, env)
    return str(caught.value)


def test_defaults_are_a_daemons() -> None:
    """10 retries, 0.5 s doubling to 30 s, the five not-stored statuses, 120 s for a late
    answer, and the terminal resend on."""
    config = load_default()
    http = config.lineage.http
    assert http is not None
    assert http.retry == RetryConfig(
        total=10,
        connect=None,
        read=None,
        status=None,
        backoff_factor=0.5,
        backoff_max=30.0,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=("HEAD", "POST"),
        respect_retry_after_header=True,
        backoff_jitter=1.0,
    )
    assert http.late_answer_wait == 120.0
    assert config.lineage.resend_unconfirmed_terminal is True


def load_default() -> AgentConfig:
    return parse_config(
        "lineage: {transport: http, http: {endpoint: 'http://localhost:5000/api/v1/lineage'}}\n",
        "config.yaml",
        environ={},
    )


def test_the_agents_yaml_takes_every_retry_key(tmp_path: Path) -> None:
    """The seed shape: every urllib3 name, durations or bare seconds."""
    config = load(
        """\
        lineage:
          transport: http
          resend_unconfirmed_terminal: false
          http:
            endpoint: http://localhost:5000/api/v1/lineage
            late_answer_wait: 0
            retry:
              total: 3
              connect: 2
              read: 2
              status: 2
              backoff_factor: 250ms
              backoff_max: 1m
              backoff_jitter: 0
              status_forcelist: [503, 507]
              allowed_methods: [POST]
              respect_retry_after_header: false
        """,
        tmp_path,
    )
    http = config.lineage.http
    assert http is not None
    assert http.retry == RetryConfig(3, 2, 2, 2, 0.25, 60.0, (503, 507), ("POST",), False, 0.0)
    assert http.late_answer_wait == 0.0
    assert config.lineage.resend_unconfirmed_terminal is False


def test_the_client_shape_merges_the_given_keys_over_the_defaults(tmp_path: Path) -> None:
    """`transport: {type: http, retry: {...}}` as the client writes it: the keys given
    replace the defaults, the rest stay; each is noted with its origin."""
    config = load(
        """\
        lineage:
          transport:
            type: http
            url: http://localhost:5000
            late_answer_wait: 30s
            retry:
              total: 4
              backoff_factor: 0.3
              status_forcelist: [500, 502, 503, 504]
        """,
        tmp_path,
    )
    http = config.lineage.http
    assert http is not None
    assert http.retry == RetryConfig(
        total=4, backoff_factor=0.3, status_forcelist=(500, 502, 503, 504)
    )
    assert http.late_answer_wait == 30.0
    where = str(tmp_path / "config.yaml")
    assert ("lineage.http.retry.total", f"{where}:7") in config.origins
    assert ("lineage.http.late_answer_wait", f"{where}:5") in config.origins


def test_openlineage_yml_and_variables_carry_retry(tmp_path: Path) -> None:
    """An openlineage.yml's retry, and OPENLINEAGE__TRANSPORT__RETRY__* variables over it."""
    yml = write(
        tmp_path / "openlineage.yml",
        """\
        transport:
          type: http
          url: http://localhost:5000
          retry:
            total: 7
            backoff_max: 12
            respect_retry_after_header: false
        """,
    )
    env = {"OPENLINEAGE_CONFIG": str(yml), "OPENLINEAGE__TRANSPORT__RETRY__STATUS": "3"}
    http = load("lineage: {}\n", tmp_path, env).lineage.http
    assert http is not None
    assert http.retry == RetryConfig(
        total=7, status=3, backoff_max=12.0, respect_retry_after_header=False
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            """\
            lineage:
              transport: http
              http:
                endpoint: http://localhost:5000/api/v1/lineage
                retry: {totl: 3}
            """,
            "{cfg}:5: lineage.http.retry.totl: unknown key (did you mean 'total'?)",
        ),
        (
            """\
            lineage:
              transport: http
              http:
                endpoint: http://localhost:5000/api/v1/lineage
                retry:
                  status_forcelist: [503, 700]
            """,
            "{cfg}:6: lineage.http.retry.status_forcelist[1]: expected an integer from 100 to"
            " 599, got 700",
        ),
        (
            """\
            lineage:
              transport: http
              http:
                endpoint: http://localhost:5000/api/v1/lineage
                late_answer_wait: forever
            """,
            "{cfg}:5: lineage.http.late_answer_wait: expected a duration like 5s or 500ms, got"
            " 'forever'",
        ),
        (
            """\
            lineage:
              transport:
                type: http
                url: http://localhost:5000
                retry:
                  total: 3
                  raise_on_status: false
            """,
            "{cfg}:7: lineage.transport.retry.raise_on_status: unknown key in retry (expected"
            " one of 'total', 'connect', 'read', 'status', 'backoff_factor', 'backoff_max',"
            " 'status_forcelist', 'allowed_methods', 'respect_retry_after_header',"
            " 'backoff_jitter')",
        ),
        (
            """\
            lineage:
              transport:
                type: http
                url: http://localhost:5000
                retry:
                  status_forcelist: [503, "soon"]
            """,
            "{cfg}:6: lineage.transport.retry.status_forcelist[1]: expected an HTTP status from"
            " 100 to 599, got 'soon'",
        ),
        (
            """\
            lineage:
              transport:
                type: http
                url: http://localhost:5000
                retry:
                  backoff_max: 2h
            """,
            "{cfg}:6: lineage.transport.retry.backoff_max: expected seconds from 0 to 3600 (or a"
            " duration like 30s), got '2h'",
        ),
    ],
)
def test_bad_retry_settings_name_file_line_and_key(text: str, message: str, tmp_path: Path) -> None:
    """Each bad retry setting fails with one exact message naming file:line and key."""
    assert error_of(text, tmp_path) == message.format(cfg=tmp_path / "config.yaml")


def test_config_check_says_read_and_connect_retries_are_not_made(tmp_path: Path) -> None:
    """`config check` accepts the client's read and connect counts, one note line each."""
    config = write(
        tmp_path / "config.yaml",
        f"""\
        lineage:
          transport:
            type: http
            url: http://127.0.0.1:9
            retry: {{total: 5, read: 5, connect: 5}}
        signing: {{key_path: {tmp_path}/key}}
        state_dir: {tmp_path}/state
        """,
    )
    code, out, err = check(str(config))
    assert (code, err) == (0, "")
    notes = [line for line in out.splitlines() if line.startswith("note: lineage.http.retry")]
    assert notes == [
        "note: lineage.http.retry.read: the agent makes no read retries: a request that may"
        " have been stored is never sent again (at-most-once)",
        "note: lineage.http.retry.connect: not needed: a request that never left stays queued"
        " and goes when the collector answers again",
    ]
