"""File transport: signed events as JSON lines, one complete event per line, with rotation.

Errors:
    StartError: the file cannot be taken at start (another agent holds its lock,
    a symbolic link sits at the path, the file cannot be created).
    DeliveryError("write_error", ...): a batch could not be written; the transport keeps
    working and the next batch is tried on a freshly checked file. A file that hit the
    process's file-size limit (EFBIG) is rotated at once when rotation is on.

Durability: each batch is handed to the kernel with one write(2) and no fsync, so events
survive a crash of the agent but not necessarily of the machine (a write cut short by a
crash leaves a torn last line, which the next open cuts away); the file is fsynced when it
is rotated and when the transport closes. Writes are plain blocking calls on the event loop:
a batch is a few kilobytes and local disks take it in microseconds.

One writer per path: an exclusive flock(2) on ``<path>.lock`` is held for the transport's
lifetime. The lock file is never removed (removing it would let a second writer lock a new
file while the first still writes). Within one agent a reload may replace the transport of a
path (new settings, or the transport removed and added back while the old one still drains):
the new transport then shares the old one's lock (`lock_of`) instead of refusing itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Sequence
from typing import Final

import structlog

from agent.config.model import FileConfig
from agent.delivery.envelope import Envelope
from agent.errors import DeliveryError, StartError
from agent.fsutil import fsync_directory, identity_change, take_lock

_MIB: Final = 1024 * 1024
_FILE_MODE: Final = 0o640
_DIR_MODE: Final = 0o750
# O_NONBLOCK keeps open(2) from waiting forever on a FIFO planted at the path; it changes
# nothing for regular files.
_OPEN_FLAGS: Final = (
    os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
)

log = structlog.get_logger(__name__)


_REOPENED: Final = (
    "the path no longer named the file being written (moved or removed): the events written "
    "before are in that file, the next ones in a new file at the path"
)


class _NotRegularFileError(OSError):
    """Something other than a regular file (a FIFO, a device, a directory) sits at the path."""


class _UntrustedLinkError(OSError):
    """A directory on the way to the file is a symbolic link another user owns."""

    def __init__(self, link: str, uid: int) -> None:
        super().__init__(errno.EPERM, "untrusted symbolic link")
        self.link = link
        self.uid = uid


class FileTransport:
    """Appends each batch to `config.path` as JSON lines; see the module docstring."""

    name = "file"

    def __init__(self, config: FileConfig, *, lock_of: FileTransport | None = None) -> None:
        self._path = config.path
        self._threshold = int(config.rotation_size_mb * _MIB)  # 0: never rotate
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._rotation_failed = False
        parent = os.path.dirname(self._path) or "."
        try:
            _check_links(self._path)
            os.makedirs(parent, mode=_DIR_MODE, exist_ok=True)
        except _UntrustedLinkError as exc:
            raise StartError(_open_problem(self._path, exc)) from None
        except OSError as exc:
            raise StartError(f"cannot create directory {parent}: {exc.strerror}") from None
        self._lock_fd: int
        shared = lock_of is not None and lock_of.path == self._path and lock_of.lock_fd >= 0
        if shared and lock_of is not None:
            # The same open file description, hence the same flock: held until both close.
            self._lock_fd = os.dup(lock_of.lock_fd)
        else:
            self._lock_fd = _take_lock(self._path)
        try:
            # A transport of this process still writes the file (a reload builds this one in a
            # worker thread meanwhile): a tail without its newline is a batch being written,
            # not a crash's torn line, and cutting it would lose events counted delivered.
            self._open(cut_torn_tail=not shared)
        except OSError as exc:
            os.close(self._lock_fd)
            raise StartError(_open_problem(self._path, exc)) from None

    @property
    def path(self) -> str:
        return self._path

    @property
    def lock_fd(self) -> int:
        """The descriptor holding the path's lock; -1 once closed."""
        return self._lock_fd

    def lock_change(self) -> str | None:
        """ "removed" or "replaced" when ``<path>.lock`` is no longer the file this holds."""
        if self._lock_fd < 0:
            return None
        info = os.fstat(self._lock_fd)
        return identity_change(f"{self._path}.lock", (info.st_dev, info.st_ino))

    def file_change(self) -> str | None:
        """ "removed" or "replaced" when the path no longer names the file being written; the
        next batch then goes to a new file at the path (see `_current`)."""
        if self._fd is None or self._identity is None:
            return None
        return identity_change(self._path, self._identity)

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
        try:
            size = _write_whole(fd, data)
        except OSError as exc:
            if exc.errno == errno.EFBIG and self._threshold and _size(fd):
                # The file reached the process's file-size limit (RLIMIT_FSIZE) before the
                # rotation size: without a rotation now, every later batch would fail too.
                self._rotate()
            raise DeliveryError(
                "write_error", f"cannot write {self._path}: {exc.strerror}"
            ) from None
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

    def _open(self, *, cut_torn_tail: bool = True) -> None:
        _check_links(self._path)  # the directories may have been swapped since the last open
        fd = os.open(self._path, _OPEN_FLAGS, _FILE_MODE)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _NotRegularFileError(errno.EINVAL, "not a regular file")
            os.set_blocking(fd, True)
        except OSError:
            os.close(fd)
            raise
        try:
            cut = _cut_torn_tail(fd, info.st_size) if cut_torn_tail else 0
        except OSError:
            cut = 0  # the next write reports what is wrong with the file
        if cut:
            log.warning("file_torn_line_cut", path=self._path, bytes=cut)
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
            log.warning("file_reopened", path=self._path, detail=_REOPENED)
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
            fsync_directory(os.path.dirname(self._path) or ".")
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


