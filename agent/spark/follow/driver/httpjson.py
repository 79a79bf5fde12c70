"""A JSON document over HTTP from a server the agent does not trust (a driver's UI, a cluster
manager): bounded in time and size, read as sent (no decompression), never redirected, and
no body for anything but a 200 answer holding JSON, so a hostile or broken server costs a
bounded wait and no error. Whether the connection was made at all is told apart: a port
that refuses is no answer, and the caller may try the next one."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

MAX_BODY: Final = 4 * 1024 * 1024  # a master's /json/ with 200 completed apps is ~150 KiB


@dataclass(frozen=True, slots=True)
class Reply:
    """What one request gave: whether a connection was made, and the JSON body or None."""

    connected: bool
    body: Any = None
    status: int = 0


def get_json(client: httpx.Client, url: str, *, budget: float) -> Any:
    """The JSON body at `url`, or None for any failure, within `budget` seconds (give or
    take one read of the client's timeout) and MAX_BODY bytes."""
    return fetch_json(client, url, budget=budget).body


def fetch_json(
    client: httpx.Client,
    url: str,
    *,
    budget: float,
    host: str | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> Reply:
    """`get_json`, saying whether a connection was made; `host` is the Host header (for a
    URL holding the checked address), `extensions` httpx's (TLS's `sni_hostname`)."""
    deadline = time.monotonic() + budget
    headers = {"Accept-Encoding": "identity"}
    if host is not None:
        headers["Host"] = host
    status = 0
    try:
        with client.stream(
            "GET", url, headers=headers, follow_redirects=False, extensions=dict(extensions or {})
        ) as response:
            status = response.status_code
            if status != 200:
                return Reply(True, None, status)
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                return Reply(True, None, status)
            length = response.headers.get("content-length", "0")
            if not length.isdigit() or int(length) > MAX_BODY:
                return Reply(True, None, status)
            body = bytearray()
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > MAX_BODY or time.monotonic() > deadline:
                    return Reply(True, None, status)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        return Reply(False)
    except httpx.HTTPError:
        return Reply(True, None, status)
    try:
        return Reply(True, json.loads(body), status)
    except (ValueError, RecursionError):  # also UnicodeDecodeError; `[[[[…` 4 MiB deep
        return Reply(True, None, status)
