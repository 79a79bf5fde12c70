"""Ed25519 signatures over RFC 8785 bytes: the signer, key files and verification.

Every shipped RunEvent carries `run.facets.lineageAgent_signature`:
`{_producer, _schemaURL, algorithm: "Ed25519", keyId, canonicalization: "RFC8785",
signature}`. The signed bytes are `canonicalize(event)` of the event exactly as shipped minus
that one facet key, and nothing else: if the event had no other run facet, `run.facets` stays
as `{}` (the signer adds an empty `facets` object when the event had none, so that what the
verifier sees after removing the facet is what was signed). `keyId` is `sha256:` plus the
unpadded base64url of the SHA-256 of the raw 32-byte public key.

Key formats (one line of text each, as WireGuard keeps its keys):
    private key file: base64 of the 32-byte Ed25519 seed and a newline, mode 0600;
        `load_signing_key` refuses it when group or others may read or write it.
    public key: base64 of the raw 32-byte public key, as `lineage-agent pubkey` prints it; a
        string or a file holding that text.

Errors:
    KeyFileError: a key file is missing, unreadable, too open or malformed. Messages name the
        path and the fault and never contain key material.
    SignatureError: an event did not verify; `reason` is the text `lineage-agent verify`
        prints, e.g. "signature does not verify" or "unknown keyId sha256:...".
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

import orjson
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from agent.canonical import canonicalize
from agent.errors import CanonicalizationError, KeyFileError, SignatureError
from agent.facets import FACET_URLS, PRODUCER
from agent.fsutil import fsync_directory

SIGNATURE_FACET: Final = "lineageAgent_signature"
ALGORITHM: Final = "Ed25519"
CANONICALIZATION: Final = "RFC8785"

_KEY_BYTES: Final = 32
_SIGNATURE_BYTES: Final = 64
# Far above any key file; reading stops there so a wrong path cannot make us slurp a disk.
_KEY_FILE_LIMIT: Final = 4096
_KEY_ID: Final = re.compile(r"sha256:[A-Za-z0-9_-]{43}")
_LINES_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})

StrPath = str | os.PathLike[str]


def key_id(verify_key: VerifyKey) -> str:
    """`sha256:` + unpadded base64url of the SHA-256 of the raw 32-byte public key."""
    digest = hashlib.sha256(bytes(verify_key)).digest()
    return "sha256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def public_key_text(verify_key: VerifyKey) -> str:
    """The public key as `lineage-agent pubkey` prints it: base64 of the raw 32 bytes."""
    return base64.b64encode(bytes(verify_key)).decode("ascii")


class Signer:
    """Signs RunEvents with one Ed25519 key; immutable, safe to share between tasks."""

    __slots__ = ("_facet_base", "_key", "_key_id", "_verify_key")

    def __init__(self, private_key: SigningKey) -> None:
        self._key = private_key
        self._verify_key = private_key.verify_key
        self._key_id = key_id(self._verify_key)
        self._facet_base: dict[str, str] = {
            "_producer": PRODUCER,
            "_schemaURL": FACET_URLS[SIGNATURE_FACET],
            "algorithm": ALGORITHM,
            "keyId": self._key_id,
            "canonicalization": CANONICALIZATION,
        }

    @property
    def key_id(self) -> str:
        return self._key_id

    @property
    def verify_key(self) -> VerifyKey:
        return self._verify_key

    def sign_event(self, event: Mapping[str, Any]) -> bytes:
        """The compact UTF-8 JSON to ship: `event` plus its signature facet.

        `event` is not changed: only the top level, `run` and `run.facets` are copied
        (shallowly), everything below is shared. An existing signature facet is replaced.
        Raises ValueError (CanonicalizationError for values JSON cannot hold) when the event
        has no `run` object or cannot be canonicalized.
        """
        shipped, facets = _without_signature(event, for_signing=True)
        signature = self._key.sign(canonicalize(shipped)).signature
        facets[SIGNATURE_FACET] = {
            **self._facet_base,
            "signature": base64.b64encode(signature).decode("ascii"),
        }
        try:
            return orjson.dumps(shipped)
        except orjson.JSONEncodeError as error:
            # Only values canonicalize accepts but orjson does not (float subclasses) get here.
            raise ValueError(f"cannot serialize the event: {error}") from None


def _without_signature(
    event: Mapping[str, Any], *, for_signing: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`event` minus `run.facets.lineageAgent_signature`, and the new `run.facets` dict."""
    run = event.get("run")
    if not isinstance(run, Mapping):
        raise ValueError("the event has no run object")
    facets = run.get("facets", {}) if for_signing else run["facets"]
    if not isinstance(facets, Mapping):
        raise ValueError("run.facets is not an object")
    facets = {name: facet for name, facet in facets.items() if name != SIGNATURE_FACET}
    return {**event, "run": {**run, "facets": facets}}, facets


