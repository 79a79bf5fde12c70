"""The checks `lineage-agent run` makes before it opens sockets and files, shared with
`lineage-agent config check`, so that a config `config check` passes is one `run` starts with.

`check_startup` checks the signing key (readable, private, well-formed; at start, made when
there is none: `agent.service.nodekey`), the http transport's
endpoints, bearer token and CA bundle (`transports.http`: the rules the transport applies),
the file transport's path (`transports.file.check_path`) and that the state directory can be
created; `config check` also notes whether each event-log directory on a store (S3, GCS,
Azure, HDFS) can be listed from here, never an error. For `run` (`service=True`) every problem
is a StartError. For `config check` (`service=False`) a problem that may be only this
shell's (a file this user may not read or write, a token variable not set here) is returned
as a note instead, because the service runs as another user with its own environment; every
other problem is the same StartError `run` would raise. A missing key is a note of `config
check` too: `run` makes it.

What is checked only by opening (the state database and its lock, the events file's lock,
the metrics address, the control socket) stays with `run`: another agent may hold them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass

from nacl.signing import SigningKey

from agent.config.model import AgentConfig
from agent.delivery.signing import load_signing_key
from agent.delivery.transports.file import check_path
from agent.delivery.transports.http import check_urls, read_token, tls_context
from agent.errors import KeyFileError, StartError
from agent.service.nodekey import make_key, missing_key_note
from agent.spark.eventlog import stores


@dataclass(frozen=True, slots=True)
class Checked:
    """What the checks found: the signing key (None when this user could not read it, or it
    is still to be made) and the notes about what only the service's user or environment
    can tell."""

    signing_key: SigningKey | None
    notes: tuple[str, ...] = ()


def check_startup(
    config: AgentConfig,
    *,
    service: bool = True,
    environ: Mapping[str, str] = os.environ,
    root: str | None = None,
    transports: tuple[str, ...] | None = None,
    make_missing_key: bool = False,
) -> Checked:
    """Check what `run` needs before it opens anything; see the module docstring.

    `root` (config check only) looks for the config's files below that directory, as in a
    tree staged for an image. `transports` limits the transport checks to those names (a
    reload checks only the transports it builds anew; default: every configured one).
    `make_missing_key` (run, at start) makes the signing key when its path names nothing.
    """
    if root is not None and service:
        raise ValueError("root is for checking a staged tree, not for running")
    notes: list[str] = []

    def problem(text: str) -> None:
        if service:
            raise StartError(text)
        notes.append(text)

    def at(path: str) -> str:
        return path if root is None else os.path.join(root, path.lstrip(os.sep))

    if not config.lineage.enabled:
        if not service:
            notes.append(
                "lineage.enabled is false: the agent starts nothing, so nothing else was checked"
            )
        return Checked(None, tuple(notes))
    key: SigningKey | None = None
    key_path = at(config.signing.key_path)
    if service and make_missing_key:
        make_key(key_path)
    if not service and not os.path.lexists(key_path):
        notes.append(missing_key_note(key_path, _user()))
    elif not service and not os.access(key_path, os.R_OK):
        problem(
            f"signing.key_path: {key_path}: not readable by {_user()}; check again as the "
            "service's user to check the key"
        )
    else:
        try:
            key = load_signing_key(key_path)
        except KeyFileError as error:
            raise StartError(f"signing.key_path: {error}") from None
    lineage = config.lineage
    names = lineage.transport if transports is None else transports
    if "http" in names and lineage.http is not None:
        http = lineage.http
        check_urls(http)
        auth = http.auth
        if auth is not None and auth.token_env not in environ and not service:
            notes.append(
                f"lineage.http.auth.token_env: environment variable {auth.token_env} is not set "
                "here; the service refuses to start unless its environment sets it"
            )
        else:
            read_token(http, environ)
        if http.ca_file is not None:
            ca_file = at(http.ca_file)
            if not service and os.path.exists(ca_file) and not os.access(ca_file, os.R_OK):
                problem(
                    f"lineage.http.ca_file: {ca_file}: not readable by {_user()}; check "
                    "again as the service's user to check it"
                )
            else:
                if os.path.exists(ca_file) and not os.path.isfile(ca_file):
                    raise StartError(f"lineage.http.ca_file: {ca_file}: not a regular file")
                tls_context(ca_file)
    if "file" in names:
        note = check_path(at(lineage.file.path))
        if note is not None:
            problem(f"lineage.file.path: {note}" if not service else note)
    if not service:
        notes.extend(_store_notes(config))
    if transports is None:  # at start; a reload keeps the state directory it has
        note = _check_state_dir(at(config.state_dir))
        if note is not None:
            problem(f"state_dir: {note}" if not service else note)
    return Checked(key, tuple(notes))


def _store_notes(config: AgentConfig) -> list[str]:
    """Whether each event-log directory on a store can be listed from here: a note either
    way, since the service's credentials and network may differ from this shell's."""
    notes = []
    for i, url in enumerate(config.spark.event_log_dirs):
        if not stores.is_url(url):
            continue
        where = f"spark.event_log_dirs[{i}]: {stores.redact(url)}"
        try:
            found = len(stores.listdir(url))
        except FileNotFoundError:
            notes.append(f"{where}: does not exist yet (the agent waits for it)")
        except OSError as error:
            notes.append(f"{where}: cannot be listed from here: {error}")
        else:
            notes.append(f"{where}: reachable from here ({found} entries)")
    return notes


def _check_state_dir(directory: str) -> str | None:
    """What creating the state directory (`agent.state.db`) would refuse, without creating it:
    StartError when it cannot be a directory, a note when this user may not create it."""
    existing = directory
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        reason = errno.EEXIST if existing == directory else errno.ENOTDIR
        raise StartError(f"{directory}: cannot create state directory: {os.strerror(reason)}")
    if existing == directory:
        return None  # the database and its lock are checked by opening them, at start
    with contextlib.suppress(OSError):
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            raise StartError(
                f"{directory}: cannot create state directory: {os.strerror(errno.EROFS)}"
            )
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{directory}: cannot create state directory: {os.strerror(errno.EACCES)}"
    return None


def _user() -> str:
    uid = os.geteuid()
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"
