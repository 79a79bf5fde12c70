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
#: The client's auth keys (lowercased, both its spellings) and the agent's own, by the
#: `HttpAuth` field each sets; secrets apart, they are kept as `Secret`s.
AUTH_FIELDS: Final = {
    "tokenendpoint": "token_endpoint",
    "token_endpoint": "token_endpoint",
    "clientid": "client_id",
    "client_id": "client_id",
    "scope": "scope",
    "clientauthmethod": "client_auth_method",
    "client_auth_method": "client_auth_method",
    "granttype": "grant_type",
    "grant_type": "grant_type",
    "responsetype": "response_type",
    "response_type": "response_type",
    "expiresinfield": "expires_in_field",
    "expires_in_field": "expires_in_field",
    "token_env": "token_env",
    "client_secret_env": "client_secret_env",
}
AUTH_SECRETS: Final = {
    "apikey": "api_key",
    "api_key": "api_key",
    "clientsecret": "client_secret",
    "client_secret": "client_secret",
}
AUTH_KEYS: Final = (
    "type",
    *AUTH_FIELDS,
    *AUTH_SECRETS,
    "tokenfields",
    "token_fields",
    "tokenrefreshbuffer",
    "token_refresh_buffer",
)
