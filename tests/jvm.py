"""The options of the JVMs the suite starts through Spark's scripts; tests/conftest.py puts
them in the environment of the session, so every Spark program a test runs has them.

C1 alone (`-XX:TieredStopAtLevel=1`, as tests/kafka.py's broker): the suite's JVMs live
seconds to minutes on small data, where C2's compilations cost more CPU than they save.

A class-data archive of Spark's classes (`-XX:SharedArchiveFile`): a driver maps the classes
a small PySpark program loads from it instead of reading, parsing and verifying them from
Spark's jars again. The first session on a machine that runs a Spark program makes it in
the background (one small program run with `-XX:ArchiveClassesAtExit`) into
`build/jvm-cds/`, keyed by the java binary and the PySpark installation; JVMs started
before it is there, and those of another PySpark environment (their class path does not
start with the archive's), run without it.
Their `cds` log is off, so that neither case prints a warning into a program's output.
What the programs do is the same: only how the JVM loads and compiles its code changes.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "jvm-cds"
JOB = ROOT / "tests" / "sparkjobs" / "exec_job.py"  # a small program: one write
C1_ONLY = "-XX:TieredStopAtLevel=1"
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: Spark's launcher (its class path is not the driver's: no archive), its drivers, a
#: standalone master and worker.
LAUNCHER, DRIVERS = "SPARK_LAUNCHER_OPTS", ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS")
DUMP_TIMEOUT = 600.0
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)


def archive_path() -> Path | None:
    """Where this machine's archive is (or will be); None without java or PySpark, or in a
    checkout whose path has a space (the option would need quoting in every variable)."""
    java, spec = shutil.which("java"), importlib.util.find_spec("pyspark")
    if java is None or spec is None or spec.origin is None or " " in str(CACHE):
        return None
    spark_home = Path(spec.origin).parent
    jars = sorted((spark_home / "jars").glob("*.jar"))
    digest = hashlib.sha256()
    for part in (os.path.realpath(java), str(spark_home), *(j.name for j in jars)):
        digest.update(part.encode() + b"\0")
    digest.update(str(os.stat(os.path.realpath(java)).st_mtime_ns).encode())
    return CACHE / f"{digest.hexdigest()[:16]}.jsa"


def append(name: str, options: str) -> None:
    """`options` at the end of the variable `name`, once (xdist's workers inherit them)."""
    current = os.environ.get(name, "")
    if options not in current:
        os.environ[name] = f"{current} {options}".strip()


def configure() -> None:
    """The session's JVM options into the environment."""
    append(LAUNCHER, C1_ONLY)
    archive = archive_path()
    for name in DRIVERS:
        append(name, C1_ONLY)
        if archive is not None:
            append(name, f"-XX:SharedArchiveFile={archive} {QUIET_CDS}")


_making: list[subprocess.Popen[bytes]] = []


def start_archive(env: dict[str, str]) -> None:
    """The archive made in the background (once per process, by one process at a time) when
    the session's options name one that is not there yet; ended when this process exits."""
    archive = archive_path()
    wanted = archive is not None and str(archive) in env.get("SPARK_SUBMIT_OPTS", "")
    if _making or archive is None or not wanted or archive.exists():
        return
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.jvm", str(archive)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _making.append(process)
    atexit.register(_end, process)


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the program and its JVM
    process.wait()


def make_archive(archive: Path) -> None:
    """Run one small PySpark program with `-XX:ArchiveClassesAtExit`, then put what it wrote
    at `archive`; nothing when another process is making it."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with (archive.parent / f"{archive.name}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        if archive.exists():
            return
        for stale in archive.parent.glob(f"{archive.stem}-*"):  # of a process ended midway
            shutil.rmtree(stale, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=archive.parent, prefix=f"{archive.stem}-") as work:
            made = Path(work) / "made.jsa"
            env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{C1_ONLY} -XX:ArchiveClassesAtExit={made}"}
            for name in ("events", "out"):
                (Path(work) / name).mkdir()
            args = [str(Path(work) / "events"), str(Path(work) / "out"), "ok"]
            # The JVM writes the archive as it exits, after the Python program that started
            # it: this process adopts it (a subreaper) and waits for every descendant.
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                return
            subprocess.Popen(
                [sys.executable, str(JOB), *args],
                env=env,
                cwd=work,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            signal.alarm(int(DUMP_TIMEOUT))  # the default action ends this process
            clean = True
            while True:
                try:
                    _, status = os.wait()
                except ChildProcessError:
                    break
                clean = clean and os.waitstatus_to_exitcode(status) == 0
            if clean and made.is_file():
                os.replace(made, archive)


if __name__ == "__main__":
    make_archive(Path(sys.argv[1]))