# --- key files ------------------------------------------------------------------------------


def generate_key_file(path: StrPath) -> VerifyKey:
    """Create a new private key file at `path` (mode 0600) and return its public key.

    The file is created with O_EXCL, so an existing file (or symlink) is never replaced:
    KeyFileError "refusing to overwrite existing key file PATH".
    """
    if os.path.lexists(path):
        raise KeyFileError(f"refusing to overwrite existing key file {os.fspath(path)}")
    key = SigningKey.generate()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise KeyFileError(f"refusing to overwrite existing key file {os.fspath(path)}") from None
    except OSError as error:
        raise KeyFileError(
            f"{os.fspath(path)}: cannot create private key file: {error.strerror}"
        ) from None
    try:
        os.fchmod(fd, 0o600)  # the umask may have removed owner bits; it never adds any
        with os.fdopen(fd, "wb", closefd=False) as file:
            file.write(base64.b64encode(bytes(key)) + b"\n")
        os.fsync(fd)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(path)  # no half-written key file left behind
        raise KeyFileError(
            f"{os.fspath(path)}: cannot write private key file: {error.strerror}"
        ) from None
    finally:
        os.close(fd)
    fsync_directory(os.path.dirname(os.path.abspath(path)))
    return key.verify_key


def load_signing_key(path: StrPath) -> SigningKey:
    """Read a private key file written by `generate_key_file`.

    Refuses a file that group or others may access, a missing or unreadable file, and any
    content but the base64 of a 32-byte seed, each with its own KeyFileError message.
    """
    name = os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO at the path must fail the regular-file check, not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise KeyFileError(f"{name}: private key file does not exist") from None
    except OSError as error:
        raise KeyFileError(f"{name}: cannot read private key file: {error.strerror}") from None
    try:
        # Checked on the open descriptor: the file judged is the file read.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(f"{name}: private key path is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise KeyFileError(
                f"{name}: private key is accessible by group or others (mode {mode:04o}); "
                f"run chmod 600 {name}"
            )
        data = os.read(fd, _KEY_FILE_LIMIT)
    except OSError as error:
        raise KeyFileError(f"{name}: cannot read private key file: {error.strerror}") from None
    finally:
        os.close(fd)
    seed = _decode_key(data, name, "private key")
    return SigningKey(seed)


def load_verify_key(path_or_text: StrPath) -> VerifyKey:
    """A trusted public key from the base64 text `lineage-agent pubkey` prints, or a file
    holding that text. A string that decodes to 32 bytes is taken as the key itself."""
    if isinstance(path_or_text, str):
        text = path_or_text.strip().encode("ascii", "replace")
        if _looks_like_key(text):
            return VerifyKey(base64.b64decode(text, validate=True))
    name = os.fspath(path_or_text)
    try:
        with open(path_or_text, "rb") as file:
            data = file.read(_KEY_FILE_LIMIT)
    except FileNotFoundError:
        raise KeyFileError(
            f"{name}: neither a public key file nor a base64-encoded 32-byte Ed25519 public key"
        ) from None
    except OSError as error:
        raise KeyFileError(f"{name}: cannot read public key file: {error.strerror}") from None
    return VerifyKey(_decode_key(data, name, "public key"))


def _looks_like_key(text: bytes) -> bool:
    try:
        return len(base64.b64decode(text, validate=True)) == _KEY_BYTES
    except binascii.Error:
        return False


