"""Is the Spark driver of an in-progress log still alive on this node?

Two independent looks, either of which proves life: a process that holds the log file open
(Spark's writer keeps the in-progress file open until it stops; needs permission to read
other processes' /proc/PID/fd, as root or the same user), and the driver UI's REST API on
loopback answering for this application id. Neither works for a driver on another node
sharing the directory over NFS; then staleness alone decides, as documented.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import httpx


def pids_holding(paths: Iterable[str]) -> list[int]:
    """Other processes with one of `paths` open (this agent reads them too, so it is left
    out); the ones we may not inspect are skipped."""
    wanted = {os.path.realpath(p) for p in paths}
    holders: list[int] = []
    me = str(os.getpid())
    try:
        entries = os.listdir("/proc")
    except OSError:
        return holders
    for entry in entries:
        if not entry.isdigit() or entry == me:
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target in wanted or target.removesuffix(" (deleted)") in wanted:
                holders.append(int(entry))
                break
    return holders


def ui_alive(ui_port: int | None, app_id: str | None, timeout: float = 1.0) -> bool:
    """The driver UI on loopback knows this application (blocking; call from a thread)."""
    if not ui_port or not app_id:
        return False
    url = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app_id}"
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    try:
        return bool(response.json().get("id") == app_id)
    except ValueError:
        return False


def driver_alive(paths: Iterable[str], ui_port: int | None, app_id: str | None) -> bool:
    return bool(pids_holding(paths)) or ui_alive(ui_port, app_id)
