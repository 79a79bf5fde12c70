"""A JSON document over HTTP from a server the agent does not trust (a driver's UI, a cluster
manager): bounded in time and size, read as sent (no decompression), and None for anything
but a 200 answer holding JSON, so a hostile or broken server costs a bounded wait and no
error."""

from __future__ import annotations

import json
import time
from typing import Any, Final

import httpx

MAX_BODY: Final = 4 * 1024 * 1024  # a master's /json/ with 200 completed apps is ~150 KiB


def get_json(client: httpx.Client, url: str, *, budget: float) -> Any:
    """The JSON body at `url`, or None for any failure, within `budget` seconds (give or
    take one read of the client's timeout) and MAX_BODY bytes."""
    deadline = time.monotonic() + budget
    try:
        with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response:
            if response.status_code != 200:
                return None
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                return None
            length = response.headers.get("content-length", "0")
            if not length.isdigit() or int(length) > MAX_BODY:
                return None
            body = bytearray()
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > MAX_BODY or time.monotonic() > deadline:
                    return None
    except httpx.HTTPError:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # also UnicodeDecodeError; `[[[[…` 4 MiB deep
        return None
