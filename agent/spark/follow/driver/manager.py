"""Asking an application's cluster manager whether it still runs it: a standalone master's
`/json/` page, a YARN ResourceManager's `ws/v1/cluster/apps/<id>`.

Needs nothing but the event log's environment and HTTP, so it also serves drivers on other
nodes and logs read from a shared store, where /proc tells nothing. The answer names this
application id, so a manager that lists it RUNNING proves life and one that lists it
FINISHED, FAILED or KILLED says its driver is gone; a manager that is unreachable, refuses,
does not list the id or answers anything else gives no answer at all.

Where the manager listens, from the log (what Spark writes into the environment event):
- standalone: the hosts of `spark.master` (`spark://h1:7077,h2:7077`); the master's web UI
  port is not in the master URL and a driver's log carries it only when the application set
  `spark.master.ui.port` (a shared spark-defaults.conf does), else `spark.master_ui_port` of
  the agent's config (Spark's default, 8080);
- YARN: `spark.yarn_resourcemanager_url` of the agent's config first, then the AM filter's
  `PROXY_URI_BASES` that Spark sets in YARN mode, `yarn.resourcemanager.webapp.address`
  (as `spark.hadoop.*` or among the log's Hadoop properties), and the RM's host with 8088.
Kubernetes has no manager here: asking its API server needs credentials the agent has not.

Every request: 1 s to connect, 5 s between bytes, 10 s in all, a 4 MiB body read raw (no
decompression), no proxy from the environment, no redirect; at most four addresses per look,
and none after the look took 20 s.
The address shown in answers and logs is `host:port`, never a URL's user or password.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx

from agent import linear
from agent.spark.follow.driver.httpjson import get_json

ManagerKind = Literal["standalone", "yarn"]

DEFAULT_MASTER_UI_PORT: Final = 8080
DEFAULT_RM_WEBAPP_PORT: Final = 8088
TIMEOUT: Final = httpx.Timeout(5.0, connect=1.0)
REQUEST_BUDGET: Final = 10.0  # seconds for one request, however slowly its bytes come
LOOK_BUDGET: Final = 20.0  # no further address is asked once a look took this long
MAX_ADDRESSES: Final = 4

_ALIVE: Final = {
    # ApplicationState of a standalone master; YarnApplicationState of a ResourceManager
    "standalone": frozenset({"WAITING", "RUNNING"}),
    "yarn": frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"}),
}
_DEAD: Final = frozenset({"FINISHED", "FAILED", "KILLED"})
_NAME: Final = {"standalone": "the standalone master", "yarn": "the YARN ResourceManager"}
_HOST: Final = linear.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")
# The RM's id, and an attempt a log's name may add (`application_…_0001_1`).
_YARN_APP: Final = linear.compile(r"(application_[0-9]{1,20}_[0-9]{1,10})(?:_[0-9]{1,10})?")
_VARIABLE: Final = linear.compile(r"\$\{([A-Za-z0-9._-]{1,200})\}")
_PROXY_BASES: Final = (
    "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
)
_WEBAPP: Final = "yarn.resourcemanager.webapp.address"


@dataclass(frozen=True, slots=True)
class ManagerClues:
    """What an event log tells about its application's cluster manager (untrusted input,
    checked and bounded)."""

    kind: ManagerKind | None = None
    masters: tuple[str, ...] = ()  # standalone: the master hosts of spark.master
    master_ui_port: int | None = None  # standalone: spark.master.ui.port, when set
    resourcemanagers: tuple[str, ...] = ()  # yarn: http(s)://host:port of its RM web apps


NO_CLUES: Final = ManagerClues()


@dataclass(frozen=True, slots=True)
class ManagerSettings:
    """The agent's config for finding managers the log does not place exactly."""

    master_ui_port: int = DEFAULT_MASTER_UI_PORT
    resourcemanager_url: str | None = None  # may carry credentials: never shown


