"""The file transport on real files: exact lines, rotation, one writer per path, write errors."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.config.model import FileConfig
from agent.delivery.envelope import Envelope
from agent.delivery.transports.file import FileTransport
from agent.errors import DeliveryError, StartError
from tests.envelopes import start_envelope

ROOT = Path(__file__).resolve().parents[1]

Factory = Callable[..., FileTransport]


def run_event(i: int, pad: int = 0) -> bytes:
    """A compact RunEvent; `pad` adds that many bytes to the job name."""
    event = {
        "eventType": "START",
        "eventTime": "2025-01-01T00:00:00.000Z",
        "producer": "https://github.com/example/lineage-agent",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.UUID(int=i))},
        "job": {"namespace": "spark", "name": f"app_{i}" + "x" * pad},
    }
    return json.dumps(event, separators=(",", ":")).encode()


def envelope(i: int, pad: int = 0) -> Envelope:
    payload = run_event(i, pad)
    return start_envelope(payload, str(uuid.UUID(int=i)))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "out" / "events.jsonl"


def send(transport: FileTransport, *batch: Envelope) -> None:
    """Run one send to completion (the file transport does no I/O waits of its own)."""
    asyncio.run(transport.send(batch))


def close(transport: FileTransport) -> None:
    asyncio.run(transport.aclose())


@pytest.fixture
def make() -> Iterator[Factory]:
    """Builds transports from FileConfig keywords and closes them after the test."""
    made: list[FileTransport] = []

    def factory(path: Path, **fields: float) -> FileTransport:
        transport = FileTransport(FileConfig(path=str(path), **fields))
        made.append(transport)
        return transport

    yield factory
    for transport in made:
        close(transport)


def run_ids(*files: Path) -> list[str]:
    """The run ids of every line of `files`, in order; every line must be complete JSON."""
    ids = []
    for file in files:
        data = file.read_bytes()
        assert data.endswith(b"\n") or not data
        ids += [json.loads(line)["run"]["runId"] for line in data.splitlines()]
    return ids


def rotated(path: Path) -> list[Path]:
    """The rotated siblings of `path`, oldest first."""
    found = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".")]
    found = [p for p in found if p.suffix != ".lock"]
    return sorted(found, key=lambda p: int(p.name.rsplit(".", 1)[1]))


def test_lines_written_exactly(path: Path, make: Factory) -> None:
    """Each payload becomes one line, byte for byte, in order across batches."""
    transport = make(path)
    send(transport, envelope(1))
    send(transport, envelope(2), envelope(3))
    assert path.read_bytes() == run_event(1) + b"\n" + run_event(2) + b"\n" + run_event(3) + b"\n"


def test_appends_to_existing_file(path: Path, make: Factory) -> None:
    """Lines already in the file are kept; new ones are appended."""
    path.parent.mkdir()
    path.write_bytes(run_event(0) + b"\n")
    send(make(path), envelope(1))
    assert run_ids(path) == [str(uuid.UUID(int=0)), str(uuid.UUID(int=1))]


def test_creates_directory_and_private_file(path: Path, make: Factory) -> None:
    """A missing parent directory is created; the file is created with mode 0640."""
    previous = os.umask(0o022)
    try:
        make(path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750


def test_rotation_at_threshold_never_splits_lines(path: Path, make: Factory) -> None:
    """Past the threshold the file becomes `<path>.<unix-nanos>`; every line stays whole."""
    threshold = 4096
    transport = make(path, rotation_size_mb=threshold / (1024 * 1024))
    began = time.time_ns()
    sent = []
    for i in range(0, 60, 3):
        batch = [envelope(j, pad=150) for j in range(i, i + 3)]
        sent += [str(uuid.UUID(int=j)) for j in range(i, i + 3)]
        send(transport, *batch)
    ended = time.time_ns()
    files = rotated(path)
    assert len(files) >= 3
    batch_bytes = 3 * (len(run_event(0, pad=150)) + 1)
    for file in files:
        assert began <= int(file.name.rsplit(".", 1)[1]) <= ended
        assert threshold <= file.stat().st_size < threshold + batch_bytes
    assert path.stat().st_size < threshold
    assert run_ids(*files, path) == sent


def test_rotation_zero_never_rotates(path: Path, make: Factory) -> None:
    """rotation_size_mb 0 keeps one file however large it grows."""
    transport = make(path, rotation_size_mb=0)
    for i in range(0, 2000, 100):
        send(transport, *(envelope(j, pad=600) for j in range(i, i + 100)))
    assert path.stat().st_size > 1024 * 1024
    assert rotated(path) == []
    assert len(run_ids(path)) == 2000


def test_rotation_names_never_collide(
    path: Path, make: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rotations in the same nanosecond get distinct names (clock frozen: a real clock
    cannot be made to repeat on demand)."""
    monkeypatch.setattr(time, "time_ns", lambda: 1_700_000_000_000_000_000)
    transport = make(path, rotation_size_mb=1 / (1024 * 1024))  # every write rotates
    send(transport, envelope(1))
    send(transport, envelope(2))
    names = sorted(p.name for p in rotated(path))
    assert names == ["events.jsonl.1700000000000000000", "events.jsonl.1700000000000000001"]
    assert run_ids(*rotated(path)) == [str(uuid.UUID(int=1)), str(uuid.UUID(int=2))]


