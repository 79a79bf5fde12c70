"""The checks `lineage-agent run` makes before it opens sockets and files, shared with
`lineage-agent config check`, so that a config `config check` passes is one `run` starts with.

`check_startup` checks the signing key (readable, private, well-formed; at start, made when
there is none: `agent.service.nodekey`), the http transport's
endpoints, bearer token and CA bundle (`transports.http.settings`: the rules the transport applies),
the file transport's path (`transports.file.check_path`) and that the state directory can be
created. For `run` (`service=True`) every problem is a StartError. For `config check`
(`service=False`) a problem that may be only this shell's (a file this user may not read or
write, a token variable not set here) is returned as a note instead, because the service runs
as another user with its own environment; every other problem is the same StartError `run`
would raise. A missing key is a note of `config check` too: `run` makes it. `config check`
goes on after a problem, so that one run names them all (`Checked.errors`), and notes what
only the node can tell: an event-log directory that is not there (yet) or, on a store
(S3, GCS, Azure, HDFS), cannot be listed from here, an http endpoint that
does not accept a connection from here (`reachable`).

What is checked only by opening (the state database and its lock, the events file's lock,
the metrics address, the control socket) stays with `run`: another agent may hold them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from nacl.signing import SigningKey

from agent.config.loader import Located
from agent.config.model import AgentConfig
from agent.config.redact import redact_http_url
from agent.delivery.retry import retry_notes
from agent.delivery.signing import load_signing_key
from agent.delivery.transports.factory import kafka_available
from agent.delivery.transports.file import check_path
from agent.delivery.transports.http.proxy import check_proxy
from agent.delivery.transports.http.settings import (
    check_headers,
    check_urls,
    read_token,
    tls_context,
)
from agent.errors import KeyFileError, StartError
from agent.service.nodekey import make_key, missing_key_note
from agent.spark.eventlog import stores
from agent.spark.eventlog.storage import listings


@dataclass(frozen=True, slots=True)
class Checked:
    """What the checks found: the signing key (None when this user could not read it, or it
    is still to be made) and the notes about what only the service's user or environment
    can tell."""

    signing_key: SigningKey | None
    notes: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # config check only: every refusal, in the order found


def check_startup(
    config: AgentConfig,
    *,
    service: bool = True,
    environ: Mapping[str, str] = os.environ,
    root: str | None = None,
    transports: tuple[str, ...] | None = None,
    make_missing_key: bool = False,
    reachable: Callable[[str], str | None] | None = None,
) -> Checked:
    """Check what `run` needs before it opens anything; see the module docstring.

    `root` (config check only) looks for the config's files below that directory, as in a
    tree staged for an image. `transports` limits the transport checks to those names (a
    reload checks only the transports it builds anew; default: every configured one).
    `make_missing_key` (run, at start) makes the signing key when its path names nothing.
    `reachable` (config check only) tries an http endpoint and says why it cannot connect
    (None when it can); its answer becomes a note.
    """
    if root is not None and service:
        raise ValueError("root is for checking a staged tree, not for running")
    notes: list[str] = []
    errors: list[str] = []

    @contextlib.contextmanager
    def step(key: str = "") -> Iterator[None]:
        """For `run` the first refusal stops; `config check` records it, under `key` when
        the message does not name one, and goes on."""
        try:
            yield
        except StartError as error:
            if service:
                raise
            message = str(error)
            errors.append(message if message.startswith(key) else f"{key}: {message}")

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
    with step():
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
        with step():
            check_urls(http)
            check_headers(http)
            check_proxy(http, environ)
            if reachable is not None:
                for url in dict.fromkeys(filter(None, (http.endpoint, http.batch_endpoint))):
                    why = reachable(url)
                    if why is not None:
                        notes.append(
                            f"lineage.http.endpoint: {redact_http_url(url)}: no connection "
                            f"from here ({why}); "
                            "the agent keeps events queued until the collector answers"
                        )
        if not service:
            notes.extend(retry_notes(http))
        auth = http.auth
        oauth2 = auth is not None and auth.type == "oauth2"
        name = "client_secret_env" if oauth2 else "token_env"
        variable = getattr(auth, name, None)
        with step():
            if variable is not None and variable not in environ and not service:
                notes.append(
                    f"lineage.http.auth.{name}: environment variable {variable} is not "
                    "set here; the service refuses to start unless its environment sets it"
                )
            else:
                read_token(http, environ)
        if http.ca_file is not None:
            ca_file = at(http.ca_file)
            with step():
                if not service and os.path.exists(ca_file) and not os.access(ca_file, os.R_OK):
                    problem(
                        f"lineage.http.ca_file: {ca_file}: not readable by {_user()}; check "
                        "again as the service's user to check it"
                    )
                else:
                    if os.path.exists(ca_file) and not os.path.isfile(ca_file):
                        raise StartError(f"lineage.http.ca_file: {ca_file}: not a regular file")
                    tls_context(ca_file)
        if http.cert is not None and http.key is not None:
            cert, cert_key = at(http.cert), at(http.key)
            with step():
                if not service and not os.access(cert_key, os.R_OK) and os.path.exists(cert_key):
                    problem(
                        f"lineage.http.key: {cert_key}: not readable by {_user()}; check "
                        "again as the service's user to check it"
                    )
                else:
                    tls_context(None, cert, cert_key)
    if "kafka" in names and not kafka_available():
        with step():
            raise StartError("lineage.kafka: kafka transport not available in this build")
    if "file" in names:
        with step("lineage.file.path"):
            note = check_path(at(lineage.file.path))
            if note is not None:
                problem(f"lineage.file.path: {note}" if not service else note)
    if transports is None:  # at start; a reload keeps the state directory it has
        with step("state_dir"):
            note = _check_state_dir(at(config.state_dir))
            if note is not None:
                problem(f"state_dir: {note}" if not service else note)
        if not service:
            notes.extend(_missing_log_dirs(config, at))
            if (
                root is None
            ):  # a staged tree is for another machine: this one's network says nothing
                notes.extend(_store_notes(config))
    return Checked(key, tuple(notes), tuple(errors))


def _missing_log_dirs(config: AgentConfig, at: Callable[[str], str]) -> list[str]:
    """Notes on event-log directories that are not there: the agent waits for them (Spark
    makes its directory at its first application), but a typo waits forever."""
    notes = []
    for index, directory in enumerate(config.spark.event_log_dirs):
        if stores.is_url(directory):
            continue  # a store's directory: `_store_notes`
        path = at(directory)
        key = (
            f"spark.event_log_dirs[{index}]"
            if len(config.spark.event_log_dirs) > 1
            else ("spark.event_log_dirs")
        )
        if not os.path.exists(path):
            notes.append(
                f"{key}: {path}: no such directory here; the agent waits for it to appear "
                "(check spark.eventLog.dir of the cluster)"
            )
        elif not os.path.isdir(path):
            notes.append(f"{key}: {path}: not a directory; the agent waits for a directory there")
    return notes


def connect_error(url: str, timeout: float = 3.0) -> str | None:
    """Why a TCP connection to `url`'s host and port fails from here, or None when one opens
    (nothing is sent). For `config check`; never on the event loop."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except OSError as error:
        return error.strerror or str(error)


