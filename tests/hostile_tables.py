"""Tables whose metadata files are built to exhaust a reader's memory, and the peak memory the
real `DiskTableMetadata` takes to answer what the translator asks of them, measured in a child
process (its peak RSS, which also counts what C code allocates, and tracemalloc's peak).

Each file is under the reader's size limit (32 MiB for an Iceberg metadata file, 4 MiB for a
Delta commit) and valid JSON of the form a writer could leave: a flood of empty objects where
the reader expects snapshots, commit metrics or schema fields, or arrays nested deeper than any
table's metadata is.

    PYTHONPATH=$PWD .venv/bin/python -m tests.hostile_tables   # the peak of each, in a table
    PYTHONPATH=$PWD .venv/bin/python -m tests.hostile_tables --replay

`--replay` measures the whole agent instead: `lineage-agent replay` of the checked-in Iceberg
lakehouse log, its two tables' newest metadata files the field's flood.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAKEHOUSE_LOG = ROOT / "tests/data/eventlogs/lakehouse/iceberg_hadoop.jsonl.zst"
LAKEHOUSE_TABLES = ("iceberg_hadoop/db/orders", "iceberg_hadoop/db/order_totals")
ICEBERG_SIZE = 32_700_000  # the field's file: under the 32 MiB limit of a metadata file
DELTA_SIZE = 4_000_000  # under the 4 MiB limit of a commit file
#: What the translator asks of a table: (method, arguments after the format and the path).
ASKED: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("exists", ()),
    ("committed", (0, 2**62)),
    ("schema", (None,)),
    ("schema", ("1",)),
)


def _flood(prefix: bytes, suffix: bytes, size: int) -> bytes:
    """`prefix` `{},{},...,{}` `suffix`, `size` bytes long (give or take two)."""
    count = max(1, (size - len(prefix) - len(suffix) + 1) // 3)
    return prefix + b"{}," * (count - 1) + b"{}" + suffix


def iceberg_snapshots(table: Path, size: int = ICEBERG_SIZE) -> None:
    """The field's file: `{"snapshots":[{},{},...]}` as the newest metadata file."""
    (table / "metadata").mkdir(parents=True)
    data = _flood(b'{"format-version":2,"snapshots":[', b"]}", size)
    (table / "metadata" / "v1.metadata.json").write_bytes(data)


def iceberg_schema(table: Path, size: int = ICEBERG_SIZE) -> None:
    """The current schema's `fields` a flood of empty objects."""
    (table / "metadata").mkdir(parents=True)
    data = _flood(b'{"current-schema-id":0,"schemas":[{"schema-id":0,"fields":[', b"]}]}", size)
    (table / "metadata" / "v1.metadata.json").write_bytes(data)


def iceberg_deep(table: Path, size: int = ICEBERG_SIZE) -> None:
    """Arrays nested as deep as the file is long, inside a snapshot."""
    (table / "metadata").mkdir(parents=True)
    depth = (size - 64) // 2
    data = b'{"snapshots":[{"summary":' + b"[" * depth + b"]" * depth + b"}]}"
    (table / "metadata" / "v1.metadata.json").write_bytes(data)


def delta_commit_info(table: Path, size: int = DELTA_SIZE) -> None:
    """A commit whose `commitInfo` carries a flood of empty objects beside its timestamp."""
    (table / "_delta_log").mkdir(parents=True)
    data = _flood(b'{"commitInfo":{"timestamp":1000,"operationMetrics":[', b"]}}\n", size)
    (table / "_delta_log" / f"{1:020d}.json").write_bytes(data)


def delta_schema(table: Path, size: int = DELTA_SIZE) -> None:
    """A commit whose `metaData.schemaString` is a Spark schema of a flood of empty fields."""
    (table / "_delta_log").mkdir(parents=True)
    schema = _flood(b'{"type":"struct","fields":[', b"]}", size - 64).decode()
    line = json.dumps({"metaData": {"id": "x", "schemaString": schema}})
    (table / "_delta_log" / f"{1:020d}.json").write_text(line + "\n")


#: name -> (table format, builder)
HOSTILE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "iceberg_snapshots": ("iceberg", iceberg_snapshots),
    "iceberg_schema": ("iceberg", iceberg_schema),
    "iceberg_deep": ("iceberg", iceberg_deep),
    "delta_commit_info": ("delta", delta_commit_info),
    "delta_schema": ("delta", delta_schema),
}


