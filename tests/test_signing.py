"""Ed25519 signing of RunEvents, key files and verification, checked with independent parts."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jsonschema import Draft202012Validator
from nacl.signing import SigningKey, VerifyKey

from agent.delivery.signing import (
    Signer,
    generate_key_file,
    holds_null,
    key_id,
    load_signing_key,
    load_verify_key,
    public_key_text,
)
from agent.delivery.verify import Problem, Verified, verify_event, verify_file, verify_files
from agent.errors import KeyFileError, SignatureError
from agent.facets import FACET_URLS, PRODUCER
from tests.independent import stripped
from tests.olschema import (
    AGENT_SCHEMAS,
    SchemaViolation,
    example_run_event,
    schema_validator,
    validate_run_event,
)

FACET = "lineageAgent_signature"
SIGNATURE_SCHEMA_URL = FACET_URLS[FACET]


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey(bytes(range(32)))


@pytest.fixture(scope="module")
def other_key() -> SigningKey:
    return SigningKey(bytes(range(100, 132)))


@pytest.fixture(scope="module")
def signer(key: SigningKey) -> Signer:
    return Signer(key)


@pytest.fixture
def shipped(signer: Signer) -> dict[str, Any]:
    """A signed example event as a receiver parses it."""
    parsed: dict[str, Any] = json.loads(signer.sign_event(example_run_event()))
    return parsed


def independent_verify(event: dict[str, Any], verify_key: VerifyKey) -> None:
    """Verify with `cryptography` over `rfc8785` bytes; raises InvalidSignature on failure."""
    unsigned = copy.deepcopy(event)
    facet = unsigned["run"]["facets"].pop(FACET)
    public = Ed25519PublicKey.from_public_bytes(bytes(verify_key))
    public.verify(base64.b64decode(facet["signature"]), rfc8785.dumps(unsigned))


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths of every scalar inside a parsed JSON value."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from leaves(item, (*path, name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path


def altered(value: Any) -> Any:
    """A different value of the same JSON type (one character, digit or bit changed)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value ^ 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return value[:-1] + chr(ord(value[-1]) ^ 1) if value else "x"
    return 0  # None


