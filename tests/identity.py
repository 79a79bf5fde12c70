"""Replay digests of the repository's event-log fixtures: the proof that events stay byte-identical.

Every fixture log (`*.jsonl` / `*.jsonl.zst` under `tests/golden/` and `tests/data/eventlogs/`)
is replayed through the `lineage-agent replay` command with a fixed signing key, and the
SHA-256 of every signed event is compared with `tests/data/replay_digests.json`; `replayed`
gives the events too, for the properties every fixture event must have. The command
line is the interface, so the digests were made by whatever code the checkout held then:

    .venv/bin/python -m tests.identity --write     # record the digests of this checkout
    .venv/bin/python -m tests.identity             # compare; exit 1 and name the first change

Record only when an event is meant to change, and say in the commit what changed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "data" / "replay_digests.json"
FIXTURE_DIRS = (ROOT / "tests" / "golden", ROOT / "tests" / "data" / "eventlogs")
#: A fixed seed: Ed25519 is deterministic, so the same events give the same signed bytes.
SEED = hashlib.sha256(b"lineage-agent replay identity").digest()
NAMESPACE = "identity"
#: The fixed mtime of the replayed copies: runs a log leaves open end at its mtime.
MTIME_NS = 1_800_000_000 * 10**9
Event = dict[str, Any]


def fixture_logs() -> list[Path]:
    """Every event-log fixture in the repository, in a stable order."""
    found: list[Path] = []
    for directory in FIXTURE_DIRS:
        found += directory.rglob("*.jsonl")
        found += directory.rglob("*.jsonl.zst")
    return sorted(found)


def _key(directory: Path) -> Path:
    path = directory / "identity.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(b"# lineage-agent Ed25519 private key\n" + base64.b64encode(SEED) + b"\n")
    return path


def digests(logs: list[Path]) -> dict[str, list[str]]:
    """Relative log path -> the SHA-256 of each signed event `replay` makes of it, in order."""
    return {log: found for log, (found, _) in replayed(logs).items()}


def replayed(logs: list[Path]) -> dict[str, tuple[list[str], list[Event]]]:
    """Relative log path -> the SHA-256 of each signed event `replay` makes of it and the
    events themselves (as written with `--output-dir`), in order."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        key = _key(work)
        result: dict[str, tuple[list[str], list[Event]]] = {}
        for index, log in enumerate(logs):
            # An uncompressed single-file log under a name Spark could give it.
            target = work / f"local-{index:04d}"
            data = log.read_bytes()
            if log.suffix == ".zst":
                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            target.write_bytes(data)
            os.utime(target, ns=(MTIME_NS, MTIME_NS))
            output = work / f"events-{index:04d}"
            output.mkdir()
            command = [sys.executable, "-m", "agent", "replay", "--json", "--key", str(key)]
            done = subprocess.run(
                [*command, "--namespace", NAMESPACE, "--output-dir", str(output), str(target)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=False,
            )
            if done.returncode not in (0, 1):
                raise RuntimeError(f"replay of {log} exited {done.returncode}: {done.stderr}")
            (app,) = json.loads(done.stdout)["applications"]
            (written,) = output.iterdir()
            events = [json.loads(line) for line in written.read_text().splitlines() if line]
            result[str(log.relative_to(ROOT))] = (list(app["digests"]), events)
        return result


def main(argv: list[str]) -> int:
    found = digests(fixture_logs())
    if argv == ["--write"]:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"recorded {sum(map(len, found.values()))} events of {len(found)} logs")
        return 0
    recorded = json.loads(RECORD.read_text())
    for log in sorted(set(found) | set(recorded)):
        if found.get(log) != recorded.get(log):
            print(f"{log}: events differ from the record")
            return 1
    print(f"identical: {sum(map(len, found.values()))} events of {len(found)} logs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
