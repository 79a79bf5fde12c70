"""What the HTTP transport sends as `Authorization`: a static bearer token (`bearer`,
`api_key`), or a token fetched from a token endpoint the way openlineage-python's `jwt` and
`oauth2` providers fetch it (an API key exchanged, or the OAuth 2.0 client credentials grant,
RFC 6749 4.4), cached and fetched again `token_refresh_buffer` before it expires.

A token that cannot be had is `NotSent` (connect): the request was never begun, so the batch
stays queued and leaves once the endpoint answers again. Secrets and tokens never appear in
an error; each token is handed to `on_token` (the log scrubber) before it is used."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol
from urllib.parse import quote_plus

import httpx

from agent.config.model import HttpAuth
from agent.errors import NotSent

#: The client's token fields when none are configured.
_DEFAULT_FIELDS: Final = {"jwt": ("token", "access_token"), "oauth2": ("access_token",)}


class Authorization(Protocol):
    """The `Authorization` header of the next request."""

    def constant(self) -> bytes | None:
        """The value when it never changes (sent with no work per request), else None."""

    async def value(self) -> bytes:
        """The value for the next request; raises `NotSent` when none can be had."""

    def rejected(self, value: bytes) -> None:
        """The collector answered 401 to a request that carried `value`."""


class StaticBearer:
    """One token for every request, read at start (and at reload)."""

    def __init__(self, token: str) -> None:
        self._value = f"Bearer {token}".encode("ascii")

    def constant(self) -> bytes:
        return self._value

    async def value(self) -> bytes:
        return self._value

    def rejected(self, value: bytes) -> None:
        """Nothing to do: a static token is what it is."""


class TokenEndpoint:
    """A token from `auth.token_endpoint`, shared by every request until shortly before it
    expires; concurrent requests that find none wait on one fetch."""

    def __init__(
        self,
        auth: HttpAuth,
        secret: str,
        context: ssl.SSLContext,
        timeout: float,
        *,
        on_token: Callable[[str], None] = lambda token: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`secret` is the API key (jwt) or the client secret (oauth2); `clock` counts
        seconds (the token's lifetime is measured on it)."""
        if auth.token_endpoint is None:
            raise ValueError("lineage.http.auth.token_endpoint: required for jwt and oauth2")
        self._url = auth.token_endpoint
        self._origin = str(httpx.URL(self._url).copy_with(path="/", query=None))[:-1]
        self._form, self._headers = _request(auth, secret)
        self._fields = auth.token_fields or _DEFAULT_FIELDS[auth.type]
        self._expires_field = auth.expires_in_field
        self._buffer = auth.token_refresh_buffer
        self._context = context
        self._timeout = timeout
        self._on_token = on_token
        self._clock = clock
        self._current: bytes | None = None
        self._fresh_until = 0.0
        self._fetch: asyncio.Future[bytes] | None = None

    def constant(self) -> None:
        return None

    async def value(self) -> bytes:
        if self._current is not None and self._clock() < self._fresh_until:
            return self._current
        fetch = self._fetch
        if fetch is None or fetch.done():  # done: all who waited on it gave up before it ended
            fetch = self._fetch = asyncio.ensure_future(self._fetch_token())
            # A failure nobody waits for any more is not an unhandled error.
            fetch.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            # Shielded: one request given up (cancelled, timed out) does not end the fetch
            # the others wait on.
            return await asyncio.shield(fetch)
        finally:
            if fetch.done() and self._fetch is fetch:
                self._fetch = None

    def rejected(self, value: bytes) -> None:
        # Only the token that was refused is dropped: answers to requests that carried it
        # and come after a new one was fetched leave the new one alone.
        if value == self._current:
            self._current = None

    async def _fetch_token(self) -> bytes:
        began = self._clock()
        try:
            async with (
                asyncio.timeout(self._timeout),
                httpx.AsyncClient(verify=self._context, trust_env=False) as client,
            ):
                response = await client.post(self._url, data=self._form, headers=self._headers)
        except (httpx.HTTPError, TimeoutError) as exc:
            # The exception's name and words, never the request's: they hold the secret.
            what = f"{type(exc).__name__} {exc}".strip()
            raise NotSent("connect", f"token endpoint {self._origin}: {what}") from None
        if not 200 <= response.status_code < 300:
            raise NotSent("connect", f"token endpoint {self._origin}: HTTP {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            answer = None
        token = _pick(answer, self._fields) if isinstance(answer, dict) else None
        if token is None or not token or not all("!" <= char <= "~" for char in token):
            raise NotSent(
                "connect",
                f"token endpoint {self._origin}: no token in the answer (fields tried:"
                f" {', '.join(self._fields)})",
            )
        self._on_token(token)
        lifetime = _lifetime(answer, self._expires_field, token)
        # No lifetime: like the client, the token is used once and fetched again.
        self._fresh_until = began + lifetime - self._buffer if lifetime is not None else began
        self._current = f"Bearer {token}".encode("ascii")
        return self._current


def _request(auth: HttpAuth, secret: str) -> tuple[dict[str, str], dict[str, str]]:
    """The form and headers of the token request, as the client sends them."""
    if auth.type == "jwt":
        form = {"grant_type": auth.grant_type, "response_type": auth.response_type}
        return {**form, "apikey": secret}, {}
    form = {"grant_type": "client_credentials"}
    if auth.scope:
        form["scope"] = auth.scope
    client_id = auth.client_id or ""
    if auth.client_auth_method == "client_secret_post":
        return {**form, "client_id": client_id, "client_secret": secret}, {}
    # RFC 6749 2.3.1: both are form-encoded before they are joined and base64-encoded.
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return form, {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}


def _pick(answer: Mapping[str, Any], fields: tuple[str, ...]) -> str | None:
    """The first of `fields` in the answer, by exact name, then whatever its case."""
    for name in fields:
        found = next((k for k in answer if k == name), None) or next(
            (k for k in answer if k.lower() == name.lower()), None
        )
        if found is not None:
            value = answer[found]
            return None if value is None else str(value).strip()
    return None


def _lifetime(answer: Mapping[str, Any], field: str, token: str) -> float | None:
    """Seconds the token lives: the answer's `field` (also spelled expiresIn), else the `exp`
    claim of a JWT, else None."""
    squashed = field.lower().replace("_", "")
    for name, value in answer.items():
        if name.lower().replace("_", "") == squashed:
            try:
                return float(value)
            except (TypeError, ValueError):
                return None
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return float(claims["exp"]) - time.time()
    except (ValueError, TypeError, KeyError, binascii.Error):
        return None
