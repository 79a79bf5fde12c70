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

Only a host and a port of each of these values is used, parsed strictly (`agent.config.hosts`): a
value with user info, a query, a fragment, whitespace or control characters is refused
(counted in `ManagerClues.refused`), and so is a path, but for the `/proxy/<application id>`
that Spark writes into PROXY_URI_BASES; the path asked is the agent's own. Requests go
through `outbound.Guard` (no link-local or metadata address, `liveness.allowed_hosts`, the
global rate). The operator's `spark.yarn_resourcemanager_url` is trusted as written, its
credentials sent as basic auth; no Authorization header is ever built from a log.

Every request: 1 s to connect, 5 s between bytes, 10 s in all, a 4 MiB body read raw (no
decompression), no proxy from the environment, no redirect. One request a look: addresses
that refuse the connection are passed over, and only a standby's answer (a standalone master
in STANDBY, a ResourceManager's redirect to the active one) leads to the next address; at
most four addresses, and none after the look took 20 s.
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
from agent.config.hosts import Address, RefusalReason, parse_authority, parse_host, parse_port
from agent.spark.eventlog.names import is_log_name
from agent.spark.follow.driver.httpjson import Reply, fetch_json
from agent.spark.follow.driver.outbound import Guard, Scheme, default_guard

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
# The RM's id, and an attempt a log's name may add (`application_…_0001_1`).
_YARN_APP: Final = linear.compile(r"(application_[0-9]{1,20}_[0-9]{1,10})(?:_[0-9]{1,10})?")
_VARIABLE: Final = linear.compile(r"\$\{([A-Za-z0-9._-]{1,200})\}")
_PROXY_BASES: Final = (
    "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
)
_WEBAPP: Final = "yarn.resourcemanager.webapp.address"
_PROXY_PATH: Final = linear.compile(r"proxy/application_[0-9]{1,20}_[0-9]{1,10}/?")


@dataclass(frozen=True, slots=True)
class ManagerClues:
    """What an event log tells about its application's cluster manager (untrusted input,
    checked and bounded)."""

    kind: ManagerKind | None = None
    masters: tuple[str, ...] = ()  # standalone: the master hosts of spark.master
    master_ui_port: int | None = None  # standalone: spark.master.ui.port, when set
    resourcemanagers: tuple[str, ...] = ()  # yarn: http(s)://host:port of its RM web apps
    refused: tuple[RefusalReason, ...] = ()  # why the log's other values were not taken


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
    trusted: bool = False  # the operator's own URL (its path and credentials used as written)


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
        hosts: list[str] = []
        refused: list[RefusalReason] = []
        for part in master[len("spark://") :].split(",")[:MAX_ADDRESSES]:
            parsed = parse_authority(part)
            if isinstance(parsed, Address):
                hosts.append(parsed.shown(1).rpartition(":")[0])
            else:
                refused.append(parsed)
        ui_port = props.get("spark.master.ui.port")
        return ManagerClues(
            "standalone",
            tuple(hosts),
            master_ui_port=parse_port(ui_port),
            refused=tuple(refused) + (("bad_port",) if ui_port and not parse_port(ui_port) else ()),
        )
    if master.startswith("yarn"):
        urls, rm_refused = _resourcemanagers(props, hadoop)
        return ManagerClues("yarn", resourcemanagers=urls, refused=rm_refused)
    return NO_CLUES


def endpoints(found: ManagerClues, settings: ManagerSettings) -> list[Endpoint]:
    """Where to ask, in order, at most MAX_ADDRESSES."""
    out: list[Endpoint] = []
    if found.kind == "standalone":
        port = found.master_ui_port or settings.master_ui_port
        out = [_endpoint("standalone", f"http://{host}:{port}") for host in found.masters]
    elif found.kind == "yarn":
        if settings.resourcemanager_url:
            url = settings.resourcemanager_url
            out = [Endpoint("yarn", url.rstrip("/"), shown_url(url), trusted=True)]
        out += [_endpoint("yarn", url) for url in found.resourcemanagers]
    return [e for e in out if e.shown][:MAX_ADDRESSES]


def ask(
    where: Sequence[Endpoint], app_id: str, *, guard: Guard | None = None
) -> ManagerAnswer | None:
    """The first answer about `app_id` of the managers at `where` (blocking: call from a
    thread), or None when none gives one."""
    if not where:
        return None
    guard = guard or default_guard()
    if not is_log_name(app_id):
        guard.refuse("bad_app_id", app_id[:64], "the application id")
        return None
    path = _path(where[0].kind, app_id)
    if path is None:
        return None
    deadline = time.monotonic() + LOOK_BUDGET
    with httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=False) as client:
        for endpoint in where:
            reply = _request(client, guard, endpoint, path, app_id)
            if reply is not None and reply.connected:
                answer, standby = _read(endpoint, reply, app_id)
                if answer is not None or not standby:
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
    host = parse_host(parts.hostname or "")
    return host.shown(port) if isinstance(host, Address) else ""


