"""The gate every liveness request passes: an event log is written by whoever can submit a
Spark job, and the agent runs inside the platform's network, so nothing of a log but a host
and a port may steer a request (no server-side request forgery through a log).

Contract of `Guard.target` and `Guard.take`, for `rest` and `manager`:
- the host comes parsed (`agent.config.hosts`): user info, paths, queries, fragments, whitespace and
  control characters were refused there; the path asked is always the caller's own fixed
  Spark REST, YARN or standalone master path, with no Authorization header from the log;
- the name is resolved once; if any of its addresses is link-local or a cloud metadata
  address the host is refused, else the request connects to the checked address (the URL
  holds the address, `Host` the name, TLS's SNI the name), so a second resolution cannot
  swap it (DNS rebinding);
- `liveness.allowed_hosts`, when set, must match the name or the address;
- every connection attempt takes a token from one bucket shared by all lookups
  (`liveness.max_requests_per_second`), waiting at most `RATE_WAIT` for it.
Each refusal is counted (`lineage_liveness_refused_total{reason}`) and logged once per
application, without the refused text (it may hold a password).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx
import structlog

from agent.config.hosts import (
    Address,
    HostPatterns,
    IPAddress,
    RefusalReason,
    forbidden_address,
    forbidden_name,
    host_patterns,
)
from agent.spark.follow.driver.httpjson import Reply, fetch_json

log = structlog.get_logger("agent.spark")

RATE_WAIT: Final = 5.0  # seconds a look waits for a token before it gives up on a request
MAX_RESOLVED: Final = 8  # addresses of one name looked at
_MAX_LOGGED: Final = 10_000  # applications remembered as logged before the memory is reset

Scheme = Literal["http", "https"]


@dataclass(frozen=True, slots=True)
class Target:
    """Where one request goes: the checked address, and the name it is for."""

    scheme: Scheme
    host: str  # the name (or literal) the log gave, for Host and SNI
    address: IPAddress  # the checked address connected to
    port: int

    @property
    def shown(self) -> str:
        """`host:port`, how answers and logs name it."""
        return Address(self.host).shown(self.port)

    def get_json(self, client: httpx.Client, path: str, *, budget: float) -> Reply:
        """GET `path` (the caller's fixed path) at the checked address."""
        where = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        extensions = {"sni_hostname": self.host} if self.scheme == "https" else None
        return fetch_json(
            client,
            f"{self.scheme}://{where}:{self.port}{path}",
            budget=budget,
            host=self.shown,
            extensions=extensions,
        )


class TokenBucket:
    """`rate` tokens a second, at most `rate` (at least one) held; thread-safe."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._tokens = self.capacity
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()

    def take(self, wait: float) -> bool:
        """Take a token, sleeping up to `wait` seconds for one; False when none came."""
        deadline = self._clock() + wait
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return True
                needed = (1 - self._tokens) / self.rate
            if now + needed > deadline:
                return False
            time.sleep(needed)


Resolver = Callable[..., list[tuple[Any, ...]]]


class Guard:
    """The allowed hosts, the rate and the refusal counter of all liveness lookups."""

    def __init__(
        self,
        allowed: HostPatterns | None = None,
        rate: float = 10.0,
        on_refused: Callable[[RefusalReason], object] = lambda _: None,
    ) -> None:
        self.allowed = allowed or HostPatterns()
        self.bucket = TokenBucket(rate)
        self.on_refused = on_refused
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def of(
        cls,
        allowed_hosts: tuple[str, ...],
        rate: float,
        on_refused: Callable[[RefusalReason], object],
    ) -> Guard:
        """From `liveness.allowed_hosts` (checked by the config loader) and the rate."""
        return cls(host_patterns(allowed_hosts), rate, on_refused)

    def refuse(self, reason: RefusalReason, app_id: str | None, what: str) -> None:
        """Count a refusal; log it once per application."""
        self.on_refused(reason)
        key = app_id or ""
        with self._lock:
            if key in self._logged:
                return
            if len(self._logged) >= _MAX_LOGGED:
                self._logged.clear()
            self._logged.add(key)
        log.warning("liveness_lookup_refused", app_id=app_id, setting=what, reason=reason)

    def target(
        self,
        host: Address | RefusalReason,
        port: int | None,
        *,
        app_id: str | None,
        what: str,
        scheme: Scheme = "http",
    ) -> Target | None:
        """Where to send a request for `host`:`port`, or None (counted) when it is refused."""
        if isinstance(host, str):
            self.refuse(host, app_id, what)
            return None
        if port is None:
            self.refuse("bad_port", app_id, what)
            return None
        if forbidden_name(host.host):
            self.refuse("forbidden_address", app_id, what)
            return None
        addresses = self._resolve(host, port)
        if not addresses:
            self.refuse("unresolved", app_id, what)
            return None
        if any(forbidden_address(a) for a in addresses):
            self.refuse("forbidden_address", app_id, what)
            return None
        if not self.allowed.empty and not (
            self.allowed.allows_name(host.host) or self.allowed.allows_address(addresses[0])
        ):
            self.refuse("not_allowed", app_id, what)
            return None
        return Target(scheme, host.host, addresses[0], port)

    def take(self, app_id: str | None, what: str) -> bool:
        """A token for one connection attempt (waiting up to RATE_WAIT), or False (counted)."""
        if self.bucket.take(RATE_WAIT):
            return True
        self.refuse("rate_limited", app_id, what)
        return False

    @staticmethod
    def _resolve(host: Address, port: int) -> list[IPAddress]:
        literal = host.ip
        if literal is not None:
            return [literal]
        try:
            infos = socket.getaddrinfo(host.host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return []
        found: list[IPAddress] = []
        for info in infos[:MAX_RESOLVED]:
            try:
                address = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
            except ValueError:
                continue
            if address not in found:
                found.append(address)
        return found


_DEFAULT: Guard | None = None


def default_guard() -> Guard:
    """The guard of callers given none (one per process: its bucket is shared)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Guard()
    return _DEFAULT
