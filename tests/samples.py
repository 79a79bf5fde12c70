"""The sample Spark event logs of `tests/data/eventlogs/` (zstd-compressed JSON lines).

Real PySpark 4.3 logs of success, failure, cancellation, SIGTERM and SIGKILL; how they were
made and how to make them again is in `tests/data/README.md`. Tests read them decompressed:
`sample_bytes` (the whole log as Spark wrote it), `sample_lines` (its non-empty lines) or
`write_sample` (a decompressed copy at a path, for tests that need a file). `block_encoded`
encodes bytes as Spark's block codecs (lz4, snappy, lzf) write them, one block per piece.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import cramjam
import lz4.block  # type: ignore[import-untyped]
import zstandard

EVENTLOGS = Path(__file__).resolve().parent / "data" / "eventlogs"
#: Every sample, in the order of the table in tests/data/README.md.
NAMES = (
    "success",
    "sql_failure",
    "cancelled",
    "sigterm",
    "sigterm_python_parent",
    "sigterm_spark_submit",
    "sigkill",
)


def sample_path(name: str) -> Path:
    """The compressed file of the sample `name` (`success`, ...)."""
    if name not in NAMES:
        raise KeyError(f"no sample log {name!r}; there are {', '.join(NAMES)}")
    return EVENTLOGS / f"{name}.jsonl.zst"


@cache
def sample_bytes(name: str) -> bytes:
    """The sample log `name`, decompressed: JSON lines, each ending with a newline."""
    reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    return reader.decompress(sample_path(name).read_bytes())


@cache
def sample_lines(name: str) -> tuple[bytes, ...]:
    """The non-empty lines of the sample log `name`."""
    return tuple(line for line in sample_bytes(name).splitlines() if line)


def write_sample(name: str, target: Path) -> Path:
    """Write the sample log `name`, decompressed, to `target` and return `target`."""
    target.write_bytes(sample_bytes(name))
    return target


def block_encoded(codec: str, blocks: Sequence[bytes]) -> list[bytes]:
    """`blocks` encoded one block (chunk) each, as lz4-java, snappy-java and compress-lzf
    write them; for snappy the stream header is the first element."""
    if codec == "lz4":
        payloads = [lz4.block.compress(block, store_size=False) for block in blocks]
        return [
            struct.pack("<8sBiii", b"LZ4Block", 0x25, len(p), len(b), 0) + p
            for p, b in zip(payloads, blocks, strict=True)
        ]
    if codec == "snappy":
        chunks = [bytes(cramjam.snappy.compress_raw(block)) for block in blocks]
        header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        return [header] + [struct.pack(">i", len(c)) + c for c in chunks]
    if codec == "lzf":
        compress = importlib.import_module("lzf").compress
        encoded = [compress(block) for block in blocks]
        return [
            b"ZV\x01" + struct.pack(">HH", len(e), len(b)) + e
            for e, b in zip(encoded, blocks, strict=True)
        ]
    raise KeyError(f"no block codec {codec!r}")