def set_path(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = event
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def reordered(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {name: reordered(value[name]) for name in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


# --- signing ----------------------------------------------------------------------------------


def test_signed_event_verifies_with_independent_libraries(
    shipped: dict[str, Any], key: SigningKey
) -> None:
    """`cryptography` verifies the signature over `rfc8785` bytes of the event minus the facet."""
    independent_verify(shipped, key.verify_key)


def test_signature_facet_fields(shipped: dict[str, Any], key: SigningKey) -> None:
    """The facet carries producer, schema URL, algorithm, keyId, canonicalization, signature."""
    facet = shipped["run"]["facets"][FACET]
    signature = facet.pop("signature")
    assert facet == {
        "_producer": PRODUCER,
        "_schemaURL": SIGNATURE_SCHEMA_URL,
        "algorithm": "Ed25519",
        "keyId": key_id(key.verify_key),
        "canonicalization": "RFC8785",
    }
    assert len(base64.b64decode(signature, validate=True)) == 64


def test_shipped_bytes_are_compact_utf8_json(signer: Signer) -> None:
    """The shipped bytes are compact UTF-8 JSON that keeps the event's own key order."""
    event = example_run_event()
    event["job"]["name"] = "jöb ✓ \U0001f600"
    payload = signer.sign_event(event)
    assert b"\n" not in payload and b'", "' not in payload
    parsed = json.loads(payload.decode("utf-8"))
    assert list(parsed) == list(event)
    assert parsed["job"]["name"] == "jöb ✓ \U0001f600"


def test_signing_does_not_change_the_event(signer: Signer) -> None:
    """sign_event leaves its input as it was, down to the facets dict."""
    event = example_run_event()
    before = copy.deepcopy(event)
    facets = event["run"]["facets"]
    signer.sign_event(event)
    assert event == before
    assert event["run"]["facets"] is facets and FACET not in facets


def test_event_without_run_facets_is_signed_with_empty_facets(
    signer: Signer, key: SigningKey
) -> None:
    """Without run.facets the signed bytes hold "facets": {}, what a verifier sees after
    removing the signature facet."""
    event = example_run_event()
    del event["run"]["facets"]
    shipped = json.loads(signer.sign_event(event))
    assert list(shipped["run"]["facets"]) == [FACET]
    independent_verify(shipped, key.verify_key)
    assert b'"run":{"facets":{},"runId"' in rfc8785.dumps(
        {**shipped, "run": {**shipped["run"], "facets": {}}}
    )


def test_resigning_replaces_the_old_signature(signer: Signer, other_key: SigningKey) -> None:
    """Signing an already signed event replaces its signature facet."""
    first = json.loads(Signer(other_key).sign_event(example_run_event()))
    second = json.loads(signer.sign_event(first))
    assert second["run"]["facets"][FACET]["keyId"] == signer.key_id
    assert verify_event(second, signer.verify_key).key_id == signer.key_id


def test_event_without_run_cannot_be_signed(signer: Signer) -> None:
    """An event without a run object is refused with a precise message."""
    event = example_run_event()
    del event["run"]
    with pytest.raises(ValueError) as caught:
        signer.sign_event(event)
    assert str(caught.value) == "the event has no run object"


def test_event_with_nan_cannot_be_signed(signer: Signer) -> None:
    """An event JCS cannot hold is refused with the canonicalization error."""
    event = example_run_event()
    event["run"]["facets"]["lineageAgent_run"]["recordsIn"] = float("nan")
    with pytest.raises(ValueError) as caught:
        signer.sign_event(event)
    assert str(caught.value) == (
        "float nan is not representable in JSON (at /run/facets/lineageAgent_run/recordsIn)"
    )


def test_null_members_are_neither_shipped_nor_signed(signer: Signer, key: SigningKey) -> None:
    """The signer leaves out null members at every depth: the shipped bytes hold no null and
    are the bytes of the same event without them."""
    event = with_nulls_added(example_run_event())
    event["run"]["facets"]["lineageAgent_run"]["recordsIn"] = None
    before = copy.deepcopy(event)
    payload = signer.sign_event(event)
    assert event == before
    assert re.search(rb"[:,\[]null", payload) is None
    assert payload == signer.sign_event(stripped(event))
    independent_verify(json.loads(payload), key.verify_key)


def test_null_run_facets_are_signed_as_empty(signer: Signer, key: SigningKey) -> None:
    """`run.facets: null` is an absent facets object: signed as `{}`."""
    event = example_run_event()
    event["run"]["facets"] = None
    shipped = json.loads(signer.sign_event(event))
    assert list(shipped["run"]["facets"]) == [FACET]
    independent_verify(shipped, key.verify_key)


def test_the_word_null_inside_strings_is_kept(signer: Signer, key: SigningKey) -> None:
    """A string holding `null` (even `:null`) is data, shipped as it was."""
    event = example_run_event()
    event["job"]["facets"]["sql"]["query"] = 'SELECT null AS "x:null", nullif(a, b) FROM t'
    shipped = json.loads(signer.sign_event(event))
    assert shipped["job"]["facets"]["sql"] == event["job"]["facets"]["sql"]
    independent_verify(shipped, key.verify_key)


@pytest.mark.parametrize(
    ("canonical", "held"),
    [
        (b'{"a":null}', True),
        (b"[null]", True),
        (b"[1,null]", True),
        (b'{"a":{"b":[{"c":null}]}}', True),
        (b'{"nullCount":1,"nullable":true}', False),
        (b'{"q":"is not null"}', False),
        (b'{"q":"a:null"}', True),  # only a closer look, which finds nothing to remove
        (b"null", False),  # a top-level null is no event
    ],
)
def test_holds_null_finds_every_null_value(canonical: bytes, held: bool) -> None:
    """`holds_null` says yes wherever a value may be null, and no for keys that merely
    start with the word."""
    assert holds_null(canonical) is held


def test_null_array_element_cannot_be_signed(signer: Signer) -> None:
    """A null array element has no absent form: the event is refused, the element named."""
    event = example_run_event()
    event["inputs"][0]["facets"]["schema"]["fields"][1] = None
    event["job"]["facets"]["documentation"] = None
    with pytest.raises(ValueError) as caught:
        signer.sign_event(event)
    assert str(caught.value) == "null array element at /inputs/0/facets/schema/fields/1"


def test_null_array_element_pointer_escapes_keys(signer: Signer) -> None:
    """Keys holding `/` or `~` are escaped in the pointer as RFC 6901 says."""
    event = example_run_event()
    event["run"]["facets"]["x/y~z"] = {"list": [1, None]}
    with pytest.raises(ValueError) as caught:
        signer.sign_event(event)
    assert str(caught.value) == "null array element at /run/facets/x~1y~0z/list/1"


def test_signed_event_is_schema_valid(shipped: dict[str, Any]) -> None:
    """The signed event passes the official OpenLineage schema and every facet schema,
    ours included."""
    validate_run_event(shipped)


def test_signature_facet_validates_against_its_schema(shipped: dict[str, Any]) -> None:
    """The facet validates against SIGNATURE_SCHEMA_URL, whose fragment resolves locally."""
    schema_validator(SIGNATURE_SCHEMA_URL).validate(shipped["run"]["facets"][FACET])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "signature",
            "c2hvcnQ=",
            "$.run.facets.lineageAgent_signature.signature: 'c2hvcnQ=' does not match "
            "'^[A-Za-z0-9+/]{85}[AQgw]==$'",
        ),
        (
            "keyId",
            "sha256:abc",
            "$.run.facets.lineageAgent_signature.keyId: 'sha256:abc' does not match "
            "'^sha256:[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$'",
        ),
        (
            "algorithm",
            "RSA",
            "$.run.facets.lineageAgent_signature.algorithm: 'RSA' is not one of ['Ed25519']",
        ),
    ],
)
def test_schema_rejects_malformed_facet(
    shipped: dict[str, Any], field: str, value: str, message: str
) -> None:
    """The facet schema refuses a bad signature, keyId or algorithm."""
    shipped["run"]["facets"][FACET][field] = value
    with pytest.raises(SchemaViolation) as caught:
        validate_run_event(shipped)
    assert str(caught.value) == message


