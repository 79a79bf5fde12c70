"""The proxy variables, as curl and urllib read them, for the HTTP transport.

`HTTPS_PROXY` (for an https collector), `HTTP_PROXY` (for an http one) or `ALL_PROXY`, lower
case first, name an `http://[user:password@]host:port` proxy; `NO_PROXY` lists hosts reached
directly (urllib's rules: domain suffixes, `*`, host:port). A collector on loopback is always
reached directly, as Go's net/http does. An https collector is reached through a `CONNECT`
tunnel, TLS (and its verification) end to end with the collector; an http one through a
forward request in absolute form. Any other proxy (https://, socks) is refused at start and
by `config check`, naming the variable, never its value (it may carry a password).

Errors: `StartError` (a proxy that cannot be used); `ProxyRefused` (the proxy answered a
`CONNECT` with anything but 2xx, or closed: nothing of the events left).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import httpx

from agent.config.model import HttpConfig
from agent.errors import StartError

_MAX_ANSWER: Final = 16 * 1024  # bytes of a CONNECT answer's head


@dataclass(frozen=True, slots=True)
class Proxy:
    """Where requests to one collector go first."""

    host: str
    port: int
    variable: str  # the environment variable that named it, for messages
    authorization: bytes | None = None  # Proxy-Authorization (Basic); a secret

    @property
    def origin(self) -> str:
        return f"proxy {self.host}:{self.port} ({self.variable})"


class ProxyRefused(Exception):
    """The proxy did not open the tunnel; the message says what it answered."""


def proxy_for(url: httpx.URL, environ: Mapping[str, str]) -> Proxy | None:
    """The proxy the variables in `environ` name for `url`, or None to connect directly.
    StartError when the variable names a proxy this transport cannot use."""
    variable = _variable(environ, url.scheme)
    if variable is None or _loopback(url.host):
        return None
    host = url.host if url.port is None else f"{url.host}:{url.port}"
    # urllib's NO_PROXY rules, given our mapping; public, but missing from typeshed's stubs.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if bypass(host, {"no": environ.get("no_proxy") or environ.get("NO_PROXY") or ""}):
        return None
    text = environ[variable].strip()
    try:
        parsed = httpx.URL(text if "://" in text else f"http://{text}")
    except httpx.InvalidURL:
        raise StartError(f"{variable}: not a valid proxy URL") from None
    if parsed.scheme != "http" or not parsed.host:
        raise StartError(
            f"{variable}: only an http:// proxy can carry the events"
            f" (this one is {parsed.scheme}://); exempt the collector with NO_PROXY or"
            " point the variable at an http:// proxy"
        )
    authorization = None
    if parsed.username or parsed.password:
        # httpx.URL gives user and password already percent-decoded
        pair = f"{parsed.username}:{parsed.password}".encode()
        authorization = b"Basic " + base64.b64encode(pair)
    return Proxy(parsed.host, parsed.port or 80, variable, authorization)


def check_proxy(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> None:
    """StartError when a proxy variable names a proxy the transport cannot use for one of
    the collector's URLs (see `agent.delivery.transports.http.proxy`)."""
    for url in (config.endpoint, config.batch_endpoint):
        if url is not None:
            proxy_for(httpx.URL(url), environ)


def proxy_secrets(config: HttpConfig, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The proxies' credentials (header value and password), to keep out of every log line."""
    found: list[str] = []
    for url in (config.endpoint, config.batch_endpoint):
        proxy = None if url is None else proxy_for(httpx.URL(url), environ)
        header = secret_of(proxy)
        if proxy is not None and header is not None:
            found.append(header)
            pair = base64.b64decode(header.removeprefix("Basic ")).decode()
            found.append(pair.partition(":")[2])
    return found


def secret_of(proxy: Proxy | None) -> str | None:
    """The proxy's credentials as they would appear in a header, to keep out of logs."""
    if proxy is None or proxy.authorization is None:
        return None
    return proxy.authorization.decode("ascii")


async def open_tunnel(
    proxy: Proxy, host: str, port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection through `proxy` to host:port (`CONNECT`); OSError when the proxy cannot
    be reached, ProxyRefused when it does not open the tunnel. The caller bounds the time."""
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    try:
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n".encode("ascii")
        if proxy.authorization is not None:
            head += b"Proxy-Authorization: " + proxy.authorization + b"\r\n"
        writer.write(head + b"\r\n")
        await writer.drain()
        try:
            answer = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            raise ProxyRefused("it closed the connection") from None
        except asyncio.LimitOverrunError:
            raise ProxyRefused("its answer was too long") from None
        if len(answer) > _MAX_ANSWER:
            raise ProxyRefused("its answer was too long")
        status_line = answer.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        status = parts[1] if len(parts) > 1 else ""
        if not (status.isdigit() and status.startswith("2")):
            raise ProxyRefused(f"it answered {status_line[:80]!r}")
    except BaseException:
        writer.close()
        raise
    return reader, writer


def _variable(environ: Mapping[str, str], scheme: str) -> str | None:
    """The name of the variable that would proxy a `scheme` URL, lower case first."""
    for base in (f"{scheme}_proxy", "all_proxy"):
        for name in (base, base.upper()):
            if environ.get(name, "").strip():
                return name
    return None


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
