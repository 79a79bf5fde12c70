"""Real Spark event logs for tests, written by real PySpark jobs (see tests/sparkjobs/).

`spark_logs` (session fixture): one Python process, one JVM, one small application per
layout x codec, plus a zstd rolling log that rolled over into several events_N files. The
directories are shared by every test of the session: copy before changing anything. Use it
through `pytest_plugins = ("tests.spark_logs",)` in a conftest, or wrap the cached
`session_spark_logs(tmp_path_factory)` in a module's own session fixture (importing the
fixture by name into a test module trips pyflakes' redefinition check).

Generation takes a JVM a minute or more, so the logs are kept in `build/spark-logs/<key>/`,
keyed by a hash of the generating program and the PySpark and Python versions: pytest-xdist's
workers (and the next run) take them from there under a file lock, and the first to come
generates them. A digest of the event files is checked on every reuse (a test that changed
them makes the next session generate them again), and a new run shifts their mtimes to now so
that the replay horizon (a day by default) treats them as new logs, as fresh ones would be.

`running_app(work, layout, codec)`: a context manager around a live application in another
process that advances one step per signal file, to watch an in-progress log grow.

Local mode has no application attempts (only cluster managers such as YARN assign attempt
ids), so attempt-id names are tested by renaming real logs the way Spark would name them.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import pytest

from tests import jvm
from tests.agentproc import stop_process

JOBS = Path(__file__).resolve().parent / "sparkjobs"
CACHE = Path(__file__).resolve().parents[1] / "build" / "spark-logs"
#: What makes the logs: their program, the helpers it imports, the versions running it.
PROGRAM = (JOBS / "generate_logs.py", JOBS / "local.py")
LAYOUTS = ("rolling", "single")
CODECS = ("none", "zstd", "lz4", "snappy", "lzf")
GENERATE_TIMEOUT = 600.0
STEP_TIMEOUT = 120.0


@dataclass(frozen=True)
class SparkLogs:
    """Where the generated logs are; each variant directory holds one application."""

    root: Path
    seconds: float  # how long generation took
    app_ids: dict[str, str]  # variant -> application id

    def directory(self, layout: str, codec: str) -> Path:
        """The event-log directory holding the application of that layout and codec."""
        return self.root / f"{layout}-{codec}"

    @property
    def multi(self) -> Path:
        """The event-log directory of the zstd rolling log with several events_N files."""
        return self.root / "rolling-multi"


def spark_env() -> dict[str, str]:
    """Environment for PySpark subprocesses: this interpreter for workers, loopback only."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    jvm.start_archive(env)
    return env


def generate(out: Path) -> SparkLogs:
    """Run tests/sparkjobs/generate_logs.py into `out` (which must not exist yet)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.parent / "generate.log"
    with log.open("wb") as output:
        result = subprocess.run(
            [sys.executable, str(JOBS / "generate_logs.py"), str(out)],
            cwd=out.parent,
            env=spark_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=GENERATE_TIMEOUT,
            check=False,
        )
    if result.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise RuntimeError(f"generate_logs.py exited {result.returncode}:\n{tail}")
    return load(out)


def load(out: Path) -> SparkLogs:
    """The logs generated into `out`, from its manifest."""
    manifest = json.loads((out / "manifest.json").read_text())
    app_ids = {name: variant["app_id"] for name, variant in manifest["variants"].items()}
    return SparkLogs(root=out, seconds=float(manifest["seconds"]), app_ids=app_ids)


def program_key() -> str:
    """What the cached logs depend on, hashed."""
    digest = hashlib.sha256()
    for path in PROGRAM:
        digest.update(path.read_bytes())
    digest.update(f"pyspark {metadata.version('pyspark')} python {sys.version}".encode())
    return digest.hexdigest()[:16]


def _event_files(out: Path) -> list[Path]:
    """The manifest and every file of the variants' event-log directories, in order."""
    manifest = out / "manifest.json"
    if not manifest.is_file():
        return []
    variants = json.loads(manifest.read_text())["variants"]
    files = [p for name in sorted(variants) for p in sorted((out / name).rglob("*"))]
    return [manifest, *(p for p in files if p.is_file())]


def tree_digest(out: Path) -> str:
    """A hash of the names and contents of what the tests read of `out`."""
    digest = hashlib.sha256()
    for path in _event_files(out):
        digest.update(str(path.relative_to(out)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _renew_mtimes(out: Path) -> None:
    """Shift the files' mtimes so that the newest is now, keeping their order."""
    files = _event_files(out)
    shift = time.time_ns() - max(p.stat().st_mtime_ns for p in files)
    for path in files:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns + shift, stat.st_mtime_ns + shift))


def cached(cache: Path = CACHE) -> SparkLogs:
    """The logs from `cache`, generated there first when missing, stale or changed; one
    process at a time (the others wait on the lock, then reuse what it made)."""
    key = program_key()
    entry, run = cache / key, os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out, digest, owner = entry / "out", entry / "digest", entry / "run"
        if digest.is_file() and digest.read_text() == tree_digest(out):
            if not run or not owner.is_file() or owner.read_text() != run:
                _renew_mtimes(out)  # once per run: the run's other workers may be reading
                owner.write_text(run)
            return load(out)
        shutil.rmtree(entry, ignore_errors=True)
        logs = generate(out)
        digest.write_text(tree_digest(out))
        owner.write_text(run)
        return logs