def test_schema_file_is_a_draft_2020_12_run_facet() -> None:
    """The schema file is valid 2020-12 and extends the OpenLineage RunFacet by $ref."""
    schema = json.loads((AGENT_SCHEMAS / "lineageAgent_signature.json").read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] + "#/$defs/SignatureRunFacet" == SIGNATURE_SCHEMA_URL
    assert schema["$defs"]["SignatureRunFacet"]["allOf"][0] == {
        "$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"
    }


# --- verification -----------------------------------------------------------------------------


def test_verify_event_accepts_bytes_text_and_parsed(signer: Signer, key: SigningKey) -> None:
    """verify_event takes the shipped bytes, their text or the parsed event."""
    payload = signer.sign_event(example_run_event())
    for form in (payload, payload.decode(), json.loads(payload)):
        result = verify_event(form, key.verify_key)
        assert result == Verified(key_id(key.verify_key), json.loads(payload))


def test_every_altered_field_fails(shipped: dict[str, Any], key: SigningKey) -> None:
    """Changing any value of the event (outside the signature facet) breaks the signature."""
    paths = [path for path in leaves(shipped) if path[:3] != ("run", "facets", FACET)]
    assert len(paths) > 100
    for path in paths:
        event = copy.deepcopy(shipped)
        original: Any = event
        for step in path:
            original = original[step]
        set_path(event, path, altered(original))
        with pytest.raises(SignatureError) as caught:
            verify_event(event, key.verify_key)
        assert caught.value.reason == "signature does not verify", path
        with pytest.raises(InvalidSignature):
            independent_verify(event, key.verify_key)


def test_every_flipped_byte_of_the_shipped_json_fails(signer: Signer, key: SigningKey) -> None:
    """Flipping the low bit of any byte outside the signature facet makes verification fail
    (as broken JSON or as a signature that does not verify)."""
    payload = signer.sign_event(example_run_event())
    facet_start = payload.index(b'"lineageAgent_signature":{')
    facet_end = payload.index(b"}", facet_start)
    outcomes: set[str] = set()
    for position in range(len(payload)):
        if facet_start < position <= facet_end:
            continue  # the facet's own fields are not signed (tested one by one above)
        flipped = bytearray(payload)
        flipped[position] ^= 1
        with pytest.raises(SignatureError) as caught:
            verify_event(bytes(flipped), key.verify_key)
        outcomes.add(caught.value.reason.partition(":")[0])
    assert {"signature does not verify", "not valid JSON"} <= outcomes


def test_flipped_bit_in_signature_fails(shipped: dict[str, Any], key: SigningKey) -> None:
    """A signature with one bit flipped does not verify."""
    facet = shipped["run"]["facets"][FACET]
    raw = bytearray(base64.b64decode(facet["signature"]))
    raw[17] ^= 0x04
    facet["signature"] = base64.b64encode(bytes(raw)).decode()
    with pytest.raises(SignatureError) as caught:
        verify_event(shipped, key.verify_key)
    assert caught.value.reason == "signature does not verify"


def test_added_and_removed_keys_fail(shipped: dict[str, Any], key: SigningKey) -> None:
    """Adding a key or removing one (even an empty one) breaks the signature."""
    added = copy.deepcopy(shipped)
    added["job"]["extra"] = {}
    removed = copy.deepcopy(shipped)
    del removed["outputs"][0]["outputFacets"]
    for event in (added, removed):
        with pytest.raises(SignatureError) as caught:
            verify_event(event, key.verify_key)
        assert caught.value.reason == "signature does not verify"


