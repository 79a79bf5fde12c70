"""Ed25519 signatures over RFC 8785 bytes: the signer and key files (`verify` checks them).

Every shipped RunEvent carries `run.facets.lineageAgent_signature`:
`{_producer, _schemaURL, algorithm: "Ed25519", keyId, canonicalization: "RFC8785",
signature}`. The signed bytes are `canonicalize(event)` of the event exactly as shipped minus
that one facet key, and nothing else: if the event had no other run facet, `run.facets` stays
as `{}` (the signer adds an empty `facets` object when the event had none, so that what the
verifier sees after removing the facet is what was signed). `keyId` is `sha256:` plus the
unpadded base64url of the SHA-256 of the raw 32-byte public key.

Nulls: a null-valued object member means the same as an absent one (OpenLineage's optional
properties; Marquez writes every property its model declares, null when the event had none),
so the signer ships and signs events without them and `verify` removes them before it
canonicalizes: an event that went through Marquez still verifies. A null array element has
no absent form; the signer refuses it.

Key formats (base64 text, as WireGuard keeps its keys):
    private key file: the header line `PRIVATE_KEY_HEADER`, then the base64 of the 32-byte
        Ed25519 seed and a newline, mode 0600; `load_signing_key` refuses it when group or
        others may read or write it. A file of the base64 line alone (written before the
        header) still loads.
    public key: base64 of the raw 32-byte public key, as `lineage-agent pubkey` prints it; a
        string or a file holding that text. `load_verify_key` refuses a private key file
        (by its header) with a message that says how to get its public key.

Errors:
    KeyFileError: a key file is missing, unreadable, too open or malformed. Messages name the
        path and the fault and never contain key material.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson
from nacl.signing import SigningKey, VerifyKey

from agent.delivery.canonical import canonicalize
from agent.errors import KeyFileError
from agent.facets import FACET_URLS, PRODUCER
from agent.fsutil import fsync_directory

SIGNATURE_FACET: Final = "lineageAgent_signature"
ALGORITHM: Final = "Ed25519"
CANONICALIZATION: Final = "RFC8785"

_KEY_BYTES: Final = 32
#: The first line of a private key file: says what the file is to a person and to
#: `load_verify_key`, which refuses it where a public key is wanted.
PRIVATE_KEY_HEADER: Final = (
    "# lineage-agent Ed25519 private key (secret; public key: lineage-agent pubkey --key FILE)"
)
# Far above any key file; reading stops there so a wrong path cannot make us slurp a disk.
_KEY_FILE_LIMIT: Final = 4096

StrPath = str | os.PathLike[str]


def key_id(verify_key: VerifyKey) -> str:
    """`sha256:` + unpadded base64url of the SHA-256 of the raw 32-byte public key."""
    digest = hashlib.sha256(bytes(verify_key)).digest()
    return "sha256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def key_id_as_seed(key: VerifyKey) -> str:
    """The key id `key`'s 32 bytes would sign under if they were a private key's seed: a
    private key file written before the header is bare base64, like a public key, and a
    verifier given one sees every event signed by this id instead."""
    return key_id(SigningKey(bytes(key)).verify_key)


def public_key_text(verify_key: VerifyKey) -> str:
    """The public key as `lineage-agent pubkey` prints it: base64 of the raw 32 bytes."""
    return base64.b64encode(bytes(verify_key)).decode("ascii")


class Signer:
    """Signs RunEvents with one Ed25519 key; immutable, safe to share between tasks."""

    __slots__ = ("_facet_base", "_key", "key_id", "verify_key")

    def __init__(self, private_key: SigningKey) -> None:
        self._key = private_key
        self.verify_key: Final = private_key.verify_key
        self.key_id: Final = key_id(self.verify_key)
        self._facet_base: dict[str, str] = {
            "_producer": PRODUCER,
            "_schemaURL": FACET_URLS[SIGNATURE_FACET],
            "algorithm": ALGORITHM,
            "keyId": self.key_id,
            "canonicalization": CANONICALIZATION,
        }

    def sign_event(self, event: Mapping[str, Any]) -> bytes:
        """The compact UTF-8 JSON to ship: `event` plus its signature facet.

        `event` is not changed: only the top level, `run` and `run.facets` are copied
        (shallowly), everything below is shared; an event holding nulls is copied whole
        without its null members. An existing signature facet is replaced. Raises ValueError
        (CanonicalizationError for values JSON cannot hold) when the event has no `run`
        object, holds a null array element or cannot be canonicalized.
        """
        shipped, facets = without_signature(event, for_signing=True)
        payload = canonicalize(shipped)
        if holds_null(payload):
            shipped, facets = without_signature(
                without_nulls(shipped, refuse_elements=True), for_signing=True
            )
            payload = canonicalize(shipped)
        signature = self._key.sign(payload).signature
        facets[SIGNATURE_FACET] = {
            **self._facet_base,
            "signature": base64.b64encode(signature).decode("ascii"),
        }
        try:
            return orjson.dumps(shipped)
        except orjson.JSONEncodeError as error:
            # Only values canonicalize accepts but orjson does not (float subclasses) get here.
            raise ValueError(f"cannot serialize the event: {error}") from None


def without_signature(
    event: Mapping[str, Any], *, for_signing: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`event` minus `run.facets.lineageAgent_signature`, and the new `run.facets` dict."""
    run = event.get("run")
    if not isinstance(run, Mapping):
        raise ValueError("the event has no run object")
    facets = run.get("facets") if for_signing else run["facets"]
    if facets is None and for_signing:
        facets = {}
    if not isinstance(facets, Mapping):
        raise ValueError("run.facets is not an object")
    facets = {name: facet for name, facet in facets.items() if name != SIGNATURE_FACET}
    return {**event, "run": {**run, "facets": facets}}, facets