_generated: dict[Path, SparkLogs | BaseException] = {}
Built = TypeVar("Built")


def once_per_session(
    built: dict[Path, Built | BaseException],
    tmp_path_factory: pytest.TempPathFactory,
    build: Callable[[], Built],
    failures: tuple[type[BaseException], ...],
) -> Built:
    """What `build` makes, on the session's first use (kept in `built`); a failure of the kinds
    in `failures` is remembered and raised again, not retried."""
    base = tmp_path_factory.getbasetemp()
    if base not in built:
        try:
            built[base] = build()
        except failures as error:
            built[base] = error
    result = built[base]
    if isinstance(result, BaseException):
        raise result
    return result


def session_spark_logs(tmp_path_factory: pytest.TempPathFactory) -> SparkLogs:
    """The session's logs, generated on first use; a failure is remembered, not retried."""
    failures = (RuntimeError, OSError, subprocess.SubprocessError)
    return once_per_session(_generated, tmp_path_factory, cached, failures)


@pytest.fixture(scope="session")
def spark_logs(tmp_path_factory: pytest.TempPathFactory) -> SparkLogs:
    """Real event logs of every layout x codec, generated once per session."""
    return session_spark_logs(tmp_path_factory)


class SteeredJob:
    """A PySpark program in another process that a test steers through files in its control
    directory: the program writes one to say where it is, the test one to let it go on."""

    program = ""  # as error messages name it
    step_timeout = STEP_TIMEOUT  # how long one step may take

    def __init__(self, event_dir: Path, control: Path, process: subprocess.Popen[bytes]):
        self.event_dir = event_dir
        self.control = control
        self.process = process

    def wait_file(self, name: str, timeout: float | None = None) -> Path:
        """Block until the program wrote `CONTROL/name` (within `step_timeout` by default)."""
        timeout = self.step_timeout if timeout is None else timeout
        path = self.control / name
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.program} exited {self.process.returncode} before {name!r}:\n"
                    f"{self.output()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {name!r} from {self.program} within {timeout} s")
            time.sleep(0.05)
        return path

    def output(self) -> str:
        """The end of what the program printed."""
        return (self.control / "output.log").read_text(errors="replace")[-4000:]


def start_steered(work: Path, control: Path, program: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start the PySpark `program` in `work`, its output into CONTROL/output.log."""
    control.mkdir(parents=True)
    with (control / "output.log").open("wb") as output:
        return subprocess.Popen(
            [sys.executable, str(program), *args],
            cwd=work,
            env=spark_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
        )


class RunningApp(SteeredJob):
    """A live Spark application in another process; see tests/sparkjobs/running_app.py."""

    program = "running_app.py"

    def __init__(self, event_dir: Path, control: Path, process: subprocess.Popen[bytes]):
        super().__init__(event_dir, control, process)
        self.app_id = ""

    def signal(self, name: str) -> None:
        """Let the application take its next step (`go-job`, `release`, `go-stop`)."""
        (self.control / name).touch()

    def wait(self, name: str, timeout: float = STEP_TIMEOUT) -> None:
        """Block until the application wrote the signal file `name`."""
        self.wait_file(name, timeout)

    def finish(self) -> None:
        """Let the application run its job and stop: `go-job` and `release` until `job-done`,
        then `go-stop` until `stopped`."""
        self.signal("go-job")
        self.signal("release")
        self.wait("job-done")
        self.signal("go-stop")
        self.wait("stopped")


@contextmanager
def running_app(
    work: Path,
    layout: str,
    codec: str,
    *,
    event_url: str | None = None,
    confs: dict[str, str] | None = None,
) -> Iterator[RunningApp]:
    """Start a live application logging into `work/events` (or `event_url`, a store's URL,
    with the extra Spark properties `confs`) and wait until it runs; on exit the process is
    stopped (SIGTERM, then SIGKILL) if it is still alive."""
    event_dir, control = work / "events", work / "control"
    if event_url is None:
        event_dir.mkdir(parents=True)
    process = start_steered(
        work,
        control,
        JOBS / "running_app.py",
        event_url or str(event_dir),
        str(control),
        layout,
        codec,
        *(f"{key}={value}" for key, value in (confs or {}).items()),
    )
    app = RunningApp(event_dir, control, process)
    try:
        app.wait("started")
        app.app_id = (control / "started").read_text()
        yield app
    finally:
        stop_process(process)


LZF_MISSING = importlib.util.find_spec("lzf") is None
NO_LZF = pytest.mark.skipif(
    LZF_MISSING, reason="decoding lzf needs the python-lzf package (module lzf), not installed"
)


def codec_params(codecs: tuple[str, ...] = CODECS) -> list[object]:
    """`codecs` as pytest params; lzf is skipped where its decoding module is missing."""
    return [pytest.param(codec, marks=NO_LZF) if codec == "lzf" else codec for codec in codecs]


def event_files(directory: Path) -> list[Path]:
    """The event files of the one application in `directory`, in order."""
    rolling = sorted(directory.glob("eventlog_v2_*"))
    if rolling:
        files = [p for p in rolling[0].glob("events_*") if not p.name.startswith(".")]
        return sorted(files, key=lambda p: int(p.name.split("_")[1]))
    return [p for p in directory.iterdir() if not p.name.startswith(".")]