def test_second_writer_on_same_path_refused(path: Path, make: Factory) -> None:
    """A second transport on the same path is refused while the first holds the lock."""
    first = make(path)
    with pytest.raises(StartError) as caught:
        make(path)
    assert str(caught.value) == (
        f"another lineage-agent is writing {path} (lock {path}.lock is held)"
    )
    close(first)
    send(make(path), envelope(1))  # released on close
    assert run_ids(path) == [str(uuid.UUID(int=1))]


def test_lock_held_by_another_process_refused(path: Path) -> None:
    """A lock held by another process refuses the transport with the same message."""
    path.parent.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys\n"
            f"f = open({str(path) + '.lock'!r}, 'w')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"locked\n"
        with pytest.raises(StartError) as caught:
            FileTransport(FileConfig(path=str(path)))
        assert str(caught.value) == (
            f"another lineage-agent is writing {path} (lock {path}.lock is held)"
        )
    finally:
        holder.communicate(b"", timeout=10)


def test_symlink_at_path_refused(path: Path, tmp_path: Path) -> None:
    """A symbolic link planted at the path is refused at start; its target stays untouched."""
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    path.parent.mkdir()
    path.symlink_to(target)
    with pytest.raises(StartError) as caught:
        FileTransport(FileConfig(path=str(path)))
    assert str(caught.value) == f"refusing to write {path}: it is a symbolic link"
    assert target.read_bytes() == b""
    # The lock was released with the refusal.
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_fifo_at_path_refused(path: Path) -> None:
    """A FIFO at the path is refused at once instead of blocking the agent."""
    path.parent.mkdir()
    os.mkfifo(path)
    with pytest.raises(StartError) as caught:
        FileTransport(FileConfig(path=str(path)))
    assert str(caught.value) == f"refusing to write {path}: not a regular file"


def test_symlink_swapped_in_later_is_a_write_error(
    path: Path, tmp_path: Path, make: Factory
) -> None:
    """A symlink replacing the file mid-run fails the batch as write_error; nothing leaks
    through it, and once it is gone the transport writes again."""
    transport = make(path)
    send(transport, envelope(1))
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    path.unlink()
    path.symlink_to(target)
    with pytest.raises(DeliveryError) as caught:
        send(transport, envelope(2))
    assert (caught.value.reason, caught.value.detail) == (
        "write_error",
        f"refusing to write {path}: it is a symbolic link",
    )
    assert target.read_bytes() == b""
    path.unlink()
    send(transport, envelope(3))
    assert run_ids(path) == [str(uuid.UUID(int=3))]


def test_removed_file_is_recreated(path: Path, make: Factory) -> None:
    """A file deleted under the transport is recreated by the next send, not written blind."""
    transport = make(path)
    send(transport, envelope(1))
    path.unlink()
    send(transport, envelope(2))
    assert run_ids(path) == [str(uuid.UUID(int=2))]


def test_externally_rotated_file_is_reopened(path: Path, make: Factory) -> None:
    """A file renamed away (logrotate style) gets a fresh file at the path on the next send."""
    transport = make(path)
    send(transport, envelope(1))
    moved = path.with_name("events.jsonl.old")
    path.rename(moved)
    send(transport, envelope(2))
    assert run_ids(moved) == [str(uuid.UUID(int=1))]
    assert run_ids(path) == [str(uuid.UUID(int=2))]


