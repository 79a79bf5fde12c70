"""Configuration: frozen dataclasses per YAML section, their field kinds and bounds.

The dataclasses are the schema: each field's type says how its YAML value is read
(`Literal` choices, `X | None`, tuples, nested sections), and `Annotated` metadata adds
what a plain type cannot say: a `Kind` with its own explicit parser (durations, paths, URLs,
environment variable names, listen addresses) and `Bounds` for numbers. `agent.config.loader`
reads YAML into them (`load_config`) and names file, line and key in every `ConfigError`.
All paths in a loaded config are absolute: relative ones are taken from the config file's
directory, so the daemon's working directory never matters.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Final, Literal

TransportName = Literal["http", "file", "kafka", "console"]


class Kind(enum.Enum):
    """How a field's YAML value is read when its plain type is not enough."""

    DURATION = enum.auto()  # 5s, 500ms, 2m, 1h, 1d, 1.5s or bare seconds -> float seconds
    PATH = enum.auto()  # local path or file:// URL; relative to the config file's directory
    LOG_DIR = enum.auto()  # a PATH, or the URL of a directory on a store Spark writes logs to
    HTTP_URL = enum.auto()  # absolute http:// or https:// URL
    ENV_NAME = enum.auto()  # environment variable name (the value is never read here)
    LISTEN = enum.auto()  # host:port or [v6]:port; null, false or '' disable
    TAG = enum.auto()  # key:value (the value may hold more colons)
    PROPERTY = enum.auto()  # a Spark property name: dotted words (spark.executor.memory)
    POSTGRES_URL = (
        enum.auto()
    )  # postgresql:// or postgres:// URL (never echoed: it may hold a secret)
    HOST_PATTERN = enum.auto()  # a host name, *.domain, an IP address or a CIDR network


@dataclass(frozen=True, slots=True)
class Bounds:
    """Inclusive range of a number field; `low_open` excludes `low` itself (timeouts > 0).

    Every number of the config has both ends (`tests/test_config.py` checks it): a value the
    loader accepts is one every part of the agent can hold (a queue, a gauge, a timer).
    """

    low: float
    high: float
    low_open: bool = False


MINUTE: Final = 60.0
HOUR: Final = 3600.0
DAY: Final = 86400.0
LocalPath = Annotated[str, Kind.PATH]
LogDir = Annotated[str, Kind.LOG_DIR]
HttpUrl = Annotated[str, Kind.HTTP_URL]
EnvName = Annotated[str, Kind.ENV_NAME]
Listen = Annotated[str, Kind.LISTEN]
Tag = Annotated[str, Kind.TAG]
PostgresUrl = Annotated[str, Kind.POSTGRES_URL]
SparkProperty = Annotated[str, Kind.PROPERTY]
HostPattern = Annotated[str, Kind.HOST_PATTERN]

#: The Spark properties the application's `lineageAgent_sparkProperties` facet shows by
#: default: how and where it ran and what it was given, never a secret.
DEFAULT_PROPERTIES_FACET: Final = (
    "spark.master",
    "spark.submit.deployMode",
    "spark.app.name",
    "spark.driver.memory",
    "spark.executor.memory",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.dynamicAllocation.enabled",
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled",
    "spark.sql.catalogImplementation",
    "spark.yarn.queue",
    "spark.kubernetes.namespace",
)


