"""URLs fit for a log line, status or `config check`: every credential a URL can carry
replaced by `***`. Here, below the state and service layers, so that the config view, the
PostgreSQL store and preflight share one rule."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit


def redact_url(url: str | None) -> str | None:
    """A PostgreSQL URL with any password (user info or `password=` parameter) as `***`."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    query = "&".join(
        "password=***" if item.lower().startswith("password=") else item
        for item in parts.query.split("&")
    )
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_http_url(url: str) -> str:
    """An endpoint URL with its user info and every query value as `***`: any of them may be a
    credential (`?api_key=`)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(f"{name}=***" for name, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(netloc=netloc, query=query))