def with_nulls_added(event: dict[str, Any]) -> dict[str, Any]:
    """`event` with null members at several depths, where Marquez writes them."""
    nulled = copy.deepcopy(event)
    nulled["job"]["facets"]["documentation"] = None
    nulled["run"]["facets"]["nominalTime"] = None
    nulled["inputs"][0]["facets"]["lifecycleStateChange"] = None
    nulled["inputs"][0]["facets"]["schema"]["fields"][0]["description"] = None
    nulled["outputs"][0]["facets"]["documentation"] = None
    nulled["extra"] = {"nested": {"deeper": None}}
    return nulled


def test_null_members_read_as_absent(shipped: dict[str, Any], key: SigningKey) -> None:
    """Null members added at any depth leave the signature valid, as `cryptography` agrees
    over the `rfc8785` bytes of the event without them."""
    nulled = with_nulls_added(shipped)
    nulled["extra"] = None
    assert verify_event(nulled, key.verify_key).key_id == key_id(key.verify_key)
    assert verify_event(json.dumps(nulled).encode(), key.verify_key).event == nulled
    with pytest.raises(InvalidSignature):
        independent_verify(nulled, key.verify_key)
    independent_verify(stripped(nulled), key.verify_key)


def test_null_members_do_not_hide_a_change(shipped: dict[str, Any], key: SigningKey) -> None:
    """With nulls added, a changed value, a value made null and a null array element each
    still break the signature."""
    changed = with_nulls_added(shipped)
    changed["inputs"][0]["name"] += "_other"
    emptied = with_nulls_added(shipped)
    emptied["job"]["facets"]["sql"] = None
    appended = copy.deepcopy(shipped)
    appended["inputs"].append(None)
    nested = with_nulls_added(shipped)
    nested["extra"] = {"nested": {}}
    for event in (changed, emptied, appended, nested):
        with pytest.raises(SignatureError) as caught:
            verify_event(event, key.verify_key)
        assert caught.value.reason == "signature does not verify"


def test_reordered_and_reformatted_json_still_verifies(
    shipped: dict[str, Any], key: SigningKey
) -> None:
    """Key order and whitespace do not matter: the signature covers the canonical form."""
    text = json.dumps(reordered(shipped), indent=2, ensure_ascii=True)
    assert text != json.dumps(shipped, indent=2, ensure_ascii=True)
    assert verify_event(text.encode(), key.verify_key).key_id == key_id(key.verify_key)
    independent_verify(json.loads(text), key.verify_key)


def test_event_from_another_key_has_unknown_key_id(key: SigningKey, other_key: SigningKey) -> None:
    """An event signed by an untrusted key fails with its keyId named."""
    payload = Signer(other_key).sign_event(example_run_event())
    with pytest.raises(SignatureError) as caught:
        verify_event(payload, key.verify_key)
    assert caught.value.reason == f"unknown keyId {key_id(other_key.verify_key)}"


def test_any_trusted_key_may_verify(key: SigningKey, other_key: SigningKey) -> None:
    """With several trusted keys, the one the keyId names verifies."""
    payload = Signer(other_key).sign_event(example_run_event())
    result = verify_event(payload, [key.verify_key, other_key.verify_key])
    assert result.key_id == key_id(other_key.verify_key)


