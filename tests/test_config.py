"""The configuration loader: seed configs, exact error messages, paths, example file, fuzzing."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.config.loader import load_config, parse_config
from agent.config.model import (
    DEFAULT_PROPERTIES_FACET,
    AgentConfig,
    FileConfig,
    HttpAuth,
    HttpConfig,
    LineageConfig,
)
from agent.config.redact import redacted
from agent.errors import ConfigError
from agent.spark.follow.application import translate_options
from tests.fuzz import examples

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example.yaml"


def parse(text: str) -> AgentConfig:
    return parse_config(textwrap.dedent(text), "config.yaml", base_dir="/etc/lineage-agent")


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return str(info.value)


# --- the seed's lineage section ---------------------------------------------------------------


def test_seed_flow_http_config() -> None:
    """The one-line http seed config parses with defaults for everything it leaves out."""
    config = parse(
        "lineage: {enabled: true, transport: http,"
        " http: {endpoint: http://localhost:5000/api/v1/lineage}}\n"
    )
    assert config.lineage == LineageConfig(
        enabled=True,
        transport=("http",),
        http=HttpConfig(endpoint="http://localhost:5000/api/v1/lineage"),
    )
    assert config.lineage.http is not None
    assert config.lineage.http.timeout == 10.0
    assert config.lineage.queue_size == 1024
    assert config.source == "config.yaml"


def test_seed_block_https_bearer_config() -> None:
    """The block seed config with durations and bearer auth parses to the written values."""
    config = parse(
        """\
        lineage:
          enabled: true
          transport: http
          queue_size: 1024
          drain_timeout: 5s
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            timeout: 3s
            auth:
              type: bearer
              token_env: OPENLINEAGE_TOKEN
        """
    )
    assert config.lineage.queue_size == 1024
    assert config.lineage.drain_timeout == 5.0
    assert config.lineage.http == HttpConfig(
        endpoint="https://lineage.example.com/api/v1/lineage",
        timeout=3.0,
        auth=HttpAuth(type="bearer", token_env="OPENLINEAGE_TOKEN"),
    )


def test_seed_file_config() -> None:
    """The file seed config parses; an integer rotation size becomes a float of MiB."""
    config = parse(
        "lineage: {enabled: true, transport: file,"
        " file: {path: /var/lib/lineage-agent/events.jsonl, rotation_size_mb: 64}}\n"
    )
    assert config.lineage.transport == ("file",)
    assert config.lineage.file == FileConfig(
        path="/var/lib/lineage-agent/events.jsonl", rotation_size_mb=64.0
    )
    assert isinstance(config.lineage.file.rotation_size_mb, float)
    assert config.lineage.http is None


# --- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("5s", 5.0),
        ("500ms", 0.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("3600", 3600.0),
        ("60m", 3600.0),
        ("1.5s", 1.5),
        ("7", 7.0),
        ("2.5", 2.5),
        ("0", 0.0),
        ("'10s'", 10.0),
    ],
)
def test_durations(written: str, seconds: float) -> None:
    """Durations take ms, s, m, h, d units or a bare number of seconds."""
    assert parse(f"lineage: {{drain_timeout: {written}}}\n").lineage.drain_timeout == seconds


def test_transport_list_and_metrics_listen_forms() -> None:
    """A transport list becomes a tuple; listen takes [v6]:port and false disables it."""
    config = parse(
        """\
        lineage:
          transport: [http, file]
          http: {endpoint: 'http://[::1]:5000/api/v1/lineage', batch_size: 50, concurrency: 64}
        metrics: {listen: '[::1]:0'}
        """
    )
    assert config.lineage.transport == ("http", "file")
    assert config.metrics.listen == "[::1]:0"
    for disabled in ("false", "null", "''", ""):
        assert parse(f"lineage:\nmetrics: {{listen: {disabled}}}\n").metrics.listen is None
    assert parse("lineage:\nmetrics: {listen: 'localhost:9464'}\n").metrics.listen == (
        "localhost:9464"
    )


def test_empty_sections_take_defaults() -> None:
    """An empty `lineage:` section gives the default config, as does a `{}` one."""
    assert parse("lineage:\n") == dataclasses.replace(AgentConfig(), source="config.yaml")
    assert parse("lineage: {}\nspark: {}\n") == dataclasses.replace(
        AgentConfig(), source="config.yaml"
    )


def test_kafka_bootstrap_reaches_the_translator() -> None:
    """`spark.kafka_bootstrap` names the servers of Kafka reads; unset it is None."""
    config = parse("lineage:\nspark: {kafka_bootstrap: 'broker-1:9092,broker-2:9092'}\n")
    assert config.spark.kafka_bootstrap == "broker-1:9092,broker-2:9092"
    options = translate_options(config.spark, "spark")
    assert options.kafka_bootstrap == "broker-1:9092,broker-2:9092"
    assert translate_options(parse("lineage:\n").spark, "spark").kafka_bootstrap is None
    with pytest.raises(ConfigError) as raised:
        parse("lineage:\nspark: {kafka_bootstrap: ''}\n")
    assert str(raised.value) == (
        "config.yaml:2: spark.kafka_bootstrap: expected a non-empty string, got ''"
    )


def test_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    """Relative paths resolve against the file's folder; file:// URLs become plain paths."""
    config_file = tmp_path / "etc" / "agent.yaml"
    config_file.parent.mkdir()
    config_file.write_text(
        textwrap.dedent(
            """\
            lineage:
              file: {path: out/events.jsonl}
            spark:
              event_log_dirs:
                - logs
                - ../spark-events/
                - file:///var/log/spark%20events
                - file:/srv/spark-logs
            signing: {key_path: keys/ed25519.key}
            state_dir: .
            """
        )
    )
    config = load_config(config_file)
    folder = config_file.parent
    assert config.source == str(config_file)
    assert config.lineage.file.path == str(folder / "out" / "events.jsonl")
    assert config.spark.event_log_dirs == (
        str(folder / "logs"),
        str(tmp_path / "spark-events"),
        "/var/log/spark events",
        "/srv/spark-logs",
    )
    assert config.signing.key_path == str(folder / "keys" / "ed25519.key")
    assert config.state_dir == str(folder)