class Secret:
    """A credential taken from openlineage.yml or the environment: its text is `reveal()`ed
    only where it is sent, and every other way of showing it says `***`."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def reveal(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


@dataclass(frozen=True, slots=True)
class HttpAuth:
    """`bearer`/`api_key`: one static token. `jwt`/`oauth2` (the client's token providers): a
    token fetched from `token_endpoint`, cached, fetched again `token_refresh_buffer` before it
    expires; `jwt` exchanges an API key (`token_env`), `oauth2` is the client credentials grant
    (`client_id` and the secret in `client_secret_env`)."""

    # `api_key` is the OpenLineage client's name for the same `Authorization: Bearer` header
    type: Literal["bearer", "api_key", "jwt", "oauth2"]
    # the token (bearer, api_key) or the API key exchanged (jwt); unless `api_key` is given
    token_env: EnvName | None = None
    # the client's `apiKey` (openlineage.yml, OPENLINEAGE_API_KEY); never a key of this file
    api_key: Secret | None = field(default=None, metadata={"yaml": False})
    token_endpoint: HttpUrl | None = None  # jwt, oauth2: where the token is asked for
    client_id: str | None = None  # oauth2
    client_secret_env: EnvName | None = None  # oauth2: the variable holding the client secret
    # the client's `clientSecret`, from its own configuration; never a key of this file
    client_secret: Secret | None = field(default=None, metadata={"yaml": False})
    scope: str | None = None  # oauth2
    # oauth2: the credentials in a Basic header, or in the form
    client_auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    grant_type: str = "urn:ietf:params:oauth:grant-type:jwt-bearer"  # jwt
    response_type: str = "token"  # jwt
    # the answer's fields holding the token, tried in order; () is the client's default
    # (jwt: token, access_token; oauth2: access_token)
    token_fields: tuple[str, ...] = ()
    expires_in_field: str = "expires_in"
    token_refresh_buffer: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 120.0


Retries = Annotated[int, Bounds(0, 100)]


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """`lineage.http.retry`: the OpenLineage client's names (urllib3's `Retry`) with a
    daemon's defaults; what the agent does with them is `agent.delivery.retry`'s docstring."""

    total: Retries = 10  # retries of a request the collector did not store, at most
    connect: Retries | None = None  # accepted; moot: what never left stays queued anyway
    read: Retries | None = None  # accepted; never made: the collector may have stored it
    status: Retries | None = None  # retries on a status of status_forcelist (if < total)
    backoff_factor: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 0.5
    backoff_max: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 30.0
    # the statuses that say "not stored, try later"
    status_forcelist: tuple[Annotated[int, Bounds(100, 599)], ...] = (429, 500, 502, 503, 504)
    allowed_methods: tuple[str, ...] = ("HEAD", "POST")  # retried only when POST is listed
    respect_retry_after_header: bool = True  # within backoff_max
    backoff_jitter: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 1.0  # random seconds added


@dataclass(frozen=True, slots=True)
class HttpConfig:
    endpoint: HttpUrl
    # 10 s: three times the slowest answer of a Marquez sharing its node with Spark (3.3 s)
    # and twice the slowest while it restarted (5.1 s); see docs/operations/marquez.md.
    timeout: Annotated[float, Kind.DURATION, Bounds(0, 10 * MINUTE, low_open=True)] = 10.0
    auth: HttpAuth | None = None
    ca_file: LocalPath | None = None  # extra CA bundle for TLS verification (verification stays on)
    compression: Literal["none", "gzip"] = "none"
    # 1: one event per POST to `endpoint`; >1: POST arrays to `batch_endpoint`
    batch_size: Annotated[int, Bounds(1, 10_000)] = 1
    batch_endpoint: HttpUrl | None = None  # default: `endpoint` + "/batch"
    # requests in flight; events of one run still leave in order
    concurrency: Annotated[int, Bounds(1, 64)] = 4
    # extra request headers (the client's `headers` / `custom_headers`); values never logged
    headers: Mapping[str, str] = field(default_factory=dict)
    cert: LocalPath | None = None  # PEM client certificate for mTLS (with `key`)
    key: LocalPath | None = None  # its PEM private key
    retry: RetryConfig = field(default_factory=RetryConfig)
    # once a POST's body left, how much longer than `timeout` its answer is awaited (the
    # run's next event waits meanwhile); 0: unconfirmed at `timeout`
    late_answer_wait: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 120.0


@dataclass(frozen=True, slots=True)
class FileConfig:
    path: LocalPath = "/var/lib/lineage-agent/events.jsonl"
    # 0 disables rotation; at most 1 TiB
    rotation_size_mb: Annotated[float, Bounds(0, 1024 * 1024)] = 64.0


@dataclass(frozen=True, slots=True)
class KafkaTransportConfig:
    """The OpenLineage client's Kafka transport: a topic and librdkafka producer settings."""

    topic: str
    # librdkafka producer properties as written (bootstrap.servers, security.protocol, sasl.*,
    # ssl.*); values are strings, a read-only mapping
    config: Mapping[str, str] = field(default_factory=dict)
    message_key: str | None = None  # one key for every event; default: the event's runId


#: librdkafka settings that at-most-once delivery fixes (a producer that retries, or retries
#: through idempotence or transactions, may write a record twice), with the one value a
#: config may write for each; `transactional.id` may not be written at all.
KAFKA_FIXED: Final[Mapping[str, str]] = {
    "enable.idempotence": "false",
    "message.send.max.retries": "0",
    "retries": "0",  # librdkafka's alias of message.send.max.retries
}
KAFKA_REFUSED: Final = ("transactional.id",)