def test_keyid_swapped_to_a_trusted_key_fails(key: SigningKey, other_key: SigningKey) -> None:
    """Claiming a trusted keyId for another key's signature does not verify."""
    event = json.loads(Signer(other_key).sign_event(example_run_event()))
    event["run"]["facets"][FACET]["keyId"] = key_id(key.verify_key)
    with pytest.raises(SignatureError) as caught:
        verify_event(event, key.verify_key)
    assert caught.value.reason == "signature does not verify"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e["run"]["facets"].pop(FACET), "no lineageAgent_signature facet"),
        (lambda e: e["run"].pop("facets"), "no lineageAgent_signature facet"),
        (lambda e: e.pop("run"), "no lineageAgent_signature facet"),
        (
            lambda e: e["run"]["facets"].update({FACET: "sig"}),
            "malformed lineageAgent_signature facet: not an object",
        ),
        (
            lambda e: e["run"]["facets"][FACET].update(algorithm="RSA"),
            'unsupported algorithm "RSA" (expected Ed25519)',
        ),
        (
            lambda e: e["run"]["facets"][FACET].pop("algorithm"),
            "unsupported algorithm null (expected Ed25519)",
        ),
        (
            lambda e: e["run"]["facets"][FACET].update(canonicalization="JCS"),
            'unsupported canonicalization "JCS" (expected RFC8785)',
        ),
        (
            lambda e: e["run"]["facets"][FACET].update(keyId=42),
            "unknown keyId 42",
        ),
        (
            lambda e: e["run"]["facets"][FACET].update(keyId="x\n\x1b[2J"),
            'unknown keyId "x\\n\\u001b[2J"',
        ),
        (
            lambda e: e["run"]["facets"][FACET].update(signature="not base64!"),
            "malformed lineageAgent_signature facet: signature is not the base64 of 64 bytes",
        ),
        (
            lambda e: e["run"]["facets"][FACET].update(signature="c2hvcnQ="),
            "malformed lineageAgent_signature facet: signature is not the base64 of 64 bytes",
        ),
    ],
    ids=[
        "no-facet", "no-facets", "no-run", "facet-not-object", "algorithm", "no-algorithm",
        "canonicalization", "keyid-not-string", "keyid-control-chars", "signature-not-base64",
        "signature-short",
    ],
)  # fmt: skip
def test_bad_facet_reasons(
    shipped: dict[str, Any],
    key: SigningKey,
    change: Callable[[dict[str, Any]], Any],
    reason: str,
) -> None:
    """Each defect of the signature facet fails with its own reason."""
    change(shipped)
    with pytest.raises(SignatureError) as caught:
        verify_event(shipped, key.verify_key)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"a": 1, "a": 2}', 'not valid JSON: duplicate key "a" in an object'),
        (b'{"a": NaN}', "not valid JSON: NaN is not a JSON number"),
        (b"[1, 2", "not valid JSON: Expecting ',' delimiter: line 1 column 6 (char 5)"),
        (b'{"a": "\xff"}', "not valid JSON: invalid UTF-8 at byte 7"),
        (b"[]", "not a JSON object"),
    ],
)
def test_unparsable_payload_reasons(payload: bytes, reason: str, key: SigningKey) -> None:
    """Strict parsing refuses duplicate keys, NaN, broken JSON and bad UTF-8."""
    with pytest.raises(SignatureError) as caught:
        verify_event(payload, key.verify_key)
    assert caught.value.reason == reason


def test_duplicate_key_cannot_smuggle_a_second_value(signer: Signer, key: SigningKey) -> None:
    """A duplicated key in signed JSON is refused, not resolved to either value."""
    payload = signer.sign_event(example_run_event())
    smuggled = payload.replace(
        b'"eventType":"COMPLETE"', b'"eventType":"FAIL","eventType":"COMPLETE"'
    )
    assert smuggled != payload
    with pytest.raises(SignatureError) as caught:
        verify_event(smuggled, key.verify_key)
    assert caught.value.reason == 'not valid JSON: duplicate key "eventType" in an object'


# --- keys -------------------------------------------------------------------------------------


def test_key_id_is_sha256_of_raw_public_key(key: SigningKey) -> None:
    """keyId is sha256: plus unpadded base64url of SHA-256 over the 32 raw public key bytes."""
    digest = hashlib.sha256(bytes(key.verify_key)).digest()
    expected = "sha256:" + base64.urlsafe_b64encode(digest).decode().rstrip("=")
    assert key_id(key.verify_key) == expected
    assert re.fullmatch(r"sha256:[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]", expected)


def test_generated_key_file_is_0600_base64_seed(tmp_path: Path) -> None:
    """keygen writes the header line, the base64 of the 32-byte seed and a newline, mode 0600,
    even under a permissive umask; loading it gives the key whose public half it returned."""
    path = tmp_path / "ed25519.key"
    old = os.umask(0)
    try:
        verify_key = generate_key_file(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    header, text = path.read_text().split("\n", 1)
    assert header == (
        "# lineage-agent Ed25519 private key (secret; public key: lineage-agent pubkey --key FILE)"
    )
    assert re.fullmatch(r"[A-Za-z0-9+/]{43}=\n", text)
    assert len(base64.b64decode(text)) == 32
    assert load_signing_key(path).verify_key == verify_key


def test_a_bare_base64_key_file_is_refused_as_maybe_public(tmp_path: Path, key: SigningKey) -> None:
    """A base64 line alone (a public key looks the same) is refused, saying what was found;
    with the header added at its top the same private key loads."""
    path = tmp_path / "old.key"
    path.write_bytes(base64.b64encode(bytes(key)) + b"\n")
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match="found one base64 line and no"):
        load_signing_key(path)
    path.write_bytes(HEADER + base64.b64encode(bytes(key)) + b"\n")
    assert load_signing_key(path).verify_key == key.verify_key


def test_a_foreign_comment_line_is_not_a_key_file(tmp_path: Path) -> None:
    """A file starting with another comment line is refused as not a lineage-agent key."""
    path = tmp_path / "x.key"
    path.write_text(f"# some other tool's key\n{SEED_TEXT}\n")
    path.chmod(0o600)
    with pytest.raises(KeyFileError) as caught:
        load_signing_key(path)
    assert str(caught.value) == (
        f"{path}: not a lineage-agent private key file (its first line is a comment that is "
        "not the header `lineage-agent keygen` writes)"
    )


