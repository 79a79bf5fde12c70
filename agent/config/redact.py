"""URLs fit for a log line, status or `config check`: every credential a URL can carry
replaced by `***`. Here, below the state and service layers, so that the config view, the
PostgreSQL store and preflight share one rule; and the whole config as such a view
(`redacted`): secrets, header values and secret producer settings as `***`."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, get_args, get_origin
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from agent.config.model import AgentConfig, Kind, Secret, fields_of, is_secret_setting


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


def redacted(config: AgentConfig) -> dict[str, Any]:
    """The config as a JSON-able dict for logs and status: tuples become lists, and URLs lose
    their user info and query values (a collector URL could carry a key there)."""
    return _plain_section(config)


def _kind_of(hint: Any) -> Kind | None:
    if get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = (a for a in get_args(hint) if a is not type(None))
    if get_origin(hint) is Annotated:
        return next((e for e in get_args(hint)[1:] if isinstance(e, Kind)), None)
    return None


def _plain_section(section: object) -> dict[str, Any]:
    cls: type = type(section)
    hints = fields_of(cls, yaml_only=False)
    written = fields_of(cls)
    return {
        name: _plain(getattr(section, name), hint, name)
        for name, hint in hints.items()
        # a field that is no YAML key shows only when set (`api_key`, `origins`)
        if name in written or getattr(section, name) or name == "source"
    }


def _plain(value: Any, hint: Any, name: str = "") -> Any:
    if isinstance(value, Secret):
        return "***"
    if isinstance(value, Mapping):
        # every header value may be a credential (Authorization, X-Api-Key); producer
        # settings only by name
        return {
            key: "***" if name == "headers" or is_secret_setting(key) else text
            for key, text in value.items()
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain_section(value)
    if isinstance(value, tuple):
        (item_hint, _) = get_args(hint)
        return [_plain(item, item_hint) for item in value]
    if isinstance(value, str) and _kind_of(hint) is Kind.HTTP_URL:
        return redact_http_url(value)
    if isinstance(value, str) and _kind_of(hint) is Kind.POSTGRES_URL:
        return redact_url(value)
    return value
