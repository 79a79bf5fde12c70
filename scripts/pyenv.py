"""Create pinned Python environments for Spark jobs that need another PySpark than the project's.

    python3 scripts/pyenv.py NAME...     create (if missing or outdated) and print each python

`lakehouse`: PySpark 4.1.1 with the `delta-spark` Python API. Delta Lake 4.4 supports Spark
4.2 but Iceberg publishes no runtime for 4.2 and the Kafka connector's dependencies are not
published for 4.1.2+; 4.1.1 is the newest Spark that Delta 4.3.1, Iceberg 1.12.0
(`iceberg-spark-runtime-4.1`), `spark-sql-kafka-0-10` and `spark-avro` all run on (their jars:
scripts/jars.py). `spark35`: PySpark 3.5.9 and delta-spark 3.3.3, for the Spark 3.5 logs;
`spark43`: plain PySpark 4.3.0 (no connector for it is served here), for the Spark 4.3 logs.
The environments live under `build/venvs/<name>/`, keyed by their pins like the jar cache,
and made under a lock like them. Standard library only.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "venvs"

#: name -> pinned requirements (pip syntax).
ENVS: dict[str, tuple[str, ...]] = {
    "lakehouse": (
        "pyspark==4.1.1",
        "delta-spark==4.3.1",
        "zstandard==0.25.0",  # the generator compresses the logs it writes
    ),
    # Spark 3.5 (Scala 2.12), still run by many platforms: the logs of
    # tests/data/make_spark35_logs.py. Delta 3.3.3 is the newest Delta for Spark 3.5.
    "spark35": (
        "pyspark==3.5.9",
        "delta-spark==3.3.3",
        "zstandard==0.25.0",
    ),
    # Spark 4.3 without connectors: the logs of tests/data/make_spark43_logs.py, pinned apart
    # from the project's own test PySpark so that they stay reproducible when that one moves.
    "spark43": (
        "pyspark==4.3.0",
        "zstandard==0.25.0",
    ),
}


def python(name: str) -> Path:
    """The environment's interpreter, created and installed first unless already current."""
    pins = ENVS[name]
    target = CACHE / name
    stamp = target / ".pins"
    key = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:16]
    exe = target / "bin" / "python"
    if exe.is_file() and stamp.is_file() and stamp.read_text() == key:
        return exe
    # The test files that need it may start at once in two worker processes: one creates
    # it, the other waits and finds it current.
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.is_file() and stamp.is_file() and stamp.read_text() == key:
            return exe
        print(f"== creating {target.relative_to(ROOT)}: {', '.join(pins)}", file=sys.stderr)
        venv.EnvBuilder(clear=True, with_pip=True).create(target)
        subprocess.run(
            [str(exe), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins],
            check=True,
        )
        stamp.write_text(key)
    return exe


def main(argv: list[str]) -> int:
    if not argv or any(name not in ENVS for name in argv):
        print(f"usage: pyenv.py {' | '.join(ENVS)}...", file=sys.stderr)
        return 2
    for name in argv:
        print(python(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
