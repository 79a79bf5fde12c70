"""Who is at the other end of a control connection: its uid (SO_PEERCRED), a name for log lines
and records, and whether it may be served: root, the agent's own user and the members of the
socket's group, whatever the file mode says."""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def user_name(uid: int) -> str:
    """`uid N (name)`, or `uid N` for a uid with no user."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def allowed(uid: int, path: str) -> bool:
    """Whether the peer `uid` may use the socket at `path`."""
    if uid in (0, os.getuid()):
        return True
    try:
        group = grp.getgrgid(os.stat(path).st_gid)
        user = pwd.getpwuid(uid)
    except (KeyError, OSError):
        return False
    return user.pw_gid == group.gr_gid or user.pw_name in group.gr_mem
