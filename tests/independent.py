"""Signature checks with libraries independent of the agent (`cryptography` and `rfc8785`), and
what they check written apart from the agent's code."""

from __future__ import annotations

import base64
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

FACET = "lineageAgent_signature"


def public_key(key_path: Path) -> Ed25519PublicKey:
    """The public key of a private key file, as printed by `lineage-agent pubkey`."""
    out = subprocess.run(
        [sys.executable, "-m", "agent", "pubkey", "--key", str(key_path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(out[0]))


def verify(event: dict[str, Any], key: Ed25519PublicKey) -> None:
    """Raise unless the event's signature facet signs the JCS bytes of the rest of the event."""
    unsigned = copy.deepcopy(event)
    facet = unsigned["run"]["facets"].pop(FACET)
    assert facet["algorithm"] == "Ed25519"
    assert facet["canonicalization"] == "RFC8785"
    key.verify(base64.b64decode(facet["signature"]), rfc8785.dumps(unsigned))


def stripped(value: Any) -> Any:
    """`value` without null-valued members, written apart from the agent's code."""
    if isinstance(value, dict):
        return {name: stripped(item) for name, item in value.items() if item is not None}
    if isinstance(value, list):
        return [stripped(item) for item in value]
    return value
