"""Verifying signed RunEvents: `verify_event` for one event, `verify_files` for JSON and
JSON-lines files, as `lineage-agent verify` does, `verify_events` for events from anywhere
else (`verify --marquez` names them with `event_label`). A verifier needs only the event and
a trusted public key (see `signing` for what is signed, how nulls count and how keys are
written).

Errors:
    SignatureError: an event did not verify; `reason` is the text `lineage-agent verify`
        prints, e.g. "signature does not verify" or "unknown keyId sha256:...".
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from agent.delivery.canonical import canonicalize
from agent.delivery.signing import (
    ALGORITHM,
    CANONICALIZATION,
    SIGNATURE_FACET,
    StrPath,
    holds_null,
    key_id,
    without_nulls,
    without_signature,
)
from agent.errors import CanonicalizationError, SignatureError

_SIGNATURE_BYTES: Final = 64
_KEY_ID: Final = re.compile(r"sha256:[A-Za-z0-9_-]{43}")
_LINES_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})


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
    signature verifies over the canonical bytes of the event without the facet and without
    null-valued members (read as absent at any depth, so an event Marquez wrote back with
    nulls for the properties it did not get still verifies).
    """
    parsed = parse_strict(event) if isinstance(event, bytes | str) else event
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
    unsigned, _ = without_signature(event, for_signing=False)
    try:
        payload = canonicalize(unsigned)
        if holds_null(payload):  # a null member is an absent one (Marquez writes them)
            payload = canonicalize(without_nulls(unsigned))
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


def event_label(event: object) -> str:
    """How `verify --marquez` names an event: `run RUN_ID EVENT_TYPE job NAMESPACE/NAME`,
    each part as the event says it (escaped and quoted when not plain text), `?` if absent."""
    if not isinstance(event, Mapping):
        return "not an object"
    run, job = event.get("run"), event.get("job")
    run_id = run.get("runId") if isinstance(run, Mapping) else None
    namespace, name = (
        (job.get("namespace"), job.get("name")) if isinstance(job, Mapping) else (None, None)
    )
    return (
        f"run {_plain(run_id)} {_plain(event.get('eventType'))} "
        f"job {_plain(namespace)}/{_plain(name)}"
    )


def _plain(value: object) -> str:
    if value is None:
        return "?"
    if isinstance(value, str) and value.isprintable() and " " not in value and len(value) <= 200:
        return value
    return _shown(value)


def _shown(value: object) -> str:
    """A field from an untrusted event, made safe (ASCII, escaped) and short to print."""
    text = json.dumps(value, ensure_ascii=True, default=lambda other: type(other).__name__)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_strict(text: bytes | str) -> object:
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


def verify_events(
    events: Iterable[tuple[str, object]],
    trusted: VerifyKey | Iterable[VerifyKey],
    on_problem: Callable[[Problem], None] | None = None,
) -> VerifyReport:
    """Verify (position, event) pairs, events parsed or as JSON bytes, as they come; each
    problem goes to `on_problem` as soon as it is found, and into the report."""
    keys = _trusted(trusted)
    checked = 0
    problems: list[Problem] = []
    for position, event in events:
        checked += 1
        for problem in _check_all([(position, event)], keys):
            problems.append(problem)
            if on_problem is not None:
                on_problem(problem)
    return VerifyReport(checked, checked - len(problems), tuple(problems))


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
            document = parse_strict(data)
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
            _verify(parse_strict(event) if isinstance(event, bytes) else event, keys)
        except SignatureError as error:
            problems.append(Problem(position, error.reason))
    return problems