DEFAULTS: Final = ManagerSettings()


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One address to ask: its base URL and how answers name it."""

    kind: ManagerKind
    url: str
    shown: str  # host:port


@dataclass(frozen=True, slots=True)
class ManagerAnswer:
    """What a manager said about the application."""

    alive: bool
    state: str
    reason: str  # e.g. "the standalone master at 10.0.0.5:8080 reports it RUNNING"


def clues(props: Mapping[str, Any], hadoop: Mapping[str, Any]) -> ManagerClues:
    """The manager clues of a log from its Spark and Hadoop properties."""
    master = _text(props.get("spark.master")).lower()
    if master.startswith("spark://"):
        hosts = []
        for part in master[len("spark://") :].split(",")[:MAX_ADDRESSES]:
            host = part.rpartition(":")[0] if part.count(":") == 1 or "]" in part else part
            if _HOST.fullmatch(host):
                hosts.append(host)
        return ManagerClues(
            "standalone", tuple(hosts), master_ui_port=_port(props.get("spark.master.ui.port"))
        )
    if master.startswith("yarn"):
        return ManagerClues("yarn", resourcemanagers=_resourcemanagers(props, hadoop))
    return NO_CLUES


def endpoints(found: ManagerClues, settings: ManagerSettings) -> list[Endpoint]:
    """Where to ask, in order, at most MAX_ADDRESSES."""
    out: list[Endpoint] = []
    if found.kind == "standalone":
        port = found.master_ui_port or settings.master_ui_port
        out = [_endpoint("standalone", f"http://{host}:{port}") for host in found.masters]
    elif found.kind == "yarn":
        urls = [settings.resourcemanager_url] if settings.resourcemanager_url else []
        urls += [u for u in found.resourcemanagers if u not in urls]
        out = [_endpoint("yarn", url) for url in urls]
    return [e for e in out if e.shown][:MAX_ADDRESSES]


def ask(where: Sequence[Endpoint], app_id: str) -> ManagerAnswer | None:
    """The first answer about `app_id` of the managers at `where` (blocking: call from a
    thread), or None when none gives one."""
    if not where:
        return None
    deadline = time.monotonic() + LOOK_BUDGET
    with httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=False) as client:
        for endpoint in where:
            answer = _ask_one(client, endpoint, app_id)
            if answer is not None:
                return answer
            if time.monotonic() > deadline:
                break
    return None


def shown_url(url: str) -> str:
    """`host:port` of a URL, without user, password, path or query."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ""
    host = parts.hostname or ""
    if not _HOST.fullmatch(host) and not _HOST.fullmatch(f"[{host}]"):
        return ""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _ask_one(client: httpx.Client, endpoint: Endpoint, app_id: str) -> ManagerAnswer | None:
    if endpoint.kind == "yarn":
        # A log's name may carry an attempt (`application_…_0001_1`): the RM knows the id.
        matched = _YARN_APP.fullmatch(app_id)
        if matched is None:
            return None
        yarn_id = matched[1]
        body = get_json(
            client, f"{endpoint.url}/ws/v1/cluster/apps/{yarn_id}", budget=REQUEST_BUDGET
        )
        app = body.get("app") if isinstance(body, dict) else None
        state = app.get("state") if isinstance(app, dict) and app.get("id") == yarn_id else None
    else:
        body = get_json(client, f"{endpoint.url}/json/", budget=REQUEST_BUDGET)
        state = _standalone_state(body, app_id)
    if not isinstance(state, str):
        return None
    state = state.upper()
    if state in _ALIVE[endpoint.kind]:
        alive = True
    elif state in _DEAD:
        alive = False
    else:
        return None  # UNKNOWN, or anything a future or lying manager says
    return ManagerAnswer(
        alive, state, f"{_NAME[endpoint.kind]} at {endpoint.shown} reports it {state}"
    )


def _standalone_state(body: Any, app_id: str) -> Any:
    # A standby master (HA) answers STANDBY and lists nothing: not an answer.
    if not isinstance(body, dict) or body.get("status") != "ALIVE":
        return None
    for key in ("activeapps", "completedapps"):
        apps = body.get(key)
        if not isinstance(apps, list):
            continue
        for app in apps:
            if isinstance(app, dict) and app.get("id") == app_id:
                return app.get("state")
    return None  # not listed: retired from the master's list, or another master's


def _endpoint(kind: ManagerKind, url: str) -> Endpoint:
    return Endpoint(kind, url.rstrip("/"), shown_url(url))


def _resourcemanagers(props: Mapping[str, Any], hadoop: Mapping[str, Any]) -> tuple[str, ...]:
    found: list[str] = []
    for base in _text(props.get(_PROXY_BASES)).split(",")[:MAX_ADDRESSES]:
        parts = urlsplit(base.strip()) if "://" in base else None
        if parts is not None and parts.scheme in ("http", "https") and parts.netloc:
            found.append(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}")
    for value in (props.get(f"spark.hadoop.{_WEBAPP}"), hadoop.get(_WEBAPP)):
        address = _expand(_text(value), hadoop)
        if address:
            found.append(f"http://{address}")
    for key in ("yarn.resourcemanager.hostname", "yarn.resourcemanager.address"):
        host = _expand(_text(props.get(f"spark.hadoop.{key}") or hadoop.get(key)), hadoop)
        host = host.rpartition(":")[0] if host.count(":") == 1 else host
        if host:
            found.append(f"http://{host}:{DEFAULT_RM_WEBAPP_PORT}")
    unique = [u for i, u in enumerate(found) if u not in found[:i] and shown_url(u)]
    return tuple(unique[:MAX_ADDRESSES])


def _expand(value: str, hadoop: Mapping[str, Any]) -> str:
    """Hadoop's `${name}` substitution, one level (Spark logs Hadoop properties raw)."""
    parts, last = [], 0
    for found in _VARIABLE.finditer(value):
        parts += [value[last : found.start()], _text(hadoop.get(found[1]))]
        last = found.end()
    return "".join(parts) + value[last:]


def _text(value: Any) -> str:
    return value[:1024].strip() if isinstance(value, str) else ""


def _port(value: Any) -> int | None:
    try:
        port = int(str(value)[:8])
    except (TypeError, ValueError):
        return None
    return port if 0 < port <= 65535 else None
