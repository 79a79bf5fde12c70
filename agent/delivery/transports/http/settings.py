"""The HTTP transport's settings rules: endpoints, custom headers, the bearer token and the TLS
context. The transport applies them when it is built and `config check` runs them beforehand,
so both refuse the same settings with the same words. Errors are `StartError`s naming the
config key (and for the token the environment variable), never a secret's value."""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from typing import Final

import httpx

from agent.config.model import AUTH_HEADERS, HttpAuth, HttpConfig
from agent.delivery.transports.http.proxy import check_proxy
from agent.errors import StartError


def check_endpoint(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """Validate the endpoints and read the bearer token; return the token, or None without auth.

    Raises StartError naming the config key (and for the token the environment variable,
    never its value).
    """
    token = read_token(config, environ)
    check_urls(config)
    check_headers(config)
    check_proxy(config, environ)
    return token


def read_token(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The static bearer token (`api_key`, or the variable `auth.token_env`); None without
    auth, or for a token endpoint's auth, whose secret is checked here (`read_secret`).
    StartError names the variable (never its value) when it is unset, empty or malformed."""
    if config.auth is None:
        return None
    if config.auth.type in ("jwt", "oauth2"):
        read_secret(config.auth, environ)
        return None
    return read_secret(config.auth, environ)


def read_secret(auth: HttpAuth, environ: Mapping[str, str] = os.environ) -> str:
    """The token (bearer, api_key), the API key (jwt) or the client secret (oauth2): given
    by the client's configuration, else read from the variable the agent's names."""
    if auth.type == "oauth2":
        given, variable, key = auth.client_secret, auth.client_secret_env, "client_secret_env"
    else:
        given, variable, key = auth.api_key, auth.token_env, "token_env"
    if given is not None:  # the client's apiKey or clientSecret, checked when it was read
        return given.reveal()
    key = f"lineage.http.auth.{key}"
    if variable is None:
        raise StartError(f"{key}: required key is missing")
    raw = environ.get(variable)
    if raw is None:
        raise StartError(f"{key}: environment variable {variable} is not set")
    token = raw.strip()
    if not token:
        raise StartError(f"{key}: environment variable {variable} is empty")
    if not all("!" <= char <= "~" for char in token):
        raise StartError(
            f"{key}: environment variable {variable} holds characters that are not "
            "allowed in a bearer token (only visible ASCII)"
        )
    return token


def check_urls(config: HttpConfig) -> None:
    """The endpoint rules the transport applies (`check_url`), for both endpoints."""
    check_url("lineage.http.endpoint", config.endpoint, auth=config.auth is not None)
    if config.batch_endpoint is not None:
        check_url(
            "lineage.http.batch_endpoint", config.batch_endpoint, auth=config.auth is not None
        )


#: Headers the transport writes itself: a custom one of these names would break the framing
#: or the auth rules, so it is refused.
_OWN_HEADERS: Final = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "expect",
        "content-encoding",
        "content-type",
        "connection",
    }
)
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: Words in a header's name that mark its value as a credential (X-Api-Key, X-Auth-Token,
#: Cookie): those values are kept out of every log line, other values (X-Env) are not.
_CREDENTIAL_WORDS: Final = (
    "auth",
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "credential",
    "cookie",
    "session",
    "signature",
)


def secret_headers(config: HttpConfig) -> list[str]:
    """The values of the custom headers whose names look like credentials, for the log
    scrubber."""
    return [
        value
        for name, value in config.headers.items()
        if any(word in name.lower() for word in _CREDENTIAL_WORDS)
    ]


def check_headers(config: HttpConfig) -> None:
    """Custom headers: valid names and values, none the transport writes itself, and no
    `Authorization` beside `auth`, no credential header to an http:// endpoint. Errors name
    the header, never its value."""
    urls = (config.endpoint, config.batch_endpoint)
    plain_http = any(url is not None and httpx.URL(url).scheme != "https" for url in urls)
    for name, value in config.headers.items():
        key = f"lineage.http.headers.{name}"
        if not _TOKEN.fullmatch(name):
            raise StartError(f"{key}: not a valid header name")
        if name.lower() in _OWN_HEADERS:
            raise StartError(f"{key}: the transport sets this header itself")
        if name.lower() == "authorization" and config.auth is not None:
            raise StartError(f"{key}: set either this header or lineage.http.auth, not both")
        if name.lower() in AUTH_HEADERS and plain_http:
            raise StartError(
                f"{key}: a credential header needs https:// endpoints; refusing to send it"
                " over http"
            )
        if not all(" " <= char <= "~" or char == "\t" for char in value) or value != value.strip():
            raise StartError(f"{key}: the value holds characters a header may not have")


def check_url(key: str, url: str, *, auth: bool) -> httpx.URL:
    """`url` parsed: http(s) with a host, no credentials, https when a token goes along."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise StartError(f"{key}: not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise StartError(f"{key}: expected an http:// or https:// URL with a host")
    if parsed.userinfo:
        raise StartError(f"{key}: credentials in the URL are not supported; use lineage.http.auth")
    if auth and parsed.scheme != "https":
        raise StartError(
            f"{key}: bearer auth needs an https:// endpoint; refusing to send a token over http"
        )
    return parsed


def tls_context(
    ca_file: str | None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """The system's trusted CAs, plus `ca_file` when given; verification and hostname checks on;
    with `cert` and `key`, the client certificate an mTLS collector asks for."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise StartError(
                f"lineage.http.ca_file: cannot load CA bundle {ca_file}: {exc}"
            ) from None
    if cert is not None and key is not None:
        try:
            context.load_cert_chain(certfile=cert, keyfile=key)
        except (OSError, ssl.SSLError) as exc:
            # The error's own words name the file or the mismatch, never the key's contents.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise StartError(
                f"lineage.http.cert: cannot load client certificate {cert} with key {key}: {reason}"
            ) from None
    return context