def _store_notes(config: AgentConfig) -> list[str]:
    """Whether each event-log directory on a store can be listed from here: a note either
    way, since the service's credentials and network may differ from this shell's."""
    notes = []
    for i, url in enumerate(config.spark.event_log_dirs):
        if not stores.is_url(url):
            continue
        where = f"spark.event_log_dirs[{i}]: {stores.redact(url)}"
        try:  # the first page only: a bucket may hold millions of objects
            found = len(next(stores.pages(url), []))
        except FileNotFoundError:
            notes.append(f"{where}: does not exist yet (the agent waits for it)")
        except OSError as error:
            notes.append(f"{where}: cannot be listed from here: {error}")
        else:
            more = "+" if found >= listings.LIST_PAGE else ""
            notes.append(f"{where}: reachable from here ({found}{more} entries)")
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


#: Hints for `config check`, by the dotted key a problem names (the longest match wins).
HINTS: Mapping[str, str] = {
    "signing.key_path": "leave the path free and the agent makes the key at its first start, "
    "or make one now with `lineage-agent keygen --out PATH` as the service's user",
    "lineage.http.auth.token_env": "the unit reads variables from /etc/lineage-agent/environment "
    "(EnvironmentFile=); put NAME=token there, mode 0600",
    "lineage.http.ca_file": "a PEM bundle the service's user may read",
    "lineage.file.path": "a path below /var/lib/lineage-agent (the unit's StateDirectory=), the "
    "one place the shipped unit lets the agent write",
    "state_dir": "/var/lib/lineage-agent is the unit's StateDirectory=, the one place the "
    "shipped unit lets the agent write",
    "spark.event_log_dirs": "the directory of the cluster's spark.eventLog.dir "
    "(spark-defaults.conf)",
}


def hint_for(message: str) -> str | None:
    """The hint for a problem `config check` prints (`[FILE:LINE: ]key: ...`), or None."""
    if "not valid YAML" in message:
        return "YAML indents with spaces, not tabs; quote a value that holds ': ' or ' #'"
    if message.endswith(("lineage: required section is missing", "expected a 'lineage' section")):
        return "every config has a lineage: section; config/example.yaml shows each key"
    head, _, _ = message.partition(": ")
    parts = message.split(": ")
    # The key follows the location when there is one (FILE:LINE: key: ...).
    key = parts[1] if len(parts) > 2 and head.rpartition(":")[2].isdigit() else head
    key = key.partition("[")[0]
    while "." in key or key in HINTS:  # a section's hint, never one of a whole top section
        if key in HINTS:
            return HINTS[key]
        key = key.rpartition(".")[0]
    return None


def relative_note(key: str, text: str, located: Located) -> str:
    """What `config check` says of a relative path: where it resolved, and why an absolute
    one is safer for a service (the file's folder, /etc/lineage-agent, is read-only to it)."""
    resolved = _resolved(located.config, key)
    folder = os.path.dirname(os.path.abspath(located.config.source))
    return (
        f"{key}: {text!r} is relative: taken from the config file's folder {folder}, so it "
        f"is {resolved}; the shipped unit keeps /etc read-only, so give what the agent "
        "writes as an absolute path"
    )


def _resolved(config: AgentConfig, key: str) -> str:
    """The value of a dotted key (`spark.event_log_dirs[1]` included) of `config`."""
    value: object = config
    for part in key.split("."):
        name, _, index = part.partition("[")
        value = getattr(value, name)
        if index:
            value = value[int(index.rstrip("]"))]  # type: ignore[index]
    return str(value)