def test_event_log_dirs_on_stores() -> None:
    """Store URLs are kept as URLs (scheme lower-cased, trailing slash cut), beside paths."""
    config = parse(
        "lineage:\nspark:\n  event_log_dirs: [S3A://bucket/spark-logs/, 'gs://b/l',"
        " 'abfss://logs@acct.dfs.core.windows.net/spark', 'hdfs://nn:8020/spark-logs', /x]\n"
    )
    assert config.spark.event_log_dirs == (
        "s3a://bucket/spark-logs",
        "gs://b/l",
        "abfss://logs@acct.dfs.core.windows.net/spark",
        "hdfs://nn:8020/spark-logs",
        "/x",
    )


def test_event_log_dirs_single_string() -> None:
    """A single event-log folder may be written as a string instead of a list."""
    config = parse("lineage:\nspark: {event_log_dirs: /data/spark-events}\n")
    assert config.spark.event_log_dirs == ("/data/spark-events",)


def test_what_users_see_defaults() -> None:
    """Read-only runs are off by default; the properties facet has its allow-list; no tags."""
    spark = parse("lineage:\n").spark
    assert spark.emit_read_only_runs is False
    assert spark.properties_facet == DEFAULT_PROPERTIES_FACET
    assert "spark.master" in DEFAULT_PROPERTIES_FACET
    assert (spark.tags, spark.history_server_url) == (None, None)


def test_what_users_see_keys() -> None:
    """Read-only runs, the properties allow-list, tags and the History Server are read."""
    spark = parse(
        """\
        lineage:
        spark:
          emit_read_only_runs: true
          properties_facet: [spark.executor.memory, spark.yarn.queue]
          tags: [team:payments, "env: prod", "link:http://wiki/x"]
          history_server_url: https://history.example.com:18080
        """
    ).spark
    assert spark.emit_read_only_runs is True
    assert spark.properties_facet == ("spark.executor.memory", "spark.yarn.queue")
    assert spark.tags == ("team:payments", "env:prod", "link:http://wiki/x")
    assert spark.history_server_url == "https://history.example.com:18080"
    assert parse("lineage:\nspark: {properties_facet: null}\n").spark.properties_facet is None