def _path(kind: ManagerKind, app_id: str) -> str | None:
    if kind == "standalone":
        return "/json/"
    # A log's name may carry an attempt (`application_…_0001_1`): the RM knows the id.
    matched = _YARN_APP.fullmatch(app_id)
    return f"/ws/v1/cluster/apps/{matched[1]}" if matched is not None else None


def _request(
    client: httpx.Client, guard: Guard, endpoint: Endpoint, path: str, app_id: str
) -> Reply | None:
    """One request to `endpoint`, or None when the guard refused it."""
    what = "the cluster manager's address"
    if endpoint.trusted:
        if not guard.take(app_id, what):
            return None
        return fetch_json(client, f"{endpoint.url}{path}", budget=REQUEST_BUDGET)
    parts = urlsplit(endpoint.url)
    scheme: Scheme = "https" if parts.scheme == "https" else "http"
    target = guard.target(
        parse_host(parts.hostname or ""), parts.port, app_id=app_id, what=what, scheme=scheme
    )
    if target is None or not guard.take(app_id, what):
        return None
    return target.get_json(client, path, budget=REQUEST_BUDGET)


def _read(endpoint: Endpoint, reply: Reply, app_id: str) -> tuple[ManagerAnswer | None, bool]:
    """The answer in `reply`, and whether it came from a standby (ask the next address)."""
    body = reply.body
    if endpoint.kind == "yarn":
        if reply.status in (301, 302, 303, 307, 308):
            return None, True  # a standby ResourceManager sends the client to the active one
        matched = _YARN_APP.fullmatch(app_id)
        yarn_id = matched[1] if matched is not None else ""
        app = body.get("app") if isinstance(body, dict) else None
        state = app.get("state") if isinstance(app, dict) and app.get("id") == yarn_id else None
    else:
        if isinstance(body, dict) and body.get("status") == "STANDBY":
            return None, True
        state = _standalone_state(body, app_id)
    if not isinstance(state, str):
        return None, False
    state = state.upper()
    if state in _ALIVE[endpoint.kind]:
        alive = True
    elif state in _DEAD:
        alive = False
    else:
        return None, False  # UNKNOWN, or anything a future or lying manager says
    answer = ManagerAnswer(
        alive, state, f"{_NAME[endpoint.kind]} at {endpoint.shown} reports it {state}"
    )
    return answer, False


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


def _resourcemanagers(
    props: Mapping[str, Any], hadoop: Mapping[str, Any]
) -> tuple[tuple[str, ...], tuple[RefusalReason, ...]]:
    found: list[str] = []
    refused: list[RefusalReason] = []
    bases = _text(props.get(_PROXY_BASES))
    for base in bases.split(",")[:MAX_ADDRESSES] if bases else ():
        url, reason = _proxy_base(base)
        if url:
            found.append(url)
        if reason:
            refused.append(reason)
    for value in (props.get(f"spark.hadoop.{_WEBAPP}"), hadoop.get(_WEBAPP)):
        address = _expand(_text(value), hadoop)
        if address:
            _add(found, refused, "http", parse_authority(address))
    for key in ("yarn.resourcemanager.hostname", "yarn.resourcemanager.address"):
        host = _expand(_text(props.get(f"spark.hadoop.{key}") or hadoop.get(key)), hadoop)
        if host:
            parsed = parse_authority(host)  # the RPC address's port is not the web app's
            _add(
                found,
                refused,
                "http",
                Address(parsed.host) if isinstance(parsed, Address) else parsed,
            )
    unique = [u for i, u in enumerate(found) if u not in found[:i]]
    return tuple(unique[:MAX_ADDRESSES]), tuple(refused)


def _add(
    found: list[str], refused: list[RefusalReason], scheme: str, parsed: Address | RefusalReason
) -> None:
    if isinstance(parsed, str):
        refused.append(parsed)
    else:
        found.append(f"{scheme}://{parsed.shown(parsed.port or DEFAULT_RM_WEBAPP_PORT)}")


def _proxy_base(text: str) -> tuple[str, RefusalReason | None]:
    """`scheme://host:port` of one of PROXY_URI_BASES (`http://rm:8088/proxy/<app id>`), or
    why it is refused."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("http", "https"):
        return "", "bad_host"
    authority, slash, path = rest.partition("/")
    parsed = parse_authority(authority)
    if isinstance(parsed, str):
        return "", parsed
    if "?" in path or "#" in path:
        return "", "query" if "?" in path else "fragment"
    if slash and not _PROXY_PATH.fullmatch(path):
        return "", "path"
    default = 443 if scheme == "https" else DEFAULT_RM_WEBAPP_PORT
    return f"{scheme}://{parsed.shown(parsed.port or default)}", None


def _expand(value: str, hadoop: Mapping[str, Any]) -> str:
    """Hadoop's `${name}` substitution, one level (Spark logs Hadoop properties raw)."""
    parts, last = [], 0
    for found in _VARIABLE.finditer(value):
        parts += [value[last : found.start()], _text(hadoop.get(found[1]))]
        last = found.end()
    return "".join(parts) + value[last:]


def _text(value: Any) -> str:
    return value[:1024] if isinstance(value, str) else ""