def check_path(path: str) -> str | None:
    """What the transport's start would refuse about `path`, found without creating or
    opening anything: StartError for a link or non-file at the path, an untrusted link above
    it, or a directory that cannot be one. Returns a note instead of raising when the only
    problem is that this process may not write there (the service's user may)."""
    parent = os.path.dirname(path) or "."
    try:
        _check_links(path)
    except _UntrustedLinkError as exc:
        raise StartError(_open_problem(path, exc)) from None
    existing = parent
    while not os.path.lexists(existing):  # what start would create, up to what exists
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise StartError(f"cannot create directory {parent}: {os.strerror(errno.ENOTDIR)}")
    with contextlib.suppress(OSError):
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            where = f"create directory {parent}" if existing != parent else f"open {path}"
            raise StartError(f"cannot {where}: {os.strerror(errno.EROFS)}")
    if existing != parent:
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"cannot create directory {parent}: {os.strerror(errno.EACCES)}"
        return None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise StartError(_open_problem(path, exc)) from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise StartError(_open_problem(path, OSError(errno.ELOOP, os.strerror(errno.ELOOP))))
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise StartError(_open_problem(path, _NotRegularFileError(errno.EINVAL, "")))
    lock = f"{path}.lock"
    if os.path.islink(lock):
        raise StartError(_open_problem(lock, OSError(errno.ELOOP, os.strerror(errno.ELOOP))))
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot open {path}: {os.strerror(errno.EACCES)}"
    for name in (path, lock):
        if os.path.lexists(name) and not os.access(name, os.R_OK | os.W_OK):
            return f"cannot open {name}: {os.strerror(errno.EACCES)}"
    return None


def _take_lock(path: str) -> int:
    lock_path = f"{path}.lock"
    try:
        return take_lock(lock_path, _FILE_MODE, follow_links=False)
    except BlockingIOError:
        raise StartError(
            f"another lineage-agent is writing {path} (lock {lock_path} is held)"
        ) from None
    except OSError as exc:
        if exc.filename is not None:  # the open failed
            raise StartError(_open_problem(lock_path, exc)) from None
        raise StartError(f"cannot lock {lock_path}: {exc.strerror}") from None


def _write_whole(fd: int, data: bytes) -> int:
    """Append all of `data` or nothing; return the file size afterwards, or raise OSError.

    A short write (file size limit, disk full mid-batch) is cut back to the size before the
    batch, so no reader ever sees a torn line.
    """
    before = os.fstat(fd).st_size
    view = memoryview(data)
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, view[written:])
    except OSError:
        if written:
            with contextlib.suppress(OSError):  # best effort; the error raised is what counts
                os.ftruncate(fd, before)
        raise
    return before + written


def _cut_torn_tail(fd: int, size: int) -> int:
    """Cut a last line that has no newline and return how many bytes went.

    Only a writer killed in the middle of a write(2) (SIGKILL, the OOM killer, a power cut)
    leaves one: its event was never delivered, and appending after it would glue the next
    event onto it and make that one unreadable too.
    """
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    keep, end = 0, size
    while end > 0:
        start = max(0, end - 65536)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        end = start
    os.ftruncate(fd, keep)
    return size - keep


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return 0


def _free_name(path: str) -> str:
    stamp = time.time_ns()
    while os.path.lexists(f"{path}.{stamp}"):
        stamp += 1
    return f"{path}.{stamp}"


def _check_links(path: str) -> None:
    """Refuse a path that leads through a symbolic link owned by another user.

    O_NOFOLLOW guards the file itself; this guards the directories above it. A link planted
    by another user (in a world-writable directory, say) would otherwise steer this agent's
    writes, with its privileges, into a directory of that user's choosing. Links owned by
    root or by this agent's user are the administrator's and are followed. Each prefix is
    looked at with lstat(2), so a link is judged wherever it sits, even behind another link.
    """
    trusted = {0, os.geteuid()}
    current = ""
    for part in os.path.abspath(os.path.dirname(path) or ".").split(os.sep):
        current = os.path.join(current, part) if current else os.sep
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return  # the rest does not exist yet: this agent creates it
        except OSError:
            return  # unreadable: the open reports it
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in trusted:
            raise _UntrustedLinkError(current, info.st_uid)


def _open_problem(path: str, exc: OSError) -> str:
    if isinstance(exc, _UntrustedLinkError):
        return (
            f"refusing to write {path}: {exc.link} is a symbolic link owned by another "
            f"user (uid {exc.uid})"
        )
    if exc.errno == errno.ELOOP:
        return f"refusing to write {path}: it is a symbolic link"
    if isinstance(exc, _NotRegularFileError) or exc.errno in (errno.ENXIO, errno.EISDIR):
        return f"refusing to write {path}: not a regular file"
    return f"cannot open {path}: {exc.strerror}"