# --- errors, word for word --------------------------------------------------------------------

BROKEN = [
    pytest.param(
        "lineage:\nspark: {tags: [team]}\n",
        "config.yaml:2: spark.tags[0]: expected a tag as key:value, like team:payments, got 'team'",
        id="tag-without-value",
    ),
    pytest.param(
        "lineage:\nspark: {tags: [':x']}\n",
        "config.yaml:2: spark.tags[0]: expected a tag as key:value, like team:payments, got ':x'",
        id="tag-without-key",
    ),
    pytest.param(
        "lineage:\nspark: {properties_facet: [executor memory]}\n",
        "config.yaml:2: spark.properties_facet[0]: expected a Spark property name like "
        "spark.executor.memory, got 'executor memory'",
        id="property-name",
    ),
    pytest.param(
        "lineage:\nspark: {emit_read_only_runs: sometimes}\n",
        "config.yaml:2: spark.emit_read_only_runs: expected true or false, got 'sometimes'",
        id="read-only-switch",
    ),
    pytest.param(
        """\
        lineage:
          queue_szie: 10
        """,
        "config.yaml:2: lineage.queue_szie: unknown key (did you mean 'queue_size'?)",
        id="unknown-key-did-you-mean",
    ),
    pytest.param(
        """\
        lineage: {}
        colour: blue
        """,
        "config.yaml:2: colour: unknown key (expected one of 'lineage', 'signing', 'spark',"
        " 'liveness', 'metrics', 'state_dir', 'state_url', 'state_password_file', 'state_lease',"
        " 'control_socket', 'logging')",
        id="unknown-key-no-match",
    ),
    pytest.param(
        """\
        lineage:
          enabled: true
        liveness:
          allowed_hosts: ["*.example.com", "10.0.0.0/33"]
        """,
        "config.yaml:4: liveness.allowed_hosts[1]: not a network in CIDR notation (10.0.0.0/8, "
        "fd00::/8), got '10.0.0.0/33'",
        id="liveness-bad-cidr",
    ),
    pytest.param(
        """\
        lineage:
          enabled: true
        liveness:
          allowed_hosts: ["http://rm.example.com:8088/"]
        """,
        "config.yaml:4: liveness.allowed_hosts[0]: expected a host name, `*.domain`, an IP "
        "address or a CIDR network, got 'http://rm.example.com:8088/'",
        id="liveness-url-not-host",
    ),
    pytest.param(
        """\
        lineage:
          enabled: true
          queue_size: "1024"
        """,
        "config.yaml:3: lineage.queue_size: expected an integer from 0 to 1000000, got '1024'",
        id="string-for-int",
    ),
    pytest.param(
        """\
        lineage:
          enabled: 1
        """,
        "config.yaml:2: lineage.enabled: expected true or false, got 1",
        id="int-for-bool",
    ),
    pytest.param(
        """\
        lineage:
          http: {endpoint: 'https://x.example', concurrency: true}
        """,
        "config.yaml:2: lineage.http.concurrency: expected an integer from 1 to 64, got true",
        id="bool-for-int",
    ),
    pytest.param(
        """\
        lineage:
          transport: file
          file:
            - /var/lib/lineage-agent/events.jsonl
        """,
        "config.yaml:4: lineage.file: expected a mapping, got a list",
        id="list-for-mapping",
    ),
    pytest.param(
        """\
        lineage:
          transport: http
          http:
            timeout: soon
            endpoint: https://lineage.example.com/api/v1/lineage
        """,
        "config.yaml:4: lineage.http.timeout: expected a duration like 5s or 500ms, got 'soon'",
        id="bad-duration",
    ),
    pytest.param(
        "lineage: {drain_timeout: 5 parsecs}\n",
        "config.yaml:1: lineage.drain_timeout: expected a duration like 5s or 500ms,"
        " got '5 parsecs'",
        id="bad-duration-unit",
    ),
    pytest.param(
        "lineage: {drain_timeout: '1:30'}\n",
        "config.yaml:1: lineage.drain_timeout: expected a duration like 5s or 500ms, got '1:30'",
        id="base-60-duration",
    ),
    pytest.param(
        "lineage: {http: {endpoint: 'https://x.example', timeout: 0s}}\n",
        "config.yaml:1: lineage.http.timeout: expected a duration > 0s and <= 10m, got '0s'",
        id="zero-timeout",
    ),
    pytest.param(
        "lineage: {file: {rotation_size_mb: 1" + "0" * 400 + "}}\n",
        "config.yaml:1: lineage.file.rotation_size_mb: expected a number from 0 to 1048576, got 1"
        + "0" * 76
        + "...",
        id="number-too-large",
    ),
    pytest.param(
        "lineage: {queue_size: !!int twelve}\n",
        "config.yaml:1: lineage.queue_size: expected an integer from 0 to 1000000, got twelve",
        id="explicit-int-tag-on-text",
    ),
    pytest.param(
        "lineage: {http: !include http.yaml}\n",
        "config.yaml:1: lineage.http: unsupported YAML tag '!include'",
        id="custom-tag",
    ),
    pytest.param(
        "lineage:\nsigning: {key_path: !!python/name:os.system }\n",
        "config.yaml:2: signing.key_path: unsupported YAML tag"
        " 'tag:yaml.org,2002:python/name:os.system'",
        id="python-tag",
    ),
    pytest.param(
        "lineage: {drain_timeout: -1s}\n",
        "config.yaml:1: lineage.drain_timeout: expected a duration from 0s to 1h, got '-1s'",
        id="negative-duration",
    ),
    pytest.param(
        """\
        lineage:
          queue_size: -5
        """,
        "config.yaml:2: lineage.queue_size: expected an integer from 0 to 1000000, got -5",
        id="negative-queue-size",
    ),
    pytest.param(
        "lineage: {http: {endpoint: 'https://x.example', concurrency: 65}}\n",
        "config.yaml:1: lineage.http.concurrency: expected an integer from 1 to 64, got 65",
        id="concurrency-too-high",
    ),
    pytest.param(
        "lineage:\nspark: {max_line_bytes: 1000}\n",
        "config.yaml:2: spark.max_line_bytes: expected an integer from 1024 to 1073741824, "
        "got 1000",
        id="max-line-bytes-too-small",
    ),
    pytest.param(
        "lineage: {file: {rotation_size_mb: .inf}}\n",
        "config.yaml:1: lineage.file.rotation_size_mb: expected a number from 0 to 1048576, "
        "got .inf",
        id="infinite-rotation",
    ),
    pytest.param(
        """\
        lineage:
          transport: kafak
        """,
        "config.yaml:2: lineage.transport: expected one of 'http', 'file', 'kafka', 'console',"
        " got 'kafak'",
        id="bad-transport",
    ),
    pytest.param(
        """\
        lineage:
          transport:
            - http
            - file
            - http
          http: {endpoint: 'https://x.example'}
        """,
        "config.yaml:5: lineage.transport[2]: duplicate 'http' (first at line 3)",
        id="duplicate-transport",
    ),
    pytest.param(
        "lineage: {transport: []}\n",
        "config.yaml:1: lineage.transport: expected at least one item, got an empty list",
        id="no-transport",
    ),
    pytest.param(
        """\
        lineage:
          enabled: true
          transport: [file, http]
        """,
        "config.yaml:3: lineage.http.endpoint: required because lineage.transport includes 'http'",
        id="http-transport-without-section",
    ),
    pytest.param(
        """\
        lineage:
          transport: http
          http:
            timeout: 3s
        """,
        "config.yaml:3: lineage.http.endpoint: required key is missing",
        id="http-section-without-endpoint",
    ),
    pytest.param(
        "lineage: {transport: file}\nstate_url: 'mysql://u:s3cret@db/state'\n",
        "config.yaml:2: state_url: expected a postgresql:// URL (libpq's URI form)",
        id="state-url-not-postgresql-and-not-echoed",
    ),
    pytest.param(
        "lineage: {transport: http, http: {endpoint: 'localhost:5000/api/v1/lineage'}}\n",
        "config.yaml:1: lineage.http.endpoint: expected an absolute http:// or https:// URL,"
        " got 'localhost:5000/api/v1/lineage'",
        id="relative-endpoint",
    ),
    pytest.param(
        """\
        lineage:
          transport: http
          http:
            endpoint: http://lineage.example.com/api/v1/lineage
            auth: {type: bearer, token_env: OPENLINEAGE_TOKEN}
        """,
        "config.yaml:4: lineage.http.endpoint: bearer auth needs an https:// endpoint;"
        " refusing to send a token over http",
        id="bearer-over-http",
    ),
    pytest.param(
        """\
        lineage:
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            batch_endpoint: http://lineage.example.com/api/v1/lineage/batch
            auth: {type: bearer, token_env: OPENLINEAGE_TOKEN}
        """,
        "config.yaml:4: lineage.http.batch_endpoint: bearer auth needs an https:// endpoint;"
        " refusing to send a token over http",
        id="bearer-over-http-batch",
    ),
    pytest.param(
        """\
        lineage:
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            auth:
              type: bearer
        """,
        "config.yaml:4: lineage.http.auth.token_env: required key is missing",
        id="missing-token-env",
    ),
    pytest.param(
        """\
        lineage:
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            auth: {type: bearer, token_env: lineage-token}
        """,
        "config.yaml:4: lineage.http.auth.token_env: expected an environment variable name like"
        " OPENLINEAGE_TOKEN, got 'lineage-token'",
        id="bad-token-env",
    ),
    pytest.param(
        """\
        lineage:
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            auth: {type: basic, token_env: TOKEN}
        """,
        "config.yaml:4: lineage.http.auth.type: expected one of 'bearer', 'api_key', 'jwt',"
        " 'oauth2', got 'basic'",
        id="bad-auth-type",
    ),
    pytest.param(
        """\
        lineage:
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            auth:
              type: oauth2
              token_endpoint: https://login.example.com/oauth/token
              client_secret_env: LINEAGE_CLIENT_SECRET
        """,
        "config.yaml:4: lineage.http.auth.client_id: required key is missing",
        id="oauth2-without-client-id",
    ),
    pytest.param(
        """\
        lineage:
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            auth:
              type: jwt
              token_env: LINEAGE_API_KEY
              token_endpoint: http://login.example.com/token
        """,
        "config.yaml:7: lineage.http.auth.token_endpoint: needs an https:// URL; refusing to"
        " send credentials over http",
        id="jwt-token-endpoint-over-http",
    ),
    pytest.param(
        """\
        lineage:
        metrics:
          listen: 9464
        """,
        "config.yaml:3: metrics.listen: expected host:port or [ipv6]:port, or false to disable,"
        " got 9464",
        id="listen-without-host",
    ),
    pytest.param(
        "lineage:\nmetrics: {listen: '::1:9464'}\n",
        "config.yaml:2: metrics.listen: expected host:port or [ipv6]:port, or false to disable,"
        " got '::1:9464'",
        id="listen-v6-without-brackets",
    ),
    pytest.param(
        "lineage:\nmetrics: {listen: '127.0.0.1:70000'}\n",
        "config.yaml:2: metrics.listen: expected a port from 0 to 65535, got '127.0.0.1:70000'",
        id="listen-port-range",
    ),
    pytest.param(
        "lineage:\nspark: {event_log_dirs: ['/a', 'ftp://host/spark-logs']}\n",
        "config.yaml:2: spark.event_log_dirs[1]: expected a local path, a file:// URL or a URL"
        " with one of the schemes s3, s3a, gs, abfs, abfss, hdfs, webhdfs, got 'ftp://host/spark-logs'",
        id="unsupported-event-log-url",
    ),
    pytest.param(
        "lineage:\nspark: {event_log_dirs: ['s3a:///spark-logs']}\n",
        "config.yaml:2: spark.event_log_dirs[0]: expected s3a://<bucket or host>/<path>,"
        " got 's3a:///spark-logs'",
        id="store-url-without-bucket",
    ),
    pytest.param(
        "lineage:\nspark: {event_log_dirs: ['s3a://AKIAXYZ:s3cr3t@bucket/logs']}\n",
        "config.yaml:2: spark.event_log_dirs[0]: a password in the URL is refused: the store's"
        " credentials come from its standard chain (environment, profile, instance role)",
        id="store-url-with-password",
    ),
    pytest.param(
        "lineage:\nspark: {event_log_dirs: [/a/b, /a/b/]}\n",
        "config.yaml:2: spark.event_log_dirs[1]: duplicate '/a/b' (first at line 2)",
        id="duplicate-event-log-dir",
    ),
    pytest.param(
        "lineage:\nlogging: {level: INFO}\n",
        "config.yaml:2: logging.level: expected one of 'debug', 'info', 'warning', 'error',"
        " got 'INFO'",
        id="bad-log-level",
    ),
    pytest.param(
        "lineage: {namespace: ''}\n",
        "config.yaml:1: lineage.namespace: expected a non-empty string, got ''",
        id="empty-string",
    ),
    pytest.param(
        """\
        lineage:
          transport: file
          queue_size: 10
          transport: http
        """,
        "config.yaml:4: lineage.transport: duplicate key 'transport' (first at line 2)",
        id="duplicate-key",
    ),
    pytest.param(
        """\
        defaults: &defaults {queue_size: 10}
        lineage:
          <<: *defaults
        """,
        "config.yaml:1: defaults: unknown key (expected one of 'lineage', 'signing', 'spark',"
        " 'liveness', 'metrics', 'state_dir', 'state_url', 'state_password_file', 'state_lease',"
        " 'control_socket', 'logging')\n"
        "config.yaml:3: lineage: YAML merge keys (<<) are not supported",
        id="anchor-holder-key",
    ),
    pytest.param(
        """\
        lineage:
          <<: {queue_size: 10}
        """,
        "config.yaml:2: lineage: YAML merge keys (<<) are not supported",
        id="merge-key",
    ),
    pytest.param(
        """\
        lineage:
          transport: file
            queue_size: 10
        """,
        "config.yaml:3: not valid YAML: mapping values are not allowed here",
        id="invalid-yaml",
    ),
    pytest.param(
        "lineage: {}\n---\nlineage: {}\n",
        "config.yaml:2: not valid YAML: expected a single document in the stream,"
        " but found another document",
        id="two-documents",
    ),
    pytest.param(
        "lineage:\n\tenabled: true\n",
        "config.yaml:2: not valid YAML: while scanning for the next token, found character"
        " '\\t' that cannot start any token",
        id="tab-indent",
    ),
    pytest.param(
        "lineage: {namespace: \x07}\n",
        "config.yaml:1: not valid YAML: unacceptable character #x0007:"
        " special characters are not allowed",
        id="control-character",
    ),
    pytest.param(
        "[" * 5000,
        "config.yaml: not valid YAML: nested too deeply",
        id="nested-too-deeply",
    ),
    pytest.param("", "config.yaml: empty configuration; expected a 'lineage' section", id="empty"),
    pytest.param(
        "# nothing but a comment\n",
        "config.yaml: empty configuration; expected a 'lineage' section",
        id="comments-only",
    ),
    pytest.param(
        "- lineage\n",
        "config.yaml:1: expected a mapping of sections, got a list",
        id="top-level-list",
    ),
    pytest.param(
        """\
        # no lineage here
        spark: {}
        """,
        "config.yaml:2: lineage: required section is missing",
        id="missing-lineage",
    ),
]


