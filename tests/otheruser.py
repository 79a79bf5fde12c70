"""Running the agent as another user than the one running the tests and Spark, the way the
shipped unit runs it: from an environment that user can read.

The checkout, its `.venv` and the interpreter behind it may sit under a 0700 directory (root's
home, `mktemp -d`), where another user can import nothing. `public_agent` makes, once per
session, a world-readable venv of Debian's python3.11 in its own directory under /tmp and
copies into it the agent and the installed files of every runtime dependency (the same
cp311 wheels the tests use), as `deploy/install.sh` does for the service.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = Path("/usr/bin/python3.11")  # Debian's: readable and runnable by every user
NOBODY = 65534
_NAME = re.compile(r"^[A-Za-z0-9._-]+")


def public_dir(prefix: str) -> Path:
    """A new directory under /tmp that every user may enter and read (pytest's own
    temporary directories are root's alone); the caller removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


def runtime_distributions() -> list[metadata.Distribution]:
    """The installed distributions the agent needs at run time: the dependencies
    pyproject.toml names (not the installed metadata, which may predate it), theirs, and so
    on (extras left out)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    seen: dict[str, metadata.Distribution] = {}
    todo = [m.group(0) for spec in project["dependencies"] if (m := _NAME.match(spec.strip()))]
    while todo:
        wanted = todo.pop()
        key = wanted.lower().replace("_", "-")
        if key in seen:
            continue
        dist = metadata.distribution(wanted)
        seen[key] = dist
        for requirement in dist.requires or []:
            spec, _, marker = requirement.partition(";")
            if marker.strip() and not Marker(marker.strip()).evaluate({"extra": ""}):
                continue
            match = _NAME.match(spec.strip())
            if match:
                todo.append(match.group(0))
    return list(seen.values())


def build_public_agent(base: Path) -> Path:
    """A venv under `base` that other users can run the agent from; its python."""
    venv = base / "venv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / "python3.11" / "site-packages"
    for dist in runtime_distributions():
        for file in dist.files or ():
            source = Path(str(dist.locate_file(file)))
            if ".." in file.parts or not source.is_file() or "__pycache__" in file.parts:
                continue  # scripts in bin/, byte code: not needed
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    shutil.copytree(ROOT / "agent", site / "agent", ignore=shutil.ignore_patterns("__pycache__"))
    for path in (base, *base.rglob("*")):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IRGRP | stat.S_IROTH | (0o011 if stat.S_ISDIR(mode) else 0))
    return venv / "bin" / "python"


@pytest.fixture(scope="session")
def public_agent() -> Iterator[Path]:
    """The python of a world-readable venv holding the agent (skips without Debian's
    python3.11 or without root, which running as another user needs)."""
    if os.geteuid() != 0:
        pytest.skip("running the agent as another user needs root")
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is missing (scripts/services.sh installs it)")
    base = public_dir("lineage-agent-public-")
    try:
        yield build_public_agent(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def give(paths: Sequence[Path], uid: int = NOBODY, gid: int = NOBODY) -> None:
    """Hand files and directories to another user."""
    for path in paths:
        os.chown(path, uid, gid)


def as_user(uid: int = NOBODY, gid: int = NOBODY, *, caps: Sequence[str] = ()) -> list[str]:
    """A command prefix running as `uid`, with only `gid`, keeping the named capabilities
    (as the unit's AmbientCapabilities= does); util-linux's setpriv."""
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    if caps:
        wanted = ",".join(f"+{cap}" for cap in caps)
        prefix += [f"--inh-caps={wanted}", f"--ambient-caps={wanted}"]
    else:
        prefix += ["--inh-caps=-all"]
    return prefix
