"""What /proc tells about Spark drivers on this node, to an agent that may be another user.

Three looks, each working within what the kernel lets this user read:
- `holders`: processes holding a log file open. /proc/PID/fd is readable only for the
  agent's own user (or with CAP_SYS_PTRACE), so under the shipped unit it sees no driver of
  the Spark user; `Holders.unreadable` says how many it could not look into.
- `listening`: whether a TCP port is listening on this node, and as which uid.
  /proc/net/tcp{,6} is readable by everyone and costs no network traffic.
- `spark_drivers`: SparkSubmit JVMs of one uid with their start times, from
  /proc/PID/{status,cmdline,stat}, also readable by everyone (unless `ProtectProc=`
  hides them). `job stop` matches them to an application's submission time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

_LISTEN: Final = "0A"  # TCP_LISTEN in /proc/net/tcp's `st` column
_SUBMIT_CLASS: Final = b"org.apache.spark.deploy.SparkSubmit"
_MAX_CMDLINE: Final = 1 << 20  # a command line longer than this is not read further


@dataclass(frozen=True, slots=True)
class Holders:
    """Processes that hold one of the paths open, and how many could not be looked into."""

    pids: tuple[int, ...]
    unreadable: int


def holders(paths: Iterable[str]) -> Holders:
    """Other processes with one of `paths` open (the agent itself reads them, so it is left
    out); processes whose descriptors the agent may not read are counted, not guessed."""
    wanted = {os.path.realpath(p) for p in paths}
    found: list[int] = []
    unreadable = 0
    me = str(os.getpid())
    for entry in _pids():
        if entry == me:
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue  # gone meanwhile
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target in wanted or target.removesuffix(" (deleted)") in wanted:
                found.append(int(entry))
                break
    return Holders(tuple(found), unreadable)


def listening(ports: Iterable[int], uid: int | None = None) -> int | None:
    """The first of `ports` a TCP socket on this node listens on (owned by `uid` when
    given), or None."""
    wanted = set(ports)
    if not wanted:
        return None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as lines:
                next(lines, None)  # the header
                for line in lines:
                    fields = line.split()
                    if len(fields) < 8 or fields[3] != _LISTEN:
                        continue
                    _, _, port_hex = fields[1].rpartition(":")
                    try:
                        port, owner = int(port_hex, 16), int(fields[7])
                    except ValueError:
                        continue
                    if port in wanted and (uid is None or owner == uid):
                        return port
        except OSError:
            continue
    return None


def spark_drivers(uid: int) -> list[tuple[int, int]]:
    """(pid, start time in epoch milliseconds) of every SparkSubmit JVM of `uid`."""
    boot_ms = _boot_time_ms()
    if boot_ms is None:
        return []
    ticks = os.sysconf("SC_CLK_TCK")
    found: list[tuple[int, int]] = []
    for entry in _pids():
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if _SUBMIT_CLASS not in handle.read(_MAX_CMDLINE):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read(4096)
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields count from the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        try:
            started = int(fields[19])  # field 22 of proc(5), starttime in clock ticks
        except (IndexError, ValueError):
            continue
        found.append((int(entry), boot_ms + started * 1000 // ticks))
    return found


def _pids() -> list[str]:
    try:
        return [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _boot_time_ms() -> int | None:
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as lines:
            for line in lines:
                if line.startswith("btime "):
                    return int(line.split()[1]) * 1000
    except (OSError, ValueError):
        pass
    return None