@pytest.mark.parametrize(("text", "message"), BROKEN)
def test_broken_config_messages(text: str, message: str) -> None:
    """Each broken config fails with one exact message naming file, line and key."""
    assert error_of(text) == message


def test_missing_file(tmp_path: Path) -> None:
    """A missing file is a ConfigError with the OS reason, not an OSError."""
    path = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: cannot read: No such file or directory"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    """A folder given as the config file is reported as unreadable."""
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value) == f"{tmp_path}: cannot read: Is a directory"


def test_not_utf8_file(tmp_path: Path) -> None:
    """A file that is not UTF-8 text names the offset of the first bad byte."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes("lineage: {namespace: caf\u00e9}\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: cannot read: not UTF-8 text (byte 24)"


def test_empty_file(tmp_path: Path) -> None:
    """An empty file is reported as an empty configuration under its own path."""
    path = tmp_path / "config.yaml"
    path.write_text("")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: empty configuration; expected a 'lineage' section"


# --- the example file -------------------------------------------------------------------------


def _dotted_fields(cls: type, prefix: str = "") -> set[str]:
    """Every YAML key of a config dataclass, dotted, nested sections included."""
    keys: set[str] = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.metadata.get("yaml", True):
            continue
        key = prefix + f.name
        keys.add(key)
        section = next(
            (t for t in (hints[f.name], *typing.get_args(hints[f.name])) if _is_dataclass(t)),
            None,
        )
        if section is not None:
            keys |= _dotted_fields(section, key + ".")
    return keys


