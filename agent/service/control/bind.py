"""Binding the control socket's path: a stale socket of a previous run is removed, a live
agent's is never taken over (StartError), anything else at the path is left alone (OSError)."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat

from agent.errors import StartError
from agent.service.control.client import probe

_BIND_ATTEMPTS = 3


def identity(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of what is at `path` now, None when nothing is."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def bind(path: str) -> socket.socket:
    """A unix socket bound at `path`, after removing a stale socket of a previous run.

    bind(2) never replaces an existing file, so what is at the path is looked at first: a
    socket nobody listens on is stale and removed (only if it is still the same file when
    removed); a socket an agent answers on is StartError.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    for _attempt in range(_BIND_ATTEMPTS):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            return sock
        except OSError as error:
            sock.close()
            if error.errno != errno.EADDRINUSE:
                raise
        _remove_stale(path)
    raise OSError(errno.EADDRINUSE, f"{path} keeps being taken by another process")


def _remove_stale(path: str) -> None:
    """Remove the socket at `path` if nobody listens on it; StartError if an agent does."""
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(before.st_mode):
        raise OSError(errno.EADDRINUSE, f"{path} exists and is not a socket")
    pid = probe(path)
    if pid is not None:
        who = f"another lineage-agent (pid {pid})" if pid else "another process"
        raise StartError(
            f"control_socket: {who} is listening on {path}; give each agent its own "
            "control_socket, or stop the other one first"
        )
    if identity(path) == (before.st_dev, before.st_ino):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