def measure(
    fmt: str, table: Path, *, limit_mb: int | None = None, trace: bool = True
) -> dict[str, Any]:
    """Run `_child` on the table in a new interpreter: its answers and peak extra memory.

    With `limit_mb`, the child's data segment may grow by that much at most (RLIMIT_DATA), so
    a reader that would take far more fails with MemoryError instead of taking the machine's
    memory; the child then exits with 1 and its output names the error."""
    command = [sys.executable, "-m", "tests.hostile_tables", "--child", fmt, str(table)]
    if limit_mb is not None:
        command += ["--limit-mb", str(limit_mb)]
    if not trace:
        command.append("--no-trace")
    env = {"PYTHONPATH": str(ROOT), **os.environ}  # another checkout's agent when given
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"the reader failed on {table}:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _child(fmt: str, table: str, limit_mb: int | None, trace: bool) -> None:
    """Answer twice, as a daemon would for two runs, then (for tracemalloc's peak, which
    tracing would inflate in the RSS) twice again with a new reader and tracing on."""
    from agent.spark.tables.metadata import DiskTableMetadata

    with tempfile.TemporaryDirectory() as warm:  # every module and backend loaded before
        (Path(warm) / "_delta_log").mkdir()
        (Path(warm) / "_delta_log" / f"{0:020d}.json").write_text('{"commitInfo":{}}\n')
        _ask(DiskTableMetadata(), "delta", warm)
    if limit_mb is not None:
        limit = (_status_kib("VmData") + limit_mb * 1024) * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    before = _status_kib("VmHWM")
    tables = DiskTableMetadata()
    answers = [_ask(tables, fmt, table) for _ in range(2)]
    peak = _status_kib("VmHWM")
    traced = None
    if trace:
        tracemalloc.start()
        tables = DiskTableMetadata()
        for _ in range(2):
            _ask(tables, fmt, table)
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    print(
        json.dumps(
            {
                "answers": answers[0],
                "again": answers[1],
                "rss_extra": (peak - before) * 1024,
                "traced_peak": traced,
            }
        )
    )


def _ask(tables: Any, fmt: str, table: str) -> list[Any]:
    answers = []
    for method, args in ASKED:
        answer = getattr(tables, method)(fmt, table, *args)
        answers.append(list(map(repr, answer)) if isinstance(answer, tuple) else answer)
    return answers


def _status_kib(name: str) -> int:
    """A size from /proc/self/status. The peak RSS is VmHWM, this process image's own:
    getrusage's ru_maxrss keeps the parent's RSS at fork across exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/self/status")


def replay_peak(directory: Path) -> tuple[int, str]:
    """The peak RSS (bytes) of `lineage-agent replay` of the lakehouse log whose tables' newest
    metadata files are the field's flood, and its summary line."""
    import zstandard

    lake = directory / "lake"
    log = zstandard.ZstdDecompressor().decompressobj().decompress(LAKEHOUSE_LOG.read_bytes())
    (directory / "logs").mkdir()
    (directory / "logs" / "app").write_bytes(log.replace(b"/data/lakehouse", str(lake).encode()))
    for table in LAKEHOUSE_TABLES:
        (lake / table / "metadata").mkdir(parents=True)
        data = _flood(b'{"format-version":2,"snapshots":[', b"]}", ICEBERG_SIZE)
        (lake / table / "metadata" / "v99.metadata.json").write_bytes(data)
    agent = [sys.executable, "-m", "agent"]
    keygen = [*agent, "keygen", "--out", str(directory / "key")]
    subprocess.run(keygen, check=True, capture_output=True, cwd=ROOT)
    # The peak as the agent's own process image saw it, printed as it exits.
    probe = (
        "import atexit, runpy, sys\n"
        "from tests.hostile_tables import _status_kib\n"
        "atexit.register(lambda: print('VmHWM', _status_kib('VmHWM'), file=sys.stderr))\n"
        "sys.argv = ['lineage-agent', *sys.argv[1:]]\n"
        "runpy.run_module('agent', run_name='__main__')\n"
    )
    argv = ["replay", str(directory / "logs" / "app"), "--namespace", "x"]
    argv += ["--key", str(directory / "key")]
    env = {"PYTHONPATH": str(ROOT), **os.environ}  # another checkout's agent when given
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=ROOT, env=env
    )
    peak = [line for line in done.stderr.splitlines() if line.startswith("VmHWM ")]
    if done.returncode != 0 or not peak:
        raise AssertionError(f"replay failed:\n{done.stdout}{done.stderr}")
    return int(peak[0].split()[1]) * 1024, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("FORMAT", "TABLE"))
    parser.add_argument("--limit-mb", type=int)
    parser.add_argument("--no-trace", dest="trace", action="store_false")
    parser.add_argument("--replay", action="store_true")
    args = parser.parse_args()
    if args.child:
        fmt, table = args.child
        _child(fmt, table, args.limit_mb, args.trace)
        return
    if args.replay:
        with tempfile.TemporaryDirectory() as directory:
            peak, summary = replay_peak(Path(directory))
            print(f"lineage-agent replay: peak RSS {peak / 2**20:.1f} MiB ({summary})")
        return
    with tempfile.TemporaryDirectory() as directory:
        for name, (fmt, build) in HOSTILE.items():
            table = Path(directory) / name
            build(table)
            result = measure(fmt, table, trace=args.trace)
            traced = result["traced_peak"]
            print(
                f"{name:18} peak RSS +{result['rss_extra'] / 2**20:7.1f} MiB"
                + (f", traced peak {traced / 2**20:7.1f} MiB" if traced is not None else "")
            )


if __name__ == "__main__":
    main()