def test_replaced_file_is_followed(path: Path, make: Factory) -> None:
    """A new file created at the path after a rename (logrotate `create`) receives the next
    batch; the renamed one gets nothing more."""
    transport = make(path)
    send(transport, envelope(1))
    moved = path.with_name("events.jsonl.1")
    path.rename(moved)
    path.write_bytes(b"")
    send(transport, envelope(2))
    assert run_ids(moved) == [str(uuid.UUID(int=1))]
    assert run_ids(path) == [str(uuid.UUID(int=2))]


def test_missing_directory_is_write_error_then_recovers(path: Path, make: Factory) -> None:
    """With its directory gone the batch fails as write_error; the open is retried later."""
    transport = make(path)
    send(transport, envelope(1))
    path.unlink()
    os.unlink(f"{path}.lock")
    path.parent.rmdir()
    with pytest.raises(DeliveryError) as caught:
        send(transport, envelope(2))
    assert str(caught.value) == f"write_error: cannot open {path}: No such file or directory"
    path.parent.mkdir()
    send(transport, envelope(3))
    assert run_ids(path) == [str(uuid.UUID(int=3))]


def test_close_is_idempotent_and_final(path: Path, make: Factory) -> None:
    """aclose twice is fine; a send afterwards is a write_error, not a crash."""
    transport = make(path)
    send(transport, envelope(1))
    close(transport)
    close(transport)
    with pytest.raises(DeliveryError) as caught:
        send(transport, envelope(2))
    assert str(caught.value) == f"write_error: cannot write {path}: transport closed"
    assert run_ids(path) == [str(uuid.UUID(int=1))]


def test_empty_batch_writes_nothing(path: Path, make: Factory) -> None:
    """An empty batch is a no-op."""
    send(make(path))
    assert path.read_bytes() == b""


# Runs in a child process: the file size limit applies to the whole process, and a
# rejected write raises SIGXFSZ, which kills a process that does not ignore it.
_SIZE_LIMIT_CHILD = """
import json, resource, signal, sys
from agent.config.model import FileConfig
from agent.errors import DeliveryError
from agent.delivery.transports.file import FileTransport
from tests.test_transport_file import close, envelope, send

path = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
transport = FileTransport(FileConfig(path=path, rotation_size_mb=0))
line = len(envelope(0, pad=200).payload) + 1
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (4 * line, hard))
outcome = {"line": line}
send(transport, *(envelope(i, pad=200) for i in range(3)))
try:
    send(transport, *(envelope(i, pad=200) for i in range(3, 6)))  # crosses the limit
except DeliveryError as exc:
    outcome["error"] = str(exc)
with open(path, "rb") as file:
    outcome["size_after_error"] = len(file.read())
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
send(transport, envelope(6, pad=200))
close(transport)
print(json.dumps(outcome))
"""


def test_file_size_limit_is_write_error_without_torn_line(path: Path) -> None:
    """EFBIG mid-batch is a write_error, the partial batch is cut back, and writing resumes."""
    child = subprocess.run(
        [sys.executable, "-c", _SIZE_LIMIT_CHILD, str(path)],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode()
    outcome = json.loads(child.stdout)
    line = outcome["line"]
    assert outcome["error"] == f"write_error: cannot write {path}: File too large"
    assert outcome["size_after_error"] == 3 * line
    assert run_ids(path) == [str(uuid.UUID(int=i)) for i in (0, 1, 2, 6)]


def test_a_reload_leaves_the_line_its_predecessor_is_writing(path: Path, make: Factory) -> None:
    """A transport built beside a live one on the same path (a reload) keeps a tail without
    its newline: it is the old transport's batch being written, not a killed writer's."""
    old = make(path)
    send(old, envelope(1))
    with path.open("ab") as file:  # the old transport's next batch, halfway through
        file.write(b'{"eventType": "START", "run"')
    before = path.read_bytes()
    new = FileTransport(FileConfig(path=str(path)), lock_of=old)
    try:
        assert path.read_bytes() == before
    finally:
        close(new)
    path.write_bytes(before)
    close(old)
    fresh = make(path)  # no transport of this process holds the file: a torn line is cut
    assert path.read_bytes() == before[: before.rindex(b"\n") + 1]
    close(fresh)