def _decode_key(data: bytes, name: str, what: str) -> bytes:
    """The 32 key bytes of a key file's content; messages describe it, never quote it."""
    text = data.strip()
    if not text:
        raise KeyFileError(f"{name}: {what} file is empty")
    if len(data) >= _KEY_FILE_LIMIT:
        raise KeyFileError(
            f"{name}: not an Ed25519 {what} file (expected one line of base64, "
            f"found {_KEY_FILE_LIMIT} bytes or more)"
        )
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise KeyFileError(
            f"{name}: {what} is not valid base64 (expected the base64 of "
            f"{_KEY_BYTES} bytes on one line)"
        ) from None
    if len(raw) != _KEY_BYTES:
        raise KeyFileError(
            f"{name}: {what} is {len(raw)} bytes after base64 decoding; "
            f"an Ed25519 key is {_KEY_BYTES}"
        )
    return raw


# --- verification ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verified:
    """An event whose signature verified, and the id of the key that made it."""

    key_id: str
    event: Mapping[str, Any]


def verify_event(
    event: Mapping[str, Any] | bytes | str, trusted: VerifyKey | Iterable[VerifyKey]
) -> Verified:
    """Check one event's signature; raise SignatureError with the reason when it fails.

    `event` is a parsed event or its JSON text. JSON text is parsed strictly: duplicate
    object keys and NaN/Infinity are refused, since a parser that kept the other duplicate
    would see an event other than the one verified. Checks, in order: the facet is present,
    `algorithm` and `canonicalization` are ours, `keyId` names a trusted key, and the
    signature verifies over the canonical bytes of the event without the facet.
    """
    parsed = _parse(event) if isinstance(event, bytes | str) else event
    return _verify(parsed, _trusted(trusted))


def _trusted(trusted: VerifyKey | Iterable[VerifyKey]) -> dict[str, VerifyKey]:
    keys = [trusted] if isinstance(trusted, VerifyKey) else list(trusted)
    return {key_id(key): key for key in keys}


def _verify(event: object, keys: Mapping[str, VerifyKey]) -> Verified:
    if not isinstance(event, Mapping):
        raise SignatureError("not a JSON object")
    run = event.get("run")
    facets = run.get("facets") if isinstance(run, Mapping) else None
    facet = facets.get(SIGNATURE_FACET) if isinstance(facets, Mapping) else None
    if facet is None:
        raise SignatureError(f"no {SIGNATURE_FACET} facet")
    if not isinstance(facet, Mapping):
        raise SignatureError(f"malformed {SIGNATURE_FACET} facet: not an object")
    if facet.get("algorithm") != ALGORITHM:
        raise SignatureError(
            f"unsupported algorithm {_shown(facet.get('algorithm'))} (expected {ALGORITHM})"
        )
    if facet.get("canonicalization") != CANONICALIZATION:
        raise SignatureError(
            f"unsupported canonicalization {_shown(facet.get('canonicalization'))} "
            f"(expected {CANONICALIZATION})"
        )
    claimed = facet.get("keyId")
    if not isinstance(claimed, str) or claimed not in keys:
        # A well-formed id is printed as is (the operator compares it with `pubkey`).
        well_formed = isinstance(claimed, str) and _KEY_ID.fullmatch(claimed)
        raise SignatureError(f"unknown keyId {claimed if well_formed else _shown(claimed)}")
    verify_key = keys[claimed]
    signature = _signature_bytes(facet.get("signature"))
    unsigned, _ = _without_signature(event, for_signing=False)
    try:
        payload = canonicalize(unsigned)
    except CanonicalizationError as error:
        raise SignatureError(f"cannot canonicalize: {error}") from None
    try:
        verify_key.verify(payload, signature)
    except BadSignatureError:
        raise SignatureError("signature does not verify") from None
    return Verified(claimed, event)


def _signature_bytes(value: object) -> bytes:
    malformed = f"malformed {SIGNATURE_FACET} facet: signature is not the base64 of 64 bytes"
    if not isinstance(value, str):
        raise SignatureError(malformed)
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise SignatureError(malformed) from None
    if len(raw) != _SIGNATURE_BYTES:
        raise SignatureError(malformed)
    return raw


