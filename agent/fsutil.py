"""File-system helpers shared by the state database, the file transport, key, config and
event-log files."""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import stat


def take_lock(lock_path: str | os.PathLike[str], mode: int, *, follow_links: bool = True) -> int:
    """Open (creating) `lock_path` and hold an exclusive flock(2) on it; the descriptor.

    Raises BlockingIOError when another open file description holds the lock, and OSError
    otherwise: from the open (its `filename` set) or from flock (no `filename`).
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(lock_path, flags, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a new or renamed directory entry durable; best effort, as not every file system
    lets a directory be opened or fsynced."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def identity_change(path: str | os.PathLike[str], identity: tuple[int, int]) -> str | None:
    """ "removed" or "replaced" when `path` no longer names the file (st_dev, st_ino) is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "removed"
    except OSError:
        return None  # unreadable now is not proof of a change
    return None if (info.st_dev, info.st_ino) == identity else "replaced"


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words, from its `st_mode`."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "an unknown kind")


def raise_open_files_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit and return the soft limit in force.

    Every in-progress event log the agent follows holds a descriptor, and stale `.inprogress`
    logs of killed drivers pile up in an event-log directory; services start with a soft
    limit of 1024 (systemd's default, kept low for programs that use select(2), which this
    one does not), and running out of descriptors also silences /metrics and the state
    database. The hard limit is the administrator's bound and is left as it is.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft
