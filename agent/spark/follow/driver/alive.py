"""Is an application's driver alive? Every signal the agent may read, the cheapest first; any
one of them proves life, so a driver is never taken for dead while one says otherwise.

1. a process holds the log open (/proc/PID/fd: the agent's own user, or root);
2. the driver's REST API answers for this application id (loopback for a driver on this
   node, its host for one elsewhere);
3. its cluster manager (a standalone master, a YARN ResourceManager) lists this application
   id as running (`driver.manager`); one that lists it ended is named in the answer;
4. the driver's RPC port (or its UI port) listens on this node, owned by the log's owner
   (/proc/net/tcp: readable by every user, no traffic), for a driver whose UI is off. It
   comes after the manager because it names no application: the manager's word is the one
   logged for an idle driver that has one.
A driver on another node sharing the directory over NFS has only the second and third.
The second and third send requests the log must not steer: `outbound` says how they are
bounded (a host and a port only, no link-local or metadata address, one request a look for
each, a global rate); what the log gave and could not be taken is counted there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agent.spark.follow.driver import manager, procfs, rest
from agent.spark.follow.driver.facts import DriverFacts
from agent.spark.follow.driver.manager import ManagerSettings
from agent.spark.follow.driver.outbound import Guard, default_guard


@dataclass(frozen=True, slots=True)
class Liveness:
    """The answer, and what gave it: the signal that proved life, or everything that did
    not (for the FAIL message of a driver taken as lost)."""

    alive: bool
    reason: str
    ui_port: int | None = None  # where the driver's UI answered, to try first next time


def check(
    facts: DriverFacts,
    paths: Sequence[str],
    app_id: str | None,
    *,
    ui_port: int | None = None,
    managers: ManagerSettings = manager.DEFAULTS,
    remote: bool = False,
    guard: Guard | None = None,
) -> Liveness:
    """Look at every signal of the driver of the log at `paths` (blocking; a thread).
    `remote`: the log is on a shared store and its driver on another node, so this node's
    /proc and ports say nothing; only the driver's UI and its cluster manager are asked."""
    guard = guard or default_guard()
    held = procfs.Holders((), 0) if remote else procfs.holders(paths)
    if held.pids:
        return Liveness(True, f"process {held.pids[0]} holds the event log open", ui_port)
    if facts.host_refused is not None:
        guard.refuse(facts.host_refused, app_id, "spark.driver.host")
    for reason in facts.manager.refused:
        guard.refuse(reason, app_id, "the cluster manager's address")
    usable = facts.host_refused is None
    if app_id and facts.ui_enabled and usable and not (remote and not facts.host):
        host = rest.ask_at(facts.host)
        found = rest.ui_port_of(host, facts.ui_ports(), app_id, first=ui_port, guard=guard)
        if found is not None:
            shown = f"[{host}]" if ":" in host else host
            return Liveness(True, f"the driver UI at {shown}:{found} answers for it", found)
    asked = manager.endpoints(facts.manager, managers)
    said = manager.ask(asked, app_id, guard=guard) if app_id else None
    if said is not None and said.alive:
        return Liveness(True, said.reason, ui_port)
    if remote:
        looked = [
            said.reason
            if said is not None
            else f"{_MANAGER[asked[0].kind]} gives no answer"
            if asked
            else "its log names no cluster manager to ask",
            "the driver UI does not answer" if facts.ui_enabled else "its UI is off",
        ]
        return Liveness(False, " and ".join(looked) + "; " + REMOTE_REASON, ui_port)
    local = usable and (facts.host is None or rest.is_local(facts.host))
    uid = owner(paths)
    if local and uid is not None:
        ports = [p for p in (facts.rpc_port, facts.ui_port, ui_port) if p]
        port = procfs.listening(ports, uid)
        if port is not None:
            return Liveness(True, f"the driver's port {port} listens (uid {uid})", ui_port)
    looked = [
        "no process the agent may inspect holds it open"
        if held.unreadable
        else "no process holds it open"
    ]
    if local and facts.rpc_port:
        looked.append("nothing listens on its driver port")
    if said is not None:
        looked.append(said.reason)
    elif asked:
        looked.append(f"{_MANAGER[asked[0].kind]} gives no answer")
    looked.append("the driver UI does not answer" if facts.ui_enabled else "its UI is off")
    return Liveness(False, ", ".join(looked[:-1]) + " and " + looked[-1], ui_port)


#: Why this node's processes and ports were not looked at for a log on a store.
REMOTE_REASON: Final = (
    "its log is on a shared store and the driver runs elsewhere, so no local process or "
    "port was looked at"
)

_MANAGER = {"standalone": "its standalone master", "yarn": "its YARN ResourceManager"}


def owner(paths: Sequence[str]) -> int | None:
    """The uid that owns the log: the user the driver runs as."""
    for path in paths:
        try:
            return os.stat(path).st_uid
        except OSError:
            continue
    return None