def _is_dataclass(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


_FREE_FORM = frozenset({"lineage.http.headers", "lineage.kafka.config"})


def _dotted_keys(mapping: dict[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, value in mapping.items():
        keys.add(prefix + name)
        # headers and producer settings are free-form mappings, not config keys
        if isinstance(value, dict) and prefix + name not in _FREE_FORM:
            keys |= _dotted_keys(value, f"{prefix}{name}.")
    return keys


def test_example_parses_to_the_defaults() -> None:
    """config/example.yaml parses, and its active keys are exactly the defaults."""
    config = load_config(EXAMPLE)
    assert config == dataclasses.replace(AgentConfig(), source=str(EXAMPLE))


def test_example_documents_every_key() -> None:
    """With its optional keys uncommented, the example is valid and names every config key."""
    text = re.sub(
        r"^(\s*)# (\s*[a-z_][a-z_.]*:.*)$", r"\1\2", EXAMPLE.read_text(), flags=re.MULTILINE
    )
    config = parse_config(text, "example.yaml")
    assert config.lineage.http is not None
    assert config.lineage.http.auth == HttpAuth(
        type="bearer",
        token_env="OPENLINEAGE_TOKEN",
        token_endpoint="https://login.example.com/oauth/token",
        client_id="lineage-agent",
        client_secret_env="LINEAGE_CLIENT_SECRET",
        scope="lineage.write",
        token_fields=("access_token",),
    )
    assert config.spark.namespace == "spark-prod"
    passed_through = "lineage.kafka.config."  # librdkafka's own properties, not the agent's
    written = {k for k in _dotted_keys(yaml.safe_load(text)) if not k.startswith(passed_through)}
    assert written == _dotted_fields(AgentConfig)


# --- redacted ---------------------------------------------------------------------------------


def test_redacted_is_json_and_hides_url_credentials() -> None:
    """redacted() gives plain JSON types and masks user info and query values of URLs."""
    config = parse(
        """\
        lineage:
          transport: [http, file]
          http:
            endpoint: 'https://user:hunter2@lineage.example.com/api/v1/lineage?api_key=k1&x='
            auth: {type: bearer, token_env: OPENLINEAGE_TOKEN}
        """
    )
    plain = redacted(config)
    assert json.loads(json.dumps(plain)) == plain
    assert plain["lineage"]["transport"] == ["http", "file"]
    assert plain["lineage"]["http"]["endpoint"] == (
        "https://***@lineage.example.com/api/v1/lineage?api_key=***&x=***"
    )
    auth = plain["lineage"]["http"]["auth"]
    assert (auth["type"], auth["token_env"], auth["client_secret_env"]) == (
        "bearer",
        "OPENLINEAGE_TOKEN",
        None,
    )
    assert "api_key" not in auth and "client_secret" not in auth
    assert plain["spark"]["event_log_dirs"] == ["/var/log/spark-events"]
    assert plain["source"] == "config.yaml"
    assert "hunter2" not in json.dumps(plain)


def test_redacted_hides_producer_secrets_and_the_state_url_password() -> None:
    """Producer settings named like credentials (ssl.key.pem, sasl.oauthbearer.config,
    sasl.jaas.config) and the password of `state_url` show as `***`."""
    config = parse(
        """\
        lineage:
          transport: kafka
          kafka:
            topic: lineage
            config:
              bootstrap.servers: 'broker:9092'
              ssl.key.pem: 'PEMSECRET'
              sasl.oauthbearer.config: 'scope=x clientSecret=OAUTHSECRET'
              sasl.jaas.config: 'JAASSECRET'
        state_url: 'postgresql://agent:DBSECRET@db.example.com:5432/lineage?password=QSECRET'
        """
    )
    plain = redacted(config)
    kafka = plain["lineage"]["kafka"]["config"]
    assert kafka["bootstrap.servers"] == "broker:9092"
    assert kafka["ssl.key.pem"] == kafka["sasl.oauthbearer.config"] == "***"
    assert plain["state_url"] == ("postgresql://agent:***@db.example.com:5432/lineage?password=***")
    assert not any(word in json.dumps(plain) for word in ("PEM", "OAUTH", "JAAS", "SECRET"))


# --- fuzzing ----------------------------------------------------------------------------------

SOURCE = "fuzz/config.yaml"
_KEYS = sorted({key.rsplit(".", 1)[-1] for key in _dotted_fields(AgentConfig)})
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(
        ["5s", "500ms", "1:30", "http", "file", "https://x.example/a", "[::1]:1", "file:///x"]
    )
)
_KEY = st.sampled_from(_KEYS) | st.text(max_size=12)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEY, inner, max_size=5),
    max_leaves=25,
)
_DOCUMENTS = st.dictionaries(_KEY, _VALUES, max_size=6) | st.fixed_dictionaries(
    {"lineage": st.dictionaries(_KEY, _VALUES, max_size=6)},
    optional={"spark": _VALUES, "metrics": _VALUES, "logging": _VALUES},
)