def holds_null(canonical: bytes) -> bool:
    """Whether JCS bytes may hold a null: `null` right after `:`, `,` or `[`, where a value
    starts. Inside a string that only costs a closer look; `nullCount` never matches.

    One scan for the word (a regular expression over the whole event costs a quarter of
    signing it), then a look at the byte before each of its few places.
    """
    at = canonical.find(b"null")
    while at > 0:
        if canonical[at - 1] in b":,[":
            return True
        at = canonical.find(b"null", at + 4)
    return False


def without_nulls(value: Any, *, refuse_elements: bool = False) -> Any:
    """`value` without its null-valued object members, at every depth; containers are copied.

    A null array element stays (it has no absent form), or with `refuse_elements` raises
    ValueError naming it as a JSON Pointer: "null array element at /inputs/1".
    """
    try:
        return _without_nulls(value, refuse_elements)
    except _NullElement as error:
        steps = (str(step).replace("~", "~0").replace("/", "~1") for step in reversed(error.path))
        raise ValueError(f"null array element at /{'/'.join(steps)}") from None


class _NullElement(Exception):
    """A refused null array element; the containers around it add their key or index."""

    def __init__(self) -> None:
        super().__init__()
        self.path: list[object] = []


def _without_nulls(value: Any, refuse: bool) -> Any:
    members: Iterable[tuple[Any, Any]]
    if isinstance(value, Mapping):
        members = ((name, item) for name, item in value.items() if item is not None)
    elif isinstance(value, list | tuple):
        members = enumerate(value)
    else:
        return value
    result: dict[Any, Any] = {}
    for step, item in members:
        try:
            if item is None:  # only an array element gets here
                if refuse:
                    raise _NullElement
                result[step] = None
            else:
                result[step] = _without_nulls(item, refuse)
        except _NullElement as error:
            error.path.append(step)
            raise
    return result if isinstance(value, Mapping) else list(result.values())


# --- key files ------------------------------------------------------------------------------


