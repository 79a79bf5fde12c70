"""Copy event logs of the side-by-side harness's last run (`build/peer`) into
`tests/data/eventlogs/peer/<shape>.jsonl.zst`, with the run's paths made placeholders.

    python3 tests/data/take_peer_logs.py SHAPE [SHAPE ...]

The harness's work directory becomes `/data/peer/`; environment sections that name the
machine (system, Hadoop, metrics properties, the classpath) are emptied and every property
still naming a path of the machine is dropped, so that no line names it. The logs were
written by real PySpark in `./run peer` (see tests/peer).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "build" / "peer"
TARGET = ROOT / "tests" / "data" / "eventlogs" / "peer"
PLACEHOLDER = "/data/peer/"
#: the harness's Spark directory, relative to the checkout it ran in
_RUN = "/".join(("build", "peer", "work", "spark"))
#: where the harness ran: the checkout that holds `_RUN`
_WORK = re.compile(r'"(/[^"]*?)/' + re.escape(_RUN) + "/")
_EMPTIED = ("System Properties", "Hadoop Properties", "Metrics Properties", "Classpath Entries")


def take(shape: str) -> Path:
    """Copy one shape's log; the path written."""
    report = json.loads((PEER / "report.json").read_text())
    app_id = report["shapes"][shape]["app_id"]
    directory = PEER / "work" / "spark" / "events" / f"eventlog_v2_{app_id}"
    raw_lines: list[str] = []
    for part in sorted(directory.glob("events_*"), key=lambda p: int(p.name.split("_")[1])):
        reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        raw = reader.decompress(part.read_bytes())
        raw_lines += [line for line in raw.decode().splitlines() if line.strip()]
    found = next(m for line in raw_lines if (m := _WORK.search(line)))
    checkout = found[1]  # names the machine's directories
    work = f"{checkout}/{_RUN}/"
    machine = checkout.rsplit("/", 1)[0] + "/"
    lines = [_clean(json.loads(line.replace(work, PLACEHOLDER)), machine) for line in raw_lines]
    text = "".join(lines)
    if machine in text:
        raise SystemExit(f"{shape}: a line still names {machine}")
    TARGET.mkdir(parents=True, exist_ok=True)
    out = TARGET / f"{shape}.jsonl.zst"
    out.write_bytes(zstandard.ZstdCompressor(level=19).compress(text.encode()))
    return out


def _clean(event: dict[str, Any], machine: str) -> str:
    for key in _EMPTIED:
        if key in event:
            event[key] = {}
    for key in ("Spark Properties", "Properties"):
        props = event.get(key)
        if isinstance(props, dict):
            event[key] = {k: v for k, v in props.items() if machine not in str(v)}
    return json.dumps(event, separators=(",", ":")) + "\n"


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(take(name))