def _outcome(text: str) -> None:
    try:
        config = parse_config(text, SOURCE)
    except ConfigError as exc:
        assert str(exc).startswith(SOURCE + ":"), str(exc)
    else:
        assert isinstance(config, AgentConfig)
        json.dumps(redacted(config))


@settings(max_examples=examples(300), deadline=None)
@given(st.text())
def test_fuzz_arbitrary_text(text: str) -> None:
    """Any text gives an AgentConfig or a ConfigError that starts with the source name."""
    _outcome(text)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCUMENTS, st.sampled_from([None, True]))
def test_fuzz_yaml_structures(document: dict[str, Any], flow: bool | None) -> None:
    """YAML built from config keys and odd values never raises anything but ConfigError."""
    _outcome(yaml.safe_dump(document, default_flow_style=flow, allow_unicode=True))


def test_cluster_manager_keys() -> None:
    """`spark.master_ui_port` (8080 unless set) and `spark.yarn_resourcemanager_url` are read;
    the URL's credentials never reach the redacted view that logs and status show."""
    assert parse("lineage:\n").spark.master_ui_port == 8080
    assert parse("lineage:\n").spark.yarn_resourcemanager_url is None
    config = parse(
        "lineage:\nspark:\n  master_ui_port: 8990\n"
        "  yarn_resourcemanager_url: http://ops:s3cret@rm.example.com:8088\n"
    )
    assert config.spark.master_ui_port == 8990
    assert config.spark.yarn_resourcemanager_url == "http://ops:s3cret@rm.example.com:8088"
    assert "s3cret" not in json.dumps(redacted(config))
    assert error_of("lineage:\nspark: {master_ui_port: 0}\n") == (
        "config.yaml:2: spark.master_ui_port: expected an integer from 1 to 65535, got 0"
    )
    assert error_of("lineage:\nspark: {yarn_resourcemanager_url: rm:8088}\n") == (
        "config.yaml:2: spark.yarn_resourcemanager_url: expected an absolute http:// or https:// "
        "URL, got 'rm:8088'"
    )
