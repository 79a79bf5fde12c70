"""File transport: signed events as JSON lines, one complete event per line, with rotation.

Errors:
    TransportStartError: the file cannot be taken at start (another agent holds its lock,
    a symbolic link sits at the path, the file cannot be created).
    DeliveryError("write_error", ...): a batch could not be written; the transport keeps
    working and the next batch is tried on a freshly checked file.

Durability: each batch is handed to the kernel with one write(2) and no fsync, so events
survive a crash of the agent but not necessarily of the machine; the file is fsynced when it
is rotated and when the transport closes. Writes are plain blocking calls on the event loop:
a batch is a few kilobytes and local disks take it in microseconds.

One writer per path: an exclusive flock(2) on ``<path>.lock`` is held for the transport's
lifetime. The lock file is never removed (removing it would let a second writer lock a new
file while the first still writes).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Sequence
from typing import Final

import structlog

from agent.config import FileConfig
from agent.envelope import Envelope
from agent.transports.base import DeliveryError

_MIB: Final = 1024 * 1024
_FILE_MODE: Final = 0o640
_DIR_MODE: Final = 0o750
# O_NONBLOCK keeps open(2) from waiting forever on a FIFO planted at the path; it changes
# nothing for regular files.
_OPEN_FLAGS: Final = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
)

log = structlog.get_logger(__name__)


class TransportStartError(Exception):
    """The transport cannot start writing its file; the message says why."""


class _NotRegularFileError(OSError):
    """Something other than a regular file (a FIFO, a device, a directory) sits at the path."""


class FileTransport:
    """Appends each batch to `config.path` as JSON lines; see the module docstring."""

    name = "file"

    def __init__(self, config: FileConfig) -> None:
        self._path = config.path
        self._threshold = int(config.rotation_size_mb * _MIB)  # 0: never rotate
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._rotation_failed = False
        parent = os.path.dirname(self._path) or "."
        try:
            os.makedirs(parent, mode=_DIR_MODE, exist_ok=True)
        except OSError as exc:
            raise TransportStartError(f"cannot create directory {parent}: {exc.strerror}") from None
        self._lock_fd = _take_lock(self._path)
        try:
            self._open()
        except OSError as exc:
            os.close(self._lock_fd)
            raise TransportStartError(_open_problem(self._path, exc)) from None

    async def send(self, batch: Sequence[Envelope]) -> None:
        """Append the batch, one line per event; raise DeliveryError("write_error") if not."""
        if not batch:
            return
        if self._lock_fd < 0:
            raise DeliveryError("write_error", f"cannot write {self._path}: transport closed")
        data = b"\n".join(envelope.payload for envelope in batch) + b"\n"
        try:
            fd = self._current()
        except OSError as exc:
            raise DeliveryError("write_error", _open_problem(self._path, exc)) from None
        size = _write_whole(fd, data, self._path)
        if self._threshold and size >= self._threshold:
            self._rotate()

    async def aclose(self) -> None:
        """Flush the file to disk, close it and release the lock; idempotent."""
        if self._lock_fd < 0:
            return
        if self._fd is not None:
            with contextlib.suppress(OSError):  # nothing left to report it to
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        os.close(self._lock_fd)
        self._lock_fd = -1

    # -- internals -------------------------------------------------------------------------

    def _open(self) -> None:
        fd = os.open(self._path, _OPEN_FLAGS, _FILE_MODE)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _NotRegularFileError(errno.EINVAL, "not a regular file")
            os.set_blocking(fd, True)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        self._identity = (info.st_dev, info.st_ino)

    def _current(self) -> int:
        """The fd to write to, reopening the path if the file was removed or replaced."""
        if self._fd is not None:
            try:
                info = os.lstat(self._path)
                if (info.st_dev, info.st_ino) == self._identity:
                    return self._fd
            except FileNotFoundError:
                pass
            # Someone moved or deleted our file: writing on would lose the events unseen.
            os.close(self._fd)
            self._fd = None
        self._open()
        assert self._fd is not None
        return self._fd

    def _rotate(self) -> None:
        """Rename the full file to ``<path>.<unix-nanos>`` and start a fresh one.

        The batch that triggered this was delivered, so a failure here is not a delivery
        error: it is logged once and retried after the next write.
        """
        assert self._fd is not None
        try:
            os.fsync(self._fd)
            target = _free_name(self._path)
            os.rename(self._path, target)
            _fsync_directory(os.path.dirname(self._path) or ".")
        except OSError as exc:
            if not self._rotation_failed:
                log.warning("file_rotation_failed", path=self._path, error=exc.strerror)
            self._rotation_failed = True
            return
        self._rotation_failed = False
        os.close(self._fd)
        self._fd = None
        # A failure to open the fresh file surfaces as a write_error on the next send.
        with contextlib.suppress(OSError):
            self._open()


def _take_lock(path: str) -> int:
    lock_path = f"{path}.lock"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(lock_path, flags, _FILE_MODE)
    except OSError as exc:
        raise TransportStartError(_open_problem(lock_path, exc)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise TransportStartError(
            f"another lineage-agent is writing {path} (lock {lock_path} is held)"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise TransportStartError(f"cannot lock {lock_path}: {exc.strerror}") from None
    return fd


def _write_whole(fd: int, data: bytes, path: str) -> int:
    """Append all of `data` or nothing; return the file size afterwards.

    A short write (file size limit, disk full mid-batch) is cut back to the size before the
    batch, so no reader ever sees a torn line.
    """
    try:
        before = os.fstat(fd).st_size
    except OSError as exc:
        raise DeliveryError("write_error", f"cannot write {path}: {exc.strerror}") from None
    view = memoryview(data)
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
    except OSError as exc:
        if written:
            with contextlib.suppress(OSError):  # best effort; the error below is what counts
                os.ftruncate(fd, before)
        raise DeliveryError("write_error", f"cannot write {path}: {exc.strerror}") from None
    return before + written


def _free_name(path: str) -> str:
    stamp = time.time_ns()
    while os.path.lexists(f"{path}.{stamp}"):
        stamp += 1
    return f"{path}.{stamp}"


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; best effort where directories cannot be fsynced."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _open_problem(path: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"refusing to write {path}: it is a symbolic link"
    if isinstance(exc, _NotRegularFileError) or exc.errno in (errno.ENXIO, errno.EISDIR):
        return f"refusing to write {path}: not a regular file"
    return f"cannot open {path}: {exc.strerror}"
