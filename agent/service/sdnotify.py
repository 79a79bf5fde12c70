"""systemd's notify protocol over $NOTIFY_SOCKET, without extra dependencies.

A no-op when the variable is unset (not under systemd). Abstract sockets (`@name`) are
supported. Errors are swallowed: a broken notify socket must never stop the agent.
"""

from __future__ import annotations

import os
import socket
import time


class Notifier:
    def __init__(self, address: str | None = None) -> None:
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET")
        self._address: str | None = None
        self._socket: socket.socket | None = None
        if address:
            self._address = "\0" + address[1:] if address.startswith("@") else address
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._socket is not None

    def notify(self, *fields: str) -> bool:
        """Send `KEY=value` fields as one datagram; False when not under systemd or on error."""
        if self._socket is None or self._address is None:
            return False
        try:
            self._socket.sendto("\n".join(fields).encode(), self._address)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> bool:
        # MONOTONIC_USEC is required by Type=notify-reload; harmless for Type=notify.
        usec = time_monotonic_usec()
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def time_monotonic_usec() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def watchdog_interval() -> float | None:
    """Half of $WATCHDOG_USEC in seconds when the watchdog is on for this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 2_000_000 if value > 0 else None