def is_secret_setting(name: str) -> bool:
    """Whether a librdkafka property holds a secret (sasl.password, ssl.key.password,
    ssl.key.pem, sasl.jaas.config, sasl.oauthbearer.config, ...): redacted wherever the config
    is shown."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


_SECRET_WORDS: Final = (
    "password",
    "secret",
    "ssl.key.pem",
    "oauthbearer.config",
    "jaas",
    "token",
    "credential",
)


#: Custom headers that carry a credential by definition: like a bearer token, refused with an
#: http:// endpoint.
AUTH_HEADERS: Final = frozenset({"authorization", "proxy-authorization"})


@dataclass(frozen=True, slots=True)
class SpoolConfig:
    """What has not left yet, kept on disk in `state_dir`/spool across restarts and kills."""

    enabled: bool = True
    # bytes on disk at most; an event that would pass it is dropped as `spool_full`
    max_size_mb: Annotated[float, Bounds(1, 1024 * 1024)] = 256.0
    # sync each batch's in-flight mark to disk before it leaves, and what was appended every
    # second: needed only for power cuts (a killed agent's writes are the kernel's already)
    fsync: bool = False


@dataclass(frozen=True, slots=True)
class LineageConfig:
    enabled: bool = True
    namespace: str = "spark"  # job namespace of the emitted runs
    # the seed's names, or (`client_shape`) the OpenLineage client's `{type: ...}` mapping,
    # which `agent.config.client` reads into these names and the sections below
    transport: tuple[TransportName, ...] = field(default=("file",), metadata={"client_shape": True})
    queue_size: Annotated[int, Bounds(0, 1_000_000)] = 1024
    drain_timeout: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 5.0
    http: HttpConfig | None = None
    file: FileConfig = field(default_factory=FileConfig)
    kafka: KafkaTransportConfig | None = None
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    # send a run's terminal event once more, byte-identical, when its HTTP request got no
    # answer (the one exception to at-most-once; consumers de-duplicate by signature)
    resend_unconfirmed_terminal: bool = True
    # the client's `filters` and `tags` (openlineage.yml, OPENLINEAGE__FILTERS, ..._TAGS__*),
    # applied before signing; not keys of this file
    filters: tuple[EventFilter, ...] = field(default=(), metadata={"yaml": False})
    job_tags: tuple[tuple[str, str], ...] = field(default=(), metadata={"yaml": False})
    run_tags: tuple[tuple[str, str], ...] = field(default=(), metadata={"yaml": False})


@dataclass(frozen=True, slots=True)
class EventFilter:
    """One of the OpenLineage client's `filters`: a RunEvent whose job name equals `pattern`
    (`exact`) or matches it from its start (`regex`, RE2 syntax) is not sent."""

    type: Literal["exact", "regex"]
    pattern: str


@dataclass(frozen=True, slots=True)
class SigningConfig:
    # In the state directory, the one place the shipped unit lets the agent write: a node's
    # first start makes its key there (agent.service.nodekey).
    key_path: LocalPath = "/var/lib/lineage-agent/ed25519.key"


@dataclass(frozen=True, slots=True)
class SparkConfig:
    # local paths, or s3://, s3a://, gs://, abfs://, abfss://, hdfs:// URLs
    event_log_dirs: tuple[LogDir, ...] = ("/var/log/spark-events",)
    namespace: str | None = None  # overrides lineage.namespace for Spark runs
    # fallback scan when inotify is unavailable or on network mounts
    poll_interval: Annotated[float, Kind.DURATION, Bounds(0, HOUR, low_open=True)] = 1.0
    # how often logs on a store (URLs above) are listed and read: each look costs requests
    store_poll_interval: Annotated[float, Kind.DURATION, Bounds(0, HOUR, low_open=True)] = 10.0
    # how far back a log on a store is still followed: older single-file logs in a listing
    # are passed over as it pages, never held or read; 0 follows every one
    store_horizon: Annotated[float, Kind.DURATION, Bounds(0, 3650 * DAY)] = 7 * DAY
    # one request to a store, whole (connect, first byte, body), before it is given up
    store_request_timeout: Annotated[float, Kind.DURATION, Bounds(0, HOUR, low_open=True)] = 30.0
    # an in-progress log that has not grown this long is checked
    stale_after: Annotated[float, Kind.DURATION, Bounds(0, 30 * DAY, low_open=True)] = 600.0
    # RUNNING events with live counters; 0 disables
    running_interval: Annotated[float, Kind.DURATION, Bounds(0, DAY)] = 0.0
    emit_empty_executions: bool = False  # SQL executions with no datasets
    # completed logs older than this are skipped at first start; 0 replays every log
    replay_horizon: Annotated[float, Kind.DURATION, Bounds(0, 3650 * DAY)] = DAY
    # replay completed logs (within replay_horizon) after the state database was lost
    replay_existing: bool = False
    # longer event-log lines are counted and skipped
    max_line_bytes: Annotated[int, Bounds(1024, 1024 * 1024 * 1024)] = 64 * 1024 * 1024
    # how long the end of an application run by `lineage-agent exec` waits for the command's
    # exit status once its log ended (then it ends as Spark logged it); 0 does not wait
    exec_verdict_wait: Annotated[float, Kind.DURATION, Bounds(0, HOUR)] = 30.0
    # input-field entries one columnLineage facet may carry (~200 bytes each), so a wide
    # table cannot make a multi-megabyte event; 0 leaves column lineage out
    column_lineage_max_fields: Annotated[int, Bounds(0, 100_000)] = 1000
    # runs of read-only actions (count, collect, show, toPandas): off, they move no data
    emit_read_only_runs: bool = False
    # Spark properties the application's lineageAgent_sparkProperties facet shows; null: none
    properties_facet: tuple[SparkProperty, ...] | None = DEFAULT_PROPERTIES_FACET
    tags: tuple[Tag, ...] | None = None  # key:value tags on every job (the `tags` facet)
    # the History Server's address, for the application facet's link to its page
    history_server_url: HttpUrl | None = None
    # each Structured Streaming micro-batch as a child run of its query run
    streaming_batch_runs: bool = False
    # Kafka bootstrap servers (`host:port[,host:port]`) of the jobs' Kafka reads, which the
    # event log never shows; unset names their topics `kafka://unknown`
    kafka_bootstrap: str | None = None
    # the web UI port of standalone masters (`spark://host:7077` is their RPC port) for
    # logs that do not carry `spark.master.ui.port`: liveness asks the master there
    master_ui_port: Annotated[int, Bounds(1, 65535)] = 8080
    # the YARN ResourceManager's web address (http(s)://host:8088), asked before those the
    # event log names
    yarn_resourcemanager_url: HttpUrl | None = None


@dataclass(frozen=True, slots=True)
class LivenessConfig:
    # the hosts whose driver UIs and cluster managers liveness may ask: names, *.domain
    # wildcards, IP addresses and CIDR networks; empty: every host but link-local and cloud
    # metadata addresses, which are never asked
    allowed_hosts: tuple[HostPattern, ...] = ()
    # requests per second for all liveness lookups together (a token bucket of as many)
    max_requests_per_second: Annotated[float, Bounds(0.1, 1000)] = 10.0


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    listen: Listen | None = "127.0.0.1:9464"  # None disables the endpoint


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    lineage: LineageConfig = field(default_factory=LineageConfig)  # required in a file
    signing: SigningConfig = field(default_factory=SigningConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    liveness: LivenessConfig = field(default_factory=LivenessConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    state_dir: LocalPath = "/var/lib/lineage-agent"
    # State in PostgreSQL instead of SQLite in state_dir: several agents share one log store.
    state_url: PostgresUrl | None = None
    state_password_file: LocalPath | None = None  # else PGPASSWORD / PGPASSFILE / ~/.pgpass
    # How long an application stays owned by an agent that stops renewing its lease.
    state_lease: Annotated[float, Kind.DURATION, Bounds(1, HOUR)] = 30.0
    control_socket: LocalPath = "/run/lineage-agent/control.sock"
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    # the file this was loaded from; not a YAML key
    source: str = field(default="<defaults>", metadata={"yaml": False})
    # where each lineage setting taken from the OpenLineage client's conventions came from:
    # (dotted key, `file:line` or an environment variable's name); not a YAML key
    origins: tuple[tuple[str, str], ...] = field(default=(), metadata={"yaml": False})


@cache
def fields_of(cls: type, *, yaml_only: bool = True) -> dict[str, Any]:
    """Fields of a section and their types, in declaration order; `yaml_only` leaves out
    fields that are not YAML keys (`source`)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(cls)
        if f.metadata.get("yaml", True) or not yaml_only
    }
