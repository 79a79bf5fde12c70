"""The node's signing key is made on the node, by the agent, at its first start.

An image staged with a key in it gave every node built from it the same "node" key, so the
installer makes none: when `signing.key_path` names nothing, `run` makes the key there (mode
0600, written whole and then linked into place, so the path never names half a key) and logs
`signing_key_created` with its key id, once; later starts read it. A reload never makes a
key: a path changed by mistake is refused, not a new identity.

The default path is in the state directory, the one place the shipped unit may write
(`ProtectSystem=strict` keeps /etc read-only, and /etc/lineage-agent is root's).
`config check` cannot make the key; it says in a note that `run` will, or refuses what `run`
would refuse for sure (a file where a directory should be, a read-only file system).
"""

from __future__ import annotations

import contextlib
import errno
import os

import structlog

from agent.delivery.signing import generate_key_file, key_id
from agent.errors import KeyFileError, StartError

log = structlog.get_logger("agent.daemon")

#: Mode of a key directory the agent creates (as the state directory's).
DIRECTORY_MODE = 0o750


def make_key(path: str) -> bool:
    """Make a key at `path` when nothing is there (its directory too); True when it did,
    False when a file was there already (another process may just have made it).
    StartError when it cannot."""
    if os.path.lexists(path):
        return False
    _, refusal = _nearest_directory(path)
    if refusal is not None:
        raise StartError(_cannot_create(path, refusal))
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=DIRECTORY_MODE, exist_ok=True)
    except OSError as error:
        raise StartError(_cannot_create(path, error.strerror or str(error))) from None
    try:
        public = generate_key_file(path)
    except KeyFileError as error:
        if os.path.lexists(path):
            return False  # made by another process meanwhile
        raise StartError(f"signing.key_path: {error}") from None
    # Logged here, the moment it exists: a start refused by a later check still tells it.
    log.info("signing_key_created", path=path, key_id=key_id(public), mode="0600")
    return True


def missing_key_note(path: str, user: str) -> str:
    """What `config check` says of a key path that names nothing: the note that `run` will
    make the key; StartError when `run` could not, whoever runs it."""
    existing, refusal = _nearest_directory(path)
    if refusal is not None:
        raise StartError(_cannot_create(path, refusal))
    note = (
        f"signing.key_path: {path}: no key yet; the agent makes one (mode 0600) at its first "
        "start and logs its key id (signing_key_created)"
    )
    if not os.access(existing, os.W_OK | os.X_OK):
        note += f", if its user may write to {existing} ({user} may not)"
    return note


def _nearest_directory(path: str) -> tuple[str, str | None]:
    """The nearest existing ancestor of `path`, and why no key can be made below it for
    sure (it is not a directory, or on a read-only file system), or None."""
    existing = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return existing, os.strerror(errno.ENOTDIR)
    with contextlib.suppress(OSError):
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            return existing, os.strerror(errno.EROFS)
    return existing, None


def _cannot_create(path: str, reason: str) -> str:
    """As generate_key_file says it, under the config key."""
    return f"signing.key_path: {path}: cannot create private key file: {reason}"
