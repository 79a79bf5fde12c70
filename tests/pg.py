"""A real, throwaway PostgreSQL server for tests (Debian's `postgresql` package).

`start_postgres()` runs `initdb` and `pg_ctl` in a fresh temporary directory, listening on
127.0.0.1 only (and a unix socket in that directory), with a database and a password user
for JDBC; `Postgres.stop()` shuts it down and removes the directory; `running_postgres()`
does both around a block. As root the server runs as the `postgres` OS user (PostgreSQL
refuses to run as root). `postgres_skip_reason()` says why no server can run here, for an
exact `pytest.skip`.

The JDBC driver comes from Debian's `libpostgresql-jdbc-java` (`/usr/share/java/postgresql.jar`);
`scripts/services.sh` installs both packages where they are missing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

JDBC_JAR = Path("/usr/share/java/postgresql.jar")
DATABASE = "lineage"
USER = "spark"
PASSWORD = "spark-secret-pw"
START_TIMEOUT = 60  # seconds for pg_ctl -w; a slow, shared CI machine needs room


@dataclass(frozen=True)
class Postgres:
    """A running server: where it listens and how to reach it."""

    root: Path  # the temporary directory with data and socket
    bindir: Path
    port: int
    database: str = DATABASE
    user: str = USER
    password: str = PASSWORD
    host: str = "127.0.0.1"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    @property
    def namespace(self) -> str:
        """The OpenLineage dataset namespace of this server."""
        return f"postgres://{self.host}:{self.port}"

    def psql(self, sql: str, database: str | None = None) -> str:
        """Run SQL as the superuser over the unix socket; its unaligned, tuples-only output."""
        result = subprocess.run(
            [
                *_as_owner(),
                str(self.bindir / "psql"),
                "-h",
                str(self.root / "socket"),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database or self.database,
                "-v",
                "ON_ERROR_STOP=1",
                "-X",
                "-A",
                "-t",
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout.strip()

    def restart(self) -> None:
        """Stop the server (fast: connections are cut) and start it again, same port."""
        _run(
            self.root,
            self.bindir / "pg_ctl",
            "-D",
            str(self.root / "data"),
            "-l",
            str(self.root / "server.log"),
            "-m",
            "fast",
            "-t",
            str(START_TIMEOUT),
            "-w",
            "restart",
        )

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Every server process stopped (SIGSTOP): connections stay open, their data is
        acknowledged by the kernel, and nothing answers, as with a hung host."""
        postmaster = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        pids = [postmaster, *_children(postmaster)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its directory."""
        subprocess.run(
            [
                *_as_owner(),
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent` (the server's backends and workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def find_bindir() -> Path | None:
    """The directory holding `initdb`, `pg_ctl`, `psql` of the newest installed server."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def postgres_skip_reason() -> str | None:
    """Why no throwaway server can run here, or None when it can."""
    bindir = find_bindir()
    if bindir is None or not (bindir / "pg_ctl").exists():
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql"
    if not JDBC_JAR.exists():
        return f"PostgreSQL JDBC driver {JDBC_JAR} not found: install libpostgresql-jdbc-java"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres OS user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and runuser (util-linux) is missing"
    return None


def _as_owner() -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its tools as the postgres user."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_postgres() -> Postgres:
    """Initialize and start a server in a new temporary directory; RuntimeError if it fails."""
    reason = postgres_skip_reason()
    if reason is not None:
        raise RuntimeError(reason)
    bindir = find_bindir()
    assert bindir is not None
    # Not under pytest's base temp: that is private to this user, the server's user must
    # be able to reach its own directory.
    root = Path(tempfile.mkdtemp(prefix="lineage-pg-"))
    (root / "socket").mkdir()
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (root, root / "socket"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    data = str(root / "data")
    try:
        _run(
            root,
            bindir / "initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        port = _free_port()
        options = f"-k {root / 'socket'} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
        _run(
            root,
            bindir / "pg_ctl",
            "-D",
            data,
            "-o",
            options,
            "-l",
            str(root / "server.log"),
            "-t",
            str(START_TIMEOUT),
            "-w",
            "start",
        )
        server = Postgres(root, bindir, port)
        server.psql(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'", database="postgres")
        server.psql(f"CREATE DATABASE {DATABASE} OWNER {USER}", database="postgres")
    except BaseException:
        subprocess.run(
            [*_as_owner(), str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
            capture_output=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server


def _run(root: Path, tool: Path, *args: str) -> None:
    """Run one server tool as the server's user; a failure carries its output and the log."""
    result = subprocess.run(
        [*_as_owner(), str(tool), *args],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT * 2,
        check=False,
    )
    if result.returncode != 0:
        log = root / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        output = (result.stderr or result.stdout).strip()[-2000:]
        raise RuntimeError(f"{tool.name} exited {result.returncode}: {output}\n{tail}")


@contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A throwaway server for the duration of the block; RuntimeError if it cannot start."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()
