"""The OpenLineage client's transport types: those the agent reads (and the keys each
accepts, in the client's spellings and the agent's own), and those it refuses, with why."""

from __future__ import annotations

from typing import Final

DEFAULT_ENDPOINT: Final = "api/v1/lineage"
TYPES: Final = ("http", "async_http", "kafka", "console", "file", "composite")
#: The client's other transport types, refused at start and by `config check`, and why.
REFUSED: Final = {
    "msk_iam": "needs AWS IAM signing for SASL/OAUTHBEARER, which the agent does not ship;"
    " use type kafka with SASL/SCRAM or mTLS settings in config",
    "transform": "rewrites events with Python code loaded by name; the agent signs the events"
    " it translated and runs no code from its configuration",
    "datadog": "it is an http transport with an api key to Datadog's intake for a site; write"
    " that http transport instead",
    "gcplineage": "needs Google's Data Lineage client library, which the agent does not ship;"
    " use its OpenLineage http endpoint with type http",
    "amazon_datazone": "needs the AWS SDK, which the agent does not ship",
    "noop": "sends nothing; set lineage.enabled: false (or OPENLINEAGE_DISABLED=true) instead",
}

HTTP_KEYS: Final = (
    "type",
    "name",
    "url",
    "endpoint",
    "timeout",
    "timeoutinmillis",
    "auth",
    "headers",
    "custom_headers",
    "compression",
    "verify",
    "cert",
    "key",
    "ca_file",
    "batch_size",
    "batch_endpoint",
    "concurrency",
    "retry",
    "late_answer_wait",
    "max_concurrent_requests",  # async_http's: requests in flight, the agent's concurrency
    "max_queue_size",  # async_http's: refused, the queue is lineage.queue_size
)
FILE_KEYS: Final = ("type", "name", "log_file_path", "location", "append", "rotation_size_mb")
KAFKA_KEYS: Final = (
    "type",
    "name",
    "topic",
    "topicname",
    "config",
    "properties",
    "messagekey",
    "message_key",
    "flush",
)
COMPOSITE_KEYS: Final = (
    "type",
    "transports",
    "continue_on_failure",
    "continueonfailure",
    "continue_on_success",
)


def _spellings(*fields: str) -> dict[str, str]:
    """Each field under its snake_case name and the client's camelCase one, lowercased."""
    return {spelling: field for field in fields for spelling in (field.replace("_", ""), field)}


#: The client's auth keys (lowercased, both its spellings) and the agent's own, by the
#: `HttpAuth` field each sets; secrets apart, they are kept as `Secret`s.
AUTH_FIELDS: Final = {
    **_spellings(
        "token_endpoint",
        "client_id",
        "scope",
        "client_auth_method",
        "grant_type",
        "response_type",
        "expires_in_field",
    ),
    "token_env": "token_env",
    "client_secret_env": "client_secret_env",
}
AUTH_SECRETS: Final = _spellings("api_key", "client_secret")
AUTH_KEYS: Final = (
    "type",
    *AUTH_FIELDS,
    *AUTH_SECRETS,
    "tokenfields",
    "token_fields",
    "tokenrefreshbuffer",
    "token_refresh_buffer",
)