def _shown(value: object) -> str:
    """A field from an untrusted event, made safe (ASCII, escaped) and short to print."""
    text = json.dumps(value, ensure_ascii=True, default=lambda other: type(other).__name__)
    return text if len(text) <= 80 else text[:77] + "..."


def _parse(text: bytes | str) -> object:
    """Strict JSON: UTF-8 only, no duplicate keys, no NaN/Infinity; SignatureError if not."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except UnicodeDecodeError as error:
        raise SignatureError(f"not valid JSON: invalid UTF-8 at byte {error.start}") from None
    except ValueError as error:  # json.JSONDecodeError and the hooks' errors
        raise SignatureError(f"not valid JSON: {error}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {json.dumps(key)} in an object")
            seen.add(key)
    return result


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


# --- files ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """One event (or file) that failed: `position` is `file:line` for JSON lines,
    `file[index]` for an array, the file name for a single event or a whole-file fault."""

    position: str
    reason: str

    def __str__(self) -> str:
        return f"{self.position}: {self.reason}"


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of `verify_files`: what `lineage-agent verify` prints."""

    checked: int
    verified: int
    problems: tuple[Problem, ...]

    @property
    def passed(self) -> bool:
        """True when nothing failed (no bad event, no unreadable file)."""
        return not self.problems

    def lines(self) -> list[str]:
        """One line per problem, then the summary line."""
        return [str(problem) for problem in self.problems] + [
            f"{self.checked} events checked, {self.verified} verified, {len(self.problems)} failed"
        ]


def verify_file(path: StrPath, trusted: VerifyKey | Iterable[VerifyKey]) -> list[Problem]:
    """The problems of every event in a JSON file (one event or an array of events) or a
    JSON-lines file (one event per line, blank lines skipped); empty when all verify.

    Files named *.jsonl or *.ndjson (also rotated ones, events.jsonl.<n>) are read as JSON
    lines; other files as one JSON document, or as JSON lines if they hold several values.
    """
    return _check_file(path, _trusted(trusted))[1]


def verify_files(
    paths: Iterable[StrPath], trusted: VerifyKey | Iterable[VerifyKey]
) -> VerifyReport:
    """Verify every event of every file; the report keeps the problems in file order.

    An unreadable or unparsable file is one problem and adds no checked event.
    """
    keys = _trusted(trusted)
    checked = 0
    failed = 0
    problems: list[Problem] = []
    for path in paths:
        count, found = _check_file(path, keys)
        checked += count
        failed += len(found) if count else 0
        problems += found
    return VerifyReport(checked, checked - failed, tuple(problems))


def _check_file(path: StrPath, keys: Mapping[str, VerifyKey]) -> tuple[int, list[Problem]]:
    """(events checked, problems) of one file; a whole-file problem comes with 0 events."""
    name = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        return 0, [Problem(name, f"cannot read: {error.strerror}")]
    if _LINES_SUFFIXES.isdisjoint(Path(name).suffixes):
        try:
            document = _parse(data)
        except SignatureError as error:
            if "Extra data" not in error.reason:
                return 0, [Problem(name, error.reason)]
            # Several JSON values: JSON lines in a file without the usual suffix.
        else:
            if isinstance(document, list):
                positions = [f"{name}[{index}]" for index in range(len(document))]
                return len(document), _check_all(zip(positions, document, strict=True), keys)
            return 1, _check_all([(name, document)], keys)
    lines = [
        (f"{name}:{number}", line)
        for number, line in enumerate(data.split(b"\n"), start=1)
        if line.strip()
    ]
    return len(lines), _check_all(lines, keys)


def _check_all(
    events: Iterable[tuple[str, object]], keys: Mapping[str, VerifyKey]
) -> list[Problem]:
    problems = []
    for position, event in events:
        try:
            _verify(_parse(event) if isinstance(event, bytes) else event, keys)
        except SignatureError as error:
            problems.append(Problem(position, error.reason))
    return problems