def test_a_private_key_is_refused_where_a_public_key_is_wanted(tmp_path: Path) -> None:
    """load_verify_key refuses a private key file, and its text, by the header; the message
    says how to get the public key and quotes no key material."""
    path = tmp_path / "ed25519.key"
    generate_key_file(path)
    secret = path.read_text().split("\n")[1]
    with pytest.raises(KeyFileError) as caught:
        load_verify_key(path)
    assert str(caught.value) == (
        f"{path}: this is a private key file, not a public key; never hand it out: give its "
        f"public key instead, as `lineage-agent pubkey --key {path}` prints it"
    )
    with pytest.raises(KeyFileError) as caught:
        load_verify_key(path.read_text())
    assert str(caught.value) == (
        "the text given: this is a private key file, not a public key; never hand it out: "
        "give its public key instead, as `lineage-agent pubkey --key FILE` prints it"
    )
    assert secret[:8] not in str(caught.value)


def test_generated_key_file_is_0600_under_restrictive_umask(tmp_path: Path) -> None:
    """Even a umask that removes owner bits leaves a usable 0600 key file."""
    path = tmp_path / "ed25519.key"
    old = os.umask(0o277)
    try:
        verify_key = generate_key_file(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_signing_key(path).verify_key == verify_key


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    """An existing file is never replaced; its content stays."""
    path = tmp_path / "ed25519.key"
    path.write_text("precious\n")
    with pytest.raises(KeyFileError) as caught:
        generate_key_file(path)
    assert str(caught.value) == f"refusing to overwrite existing key file {path}"
    assert path.read_text() == "precious\n"


def test_keygen_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    """A symlink at the path (even to nowhere) is not followed to create a key elsewhere."""
    path = tmp_path / "ed25519.key"
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(KeyFileError) as caught:
        generate_key_file(path)
    assert str(caught.value) == f"refusing to overwrite existing key file {path}"
    assert not (tmp_path / "elsewhere").exists()


def test_keygen_into_missing_directory(tmp_path: Path) -> None:
    """A key file in a directory that does not exist fails with the OS reason."""
    path = tmp_path / "missing" / "ed25519.key"
    with pytest.raises(KeyFileError) as caught:
        generate_key_file(path)
    assert str(caught.value) == (
        f"{path}: cannot create private key file: No such file or directory"
    )


@pytest.mark.parametrize("mode", [0o640, 0o644, 0o604, 0o660, 0o610, 0o602])
def test_loading_refuses_a_key_open_to_group_or_others(tmp_path: Path, mode: int) -> None:
    """A private key that group or others may read or write is refused; the message says
    how to fix it and quotes no key material."""
    path = tmp_path / "ed25519.key"
    generate_key_file(path)
    secret = path.read_text().strip()
    path.chmod(mode)
    with pytest.raises(KeyFileError) as caught:
        load_signing_key(path)
    assert str(caught.value) == (
        f"{path}: private key is accessible by group or others (mode {mode:04o}); "
        f"run chmod 600 {path}"
    )
    assert secret not in str(caught.value) and secret[:8] not in str(caught.value)


def test_loading_accepts_owner_only_modes(tmp_path: Path) -> None:
    """0600 and 0400 keys load."""
    path = tmp_path / "ed25519.key"
    verify_key = generate_key_file(path)
    path.chmod(0o400)
    assert load_signing_key(path).verify_key == verify_key


SEED_TEXT = base64.b64encode(bytes(range(7, 39))).decode()
HEADER = b"# lineage-agent Ed25519 private key\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "{path}: private key file is empty"),
        (b"\n  \n", "{path}: private key file is empty"),
        (
            HEADER + b"not base64 at all!\n",
            "{path}: private key is not valid base64 (expected the base64 of 32 bytes on one line)",
        ),
        (
            HEADER + base64.b64encode(bytes(range(16))) + b"\n",
            "{path}: private key is 16 bytes after base64 decoding; an Ed25519 key is 32",
        ),
        (
            HEADER + base64.b64encode(bytes(range(64))) + b"\n",
            "{path}: private key is 64 bytes after base64 decoding; an Ed25519 key is 32",
        ),
        (
            b"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
            "{path}: found a PEM PRIVATE KEY block, not the agent's Ed25519 private key file"
            " (lineage-agent keygen --out PATH writes one)",
        ),
        (
            b"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n",
            "{path}: found a PEM PUBLIC KEY block, not the agent's Ed25519 private key file"
            " (lineage-agent keygen --out PATH writes one)",
        ),
        (
            base64.b64encode(bytes(SigningKey(bytes(range(32))).verify_key)) + b"\n",
            "{path}: found one base64 line and no `# lineage-agent Ed25519 private key` header:"
            " a public key (as `lineage-agent pubkey` prints it) or a private key written before"
            " the header; a private key needs that line at its top (see"
            " docs/operations/install.md)",
        ),
        (
            b"A" * 5000,
            "{path}: not an Ed25519 private key file (expected one line of base64, found 4096 "
            "bytes or more)",
        ),
    ],
    ids=["empty", "blank", "not-base64", "short", "long", "pem", "pem-public", "public", "huge"],
)
def test_loading_bad_content_says_why_without_quoting_it(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """Malformed key files fail with a precise message that never contains their content."""
    path = tmp_path / "ed25519.key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(KeyFileError) as caught:
        load_signing_key(path)
    assert str(caught.value) == message.format(path=path)
    for chunk in content.split():
        if len(chunk) >= 8:
            assert chunk.decode(errors="replace")[:8] not in str(caught.value)


def test_loading_missing_key_and_directory(tmp_path: Path) -> None:
    """A missing path and a directory each get their own message."""
    with pytest.raises(KeyFileError) as caught:
        load_signing_key(tmp_path / "nope.key")
    assert str(caught.value) == f"{tmp_path / 'nope.key'}: private key file does not exist"
    folder = tmp_path / "dir"
    folder.mkdir(mode=0o700)
    with pytest.raises(KeyFileError) as caught:
        load_signing_key(folder)
    assert str(caught.value) == f"{folder}: private key path is not a regular file"


def test_public_key_from_text_or_file(tmp_path: Path, key: SigningKey) -> None:
    """load_verify_key takes the pubkey text itself or a file holding it (with a newline)."""
    text = public_key_text(key.verify_key)
    assert base64.b64decode(text) == bytes(key.verify_key)
    assert load_verify_key(text) == key.verify_key
    assert load_verify_key(f"  {text}\n") == key.verify_key
    path = tmp_path / "node.pub"
    path.write_text(text + "\n")
    assert load_verify_key(path) == key.verify_key
    assert load_verify_key(str(path)) == key.verify_key


def test_public_key_errors(tmp_path: Path) -> None:
    """Neither a key nor a file, and a file without a key, fail with precise messages."""
    with pytest.raises(KeyFileError) as caught:
        load_verify_key("c2hvcnQ=")
    assert str(caught.value) == (
        "c2hvcnQ=: neither a public key file nor a base64-encoded 32-byte Ed25519 public key"
    )
    path = tmp_path / "node.pub"
    path.write_text("c2hvcnQ=\n")
    with pytest.raises(KeyFileError) as caught:
        load_verify_key(path)
    assert str(caught.value) == (
        f"{path}: public key is 5 bytes after base64 decoding; an Ed25519 key is 32"
    )


# --- files ------------------------------------------------------------------------------------


@pytest.fixture
def payloads(signer: Signer, other_key: SigningKey) -> dict[str, bytes]:
    """Good, tampered, unsigned and foreign-key events as shipped bytes."""
    good = signer.sign_event(example_run_event())
    tampered = json.loads(good)
    tampered["eventType"] = "FAIL"
    unsigned = json.loads(good)
    del unsigned["run"]["facets"][FACET]
    return {
        "good": good,
        "tampered": orjson.dumps(tampered),
        "unsigned": orjson.dumps(unsigned),
        "foreign": Signer(other_key).sign_event(example_run_event()),
    }


def test_verify_jsonl_file_reports_each_bad_line(
    tmp_path: Path, payloads: dict[str, bytes], key: SigningKey, other_key: SigningKey
) -> None:
    """A JSON-lines file reports bad events as file:line; blank lines are skipped."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                payloads["good"],
                b"",
                payloads["tampered"],
                b'{"eventType": ',
                payloads["unsigned"],
                payloads["foreign"],
                payloads["good"] + b"\r",
            ]
        )
        + b"\n"
    )
    assert verify_file(path, key.verify_key) == [
        Problem(f"{path}:3", "signature does not verify"),
        Problem(f"{path}:4", "not valid JSON: Expecting value: line 1 column 15 (char 14)"),
        Problem(f"{path}:5", "no lineageAgent_signature facet"),
        Problem(f"{path}:6", f"unknown keyId {key_id(other_key.verify_key)}"),
    ]


def test_verify_json_array_reports_indexes(
    tmp_path: Path, payloads: dict[str, bytes], key: SigningKey
) -> None:
    """A JSON array of events reports bad events as file[index]."""
    path = tmp_path / "batch.json"
    events = [json.loads(payloads[name]) for name in ("good", "good", "tampered")]
    path.write_text(json.dumps([*events, 7], indent=2))
    assert verify_file(path, [key.verify_key]) == [
        Problem(f"{path}[2]", "signature does not verify"),
        Problem(f"{path}[3]", "not a JSON object"),
    ]


def test_verify_single_event_file(
    tmp_path: Path, payloads: dict[str, bytes], key: SigningKey
) -> None:
    """A file holding one event object reports it by file name."""
    good = tmp_path / "event.json"
    good.write_bytes(payloads["good"])
    bad = tmp_path / "bad.json"
    bad.write_bytes(payloads["tampered"])
    assert verify_file(good, key.verify_key) == []
    assert [str(problem) for problem in verify_file(bad, key.verify_key)] == [
        f"{bad}: signature does not verify"
    ]


def test_rotated_and_unsuffixed_json_lines(
    tmp_path: Path, payloads: dict[str, bytes], key: SigningKey
) -> None:
    """Rotated files (events.jsonl.<n>) and several values in a .json file read as lines."""
    rotated = tmp_path / "events.jsonl.1700000000000000000"
    rotated.write_bytes(payloads["good"] + b"\n")
    several = tmp_path / "dump.json"
    several.write_bytes(payloads["good"] + b"\n" + payloads["tampered"] + b"\n")
    assert verify_file(rotated, key.verify_key) == []
    assert verify_file(several, key.verify_key) == [
        Problem(f"{several}:2", "signature does not verify")
    ]


def test_verify_files_report(tmp_path: Path, payloads: dict[str, bytes], key: SigningKey) -> None:
    """The report counts events, lists problems in order and renders the CLI's lines."""
    first = tmp_path / "a.jsonl"
    first.write_bytes(b"\n".join([payloads["good"], payloads["tampered"], payloads["good"]]))
    broken = tmp_path / "b.json"
    broken.write_text("{")
    missing = tmp_path / "c.jsonl"
    report = verify_files([first, broken, missing], key.verify_key)
    assert (report.checked, report.verified, report.passed) == (3, 2, False)
    assert report.lines() == [
        f"{first}:2: signature does not verify",
        f"{broken}: not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)",
        f"{missing}: cannot read: No such file or directory",
        "3 events checked, 2 verified, 3 failed",
    ]


def test_verify_files_all_good(tmp_path: Path, payloads: dict[str, bytes], key: SigningKey) -> None:
    """When every event verifies the report passes and prints only the summary."""
    good = tmp_path / "good.jsonl"
    good.write_bytes(payloads["good"] + b"\n" + payloads["good"] + b"\n")
    report = verify_files([good], key.verify_key)
    assert (report.checked, report.verified, report.passed) == (2, 2, True)
    assert report.lines() == ["2 events checked, 2 verified, 0 failed"]


def test_verify_command_refuses_a_private_key(tmp_path: Path, signer: Signer) -> None:
    """`verify --public-key PRIVATE_KEY_FILE` is a usage error (exit 2) saying what to give
    instead, not a report of unknown keyIds; with the key's public half the same file passes."""
    key_file = tmp_path / "ed25519.key"
    generate_key_file(key_file)
    events = tmp_path / "events.jsonl"
    events.write_bytes(Signer(load_signing_key(key_file)).sign_event(example_run_event()) + b"\n")
    command = [sys.executable, "-m", "agent", "verify", str(events), "--public-key"]
    refused = subprocess.run([*command, str(key_file)], capture_output=True, text=True, timeout=60)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        2,
        "",
        f"lineage-agent: {key_file}: this is a private key file, not a public key; never hand "
        f"it out: give its public key instead, as `lineage-agent pubkey --key {key_file}` "
        "prints it\n",
    )
    public = public_key_text(load_signing_key(key_file).verify_key)
    passed = subprocess.run([*command, public], capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_verify_command_names_a_bare_private_key(tmp_path: Path) -> None:
    """A private key file from before the header (bare base64, like a public key) given to
    `verify --public-key`: every event fails as an unknown keyId, and stderr says which key
    is the private one behind that keyId, without quoting it."""
    key = SigningKey.generate()
    legacy = tmp_path / "old.key"
    legacy.write_bytes(base64.b64encode(bytes(key)) + b"\n")
    legacy.chmod(0o600)
    signer = Signer(key)
    events = tmp_path / "events.jsonl"
    events.write_bytes(signer.sign_event(example_run_event()) + b"\n")
    ran = subprocess.run(
        [sys.executable, "-m", "agent", "verify", str(events), "--public-key", str(legacy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ran.returncode, ran.stdout) == (
        1,
        f"{events}:1: unknown keyId {signer.key_id}\n1 events checked, 0 verified, 1 failed\n",
    )
    assert ran.stderr == (
        f"lineage-agent: verify: {legacy} is the private key of the events' keyId "
        f"{signer.key_id}, not a public key; give its public key instead, as "
        "`lineage-agent pubkey --key FILE` prints it\n"
    )
