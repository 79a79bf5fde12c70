"""`keygen`, `pubkey` and `verify`: the node's signing key made and shown, signed events
checked (in files, or read back from Marquez)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from agent.commands.exits import EX_CONFIG, EX_FAILED, EX_OK, EX_USAGE, say


def cmd_keygen(args: argparse.Namespace) -> int:
    from agent.delivery.signing import generate_key_file, key_id, public_key_text
    from agent.errors import KeyFileError

    try:
        verify_key = generate_key_file(args.out)
    except KeyFileError as error:
        say(str(error))
        return EX_FAILED
    print(f"wrote {args.out} (mode 0600)")
    print(f"public key: {public_key_text(verify_key)}")
    print(f"key id: {key_id(verify_key)}")
    return EX_OK


def cmd_pubkey(args: argparse.Namespace) -> int:
    from agent.delivery.signing import key_id, load_signing_key, public_key_text
    from agent.errors import KeyFileError

    try:
        verify_key = load_signing_key(args.key).verify_key
    except KeyFileError as error:
        say(str(error))
        return EX_CONFIG
    if args.id:
        print(key_id(verify_key))
    else:
        # The key alone on stdout, so that `--public-key "$(lineage-agent pubkey --key K)"`
        # works; the id goes to stderr, where a person still sees it.
        print(public_key_text(verify_key))
        print(f"key id: {key_id(verify_key)}", file=sys.stderr)
    return EX_OK


def cmd_verify(args: argparse.Namespace) -> int:
    """`verify FILE...` or `verify --marquez URL`: 1 when an event fails or Marquez cannot be
    read to the end (the problems found until then are printed), 2 for bad arguments."""
    from agent.delivery.signing import load_verify_key
    from agent.delivery.verify import verify_files
    from agent.errors import KeyFileError, ReadBackError

    if bool(args.files) == bool(args.marquez):
        say("verify: give event FILEs or --marquez URL" + (", not both" if args.files else ""))
        return EX_USAGE
    if args.namespace is not None and not args.marquez:
        say("verify: --namespace goes with --marquez URL")
        return EX_USAGE
    try:
        trusted = [load_verify_key(key) for key in args.public_key]
    except KeyFileError as error:
        say(str(error))
        return EX_USAGE
    from agent.commands.views import printable

    if args.files:
        report = verify_files(args.files, trusted)
        # A file name or a bad event's fault may carry control characters; shown escaped.
        print("\n".join(printable(line) for line in report.lines()))
        _private_key_hints(args.public_key, trusted, {p.reason for p in report.problems})
        return EX_OK if report.passed else EX_FAILED
    from agent.commands.marquez import marquez_base, verify_marquez

    try:
        marquez_base(args.marquez)
    except ReadBackError as error:
        say(str(error))
        return EX_USAGE
    try:
        report = verify_marquez(
            args.marquez,
            trusted,
            namespace=args.namespace,
            # What Marquez gave back may carry control characters too.
            on_problem=lambda problem: print(printable(problem), flush=True),
        )
    except ReadBackError as error:
        say(printable(str(error)))
        return EX_FAILED
    print(report.lines()[-1])
    return EX_OK if report.passed else EX_FAILED


def _private_key_hints(given: Sequence[str], trusted: Sequence[Any], reasons: set[str]) -> None:
    """Tell on stderr which --public-key is in fact a private key without the header (its
    seed signs the events `verify` found under an unknown keyId); never quotes key text."""
    import os

    from agent.delivery.signing import key_id_as_seed

    for name, key in zip(given, trusted, strict=True):
        as_seed = key_id_as_seed(key)
        if f"unknown keyId {as_seed}" in reasons:
            shown = name if os.path.exists(name) else "a --public-key text"
            say(
                f"verify: {shown} is the private key of the events' keyId {as_seed}, not a "
                "public key; give its public key instead, as `lineage-agent pubkey --key FILE` "
                "prints it"
            )
