"""What an application's event log says about where its driver runs and listens.

Spark writes these into the environment event at start: the driver's host and RPC port (the
port it really bound, also when it was chosen at random), the UI port only when a user set
it (otherwise Spark tries 4040 and the `spark.port.maxRetries` ports after it), whether the UI
is on at all, the submission time (set by SparkSubmit moments after its JVM started), the
master URL (`local[*]`, `spark://…`, `yarn`, `k8s://…`) and where that cluster manager's web
service listens (`manager`).

The driver's host is a host and nothing more (`agent.config.hosts`): a value with user info, a path,
a query, whitespace or control characters is no host (`host` None, `host_refused` says why),
and ports are digits from 1 to 65535.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent.config.hosts import Address, RefusalReason, parse_host, parse_port
from agent.spark.follow.driver.manager import NO_CLUES, ManagerClues, clues

DEFAULT_UI_PORT: Final = 4040
DEFAULT_MAX_RETRIES: Final = 16  # spark.port.maxRetries
_MAX_PORTS: Final = 17  # a hostile log cannot make the agent knock on many ports


@dataclass(frozen=True, slots=True)
class DriverFacts:
    """Where the driver of one application listens, as its event log tells."""

    host: str | None = None  # a name or an IP literal (no brackets), parsed strictly
    host_refused: RefusalReason | None = None  # why spark.driver.host was not taken
    rpc_port: int | None = None
    ui_enabled: bool = True
    ui_port: int | None = None  # set explicitly; None: Spark chose from DEFAULT_UI_PORT on
    max_retries: int = DEFAULT_MAX_RETRIES
    submit_time_ms: int | None = None
    master: str | None = None
    manager: ManagerClues = NO_CLUES  # where its cluster manager listens, if it has one

    def ui_ports(self) -> list[int]:
        """The ports the driver's UI may be on, in the order Spark tries them."""
        if not self.ui_enabled:
            return []
        first = self.ui_port or DEFAULT_UI_PORT
        count = min(self.max_retries, _MAX_PORTS - 1) + 1
        return [port for port in range(first, first + count) if port <= 65535]

    @property
    def deploy_mode(self) -> str:
        """local, standalone, yarn, kubernetes or unknown: how `job stop` can reach it."""
        master = (self.master or "").lower()
        if master.startswith("local"):
            return "local"
        if master.startswith("spark://"):
            return "standalone"
        if master == "yarn" or master.startswith("yarn"):
            return "yarn"
        if master.startswith("k8s://"):
            return "kubernetes"
        return "unknown"


def driver_facts(record: Mapping[str, Any]) -> DriverFacts:
    """The driver's facts from a SparkListenerEnvironmentUpdate record (untrusted input)."""
    props = record.get("Spark Properties")
    if not isinstance(props, Mapping):
        return DriverFacts()
    ui_port = parse_port(props.get("spark.ui.port"))
    hadoop = record.get("Hadoop Properties")
    given = props.get("spark.driver.host")
    host = parse_host(given) if given is not None else None
    return DriverFacts(
        host=host.host if isinstance(host, Address) else None,
        host_refused=host if isinstance(host, str) else None,
        rpc_port=parse_port(props.get("spark.driver.port")),
        ui_enabled=str(props.get("spark.ui.enabled", "true")).strip().lower() != "false",
        # Port 0 asks for a random port, which the log never tells: the UI is then unfound.
        ui_port=ui_port,
        max_retries=_count(props.get("spark.port.maxRetries")) or DEFAULT_MAX_RETRIES,
        submit_time_ms=_count(props.get("spark.app.submitTime")),
        master=_text(props.get("spark.master")),
        manager=clues(props, hadoop if isinstance(hadoop, Mapping) else {}),
    )


def _text(value: Any) -> str | None:
    return value[:256] if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    with contextlib.suppress(TypeError, ValueError):
        number = int(str(value)[:20])
        if number >= 0:
            return number
    return None