def generate_key_file(path: StrPath) -> VerifyKey:
    """Create a new private key file at `path` (mode 0600) and return its public key.

    The key is written whole under a temporary name beside `path` and then linked to it, so
    the path never names a partial key, not even after a crash or a full disk, and an
    existing file (or symlink) is never replaced: KeyFileError "refusing to overwrite
    existing key file PATH" (also when another process made one meanwhile).
    """
    name = os.fspath(path)
    if os.path.lexists(path):
        raise KeyFileError(f"refusing to overwrite existing key file {name}")
    key = SigningKey.generate()
    directory, base = os.path.split(os.path.abspath(name))
    try:
        # O_EXCL | O_NOFOLLOW, mode 0600 (less under a strict umask, never more).
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{base}.")
    except OSError as error:
        raise KeyFileError(f"{name}: cannot create private key file: {error.strerror}") from None
    try:
        os.fchmod(fd, 0o600)  # the umask may have removed owner bits; it never adds any
        with os.fdopen(fd, "wb", closefd=False) as file:
            file.write(PRIVATE_KEY_HEADER.encode() + b"\n" + base64.b64encode(bytes(key)) + b"\n")
        os.fsync(fd)
        os.link(temporary, name)  # fails on anything at `name`; follows no link there
    except FileExistsError:
        raise KeyFileError(f"refusing to overwrite existing key file {name}") from None
    except OSError as error:
        raise KeyFileError(f"{name}: cannot write private key file: {error.strerror}") from None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    fsync_directory(directory)
    return key.verify_key


def load_signing_key(path: StrPath) -> SigningKey:
    """Read a private key file written by `generate_key_file`.

    Refuses a file that group or others may access, a missing or unreadable file, a PEM
    block of any kind, a file without the header (a public key looks like that), and any
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
    _refuse_foreign(data, name)
    if len(data) >= _KEY_FILE_LIMIT:
        _decode_key(data, name, "private key")  # says it is too long
    header, body = _split_header(data)
    if header is not None and not header.startswith(_HEADER_MARK):
        raise KeyFileError(
            f"{name}: not a lineage-agent private key file (its first line is a comment that "
            "is not the header `lineage-agent keygen` writes)"
        )
    seed = _decode_key(body, name, "private key")
    if header is None:
        # A bare base64 key is what `pubkey` prints: a public key given here would sign
        # nothing anyone can verify, so only the header tells a private key apart.
        raise KeyFileError(
            f"{name}: found one base64 line and no `{_HEADER_MARK}` header: a public key (as"
            " `lineage-agent pubkey` prints it) or a private key written before the header;"
            " a private key needs that line at its top (see docs/operations/install.md)"
        )
    return SigningKey(seed)


def load_verify_key(path_or_text: StrPath) -> VerifyKey:
    """A trusted public key from the base64 text `lineage-agent pubkey` prints, or a file
    holding that text. A string that decodes to 32 bytes is taken as the key itself."""
    if isinstance(path_or_text, str):
        if path_or_text.lstrip().startswith(_HEADER_MARK):
            raise KeyFileError(_private_where_public("the text given"))
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
    if data.lstrip().startswith(_HEADER_MARK.encode()):
        raise KeyFileError(_private_where_public(name))
    return VerifyKey(_decode_key(data, name, "public key"))


#: What identifies the header, whatever follows it on its line.
_HEADER_MARK: Final = "# lineage-agent Ed25519 private key"


def _private_where_public(name: str) -> str:
    shown = "FILE" if name == "the text given" else name
    return (
        f"{name}: this is a private key file, not a public key; never hand it out: give its "
        f"public key instead, as `lineage-agent pubkey --key {shown}` prints it"
    )


def _refuse_foreign(data: bytes, name: str) -> None:
    """A PEM block (an RSA, EC, PKCS#8 or OpenSSH key, a certificate) named by its label."""
    text = data.lstrip()
    if text.startswith(b"-----BEGIN "):
        label = text[len(b"-----BEGIN ") :].partition(b"-----")[0][:40]
        shown = label.decode("ascii", "replace")
        raise KeyFileError(
            f"{name}: found a PEM {shown} block, not the agent's Ed25519 private key file"
            " (lineage-agent keygen --out PATH writes one)"
        )


def _split_header(data: bytes) -> tuple[str | None, bytes]:
    """The comment line a key file starts with (None without one) and the rest."""
    text = data.lstrip()
    if not text.startswith(b"#"):
        return None, data
    first, _, rest = text.partition(b"\n")
    return first.decode("utf-8", "replace").rstrip("\r"), rest


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
