"""File transport faults made real: a file-size limit (RLIMIT_FSIZE), a full disk (a small
tmpfs), the directory moved away or shadowed by a read-only file system, and rotation racing
an external `mv`. In every case the lines on disk are exactly the delivered events, none is
torn or repeated, and the rest are counted as write_error drops."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

import pytest

from tests.agentproc import metric
from tests.reliability.harness import (
    assert_healthy,
    can_mount,
    check_events,
    config_file,
    drops,
    event_index,
    file_lineage,
    fill,
    healthz,
    jsonl_files,
    memory_agent,
    read_jsonl,
    settle,
    stop_and_account,
    tmpfs,
    wait_produced,
    wait_until,
)

EVENTS = 600
RATE = 300.0
NO_MOUNT = can_mount()
needs_mount = pytest.mark.skipif(NO_MOUNT is not None, reason=str(NO_MOUNT))


def outputs(target: Path) -> list[Path]:
    """Every file the events may be in: the transport's own and any moved by others."""
    return sorted(
        (p for p in target.parent.glob(target.name + "*") if not p.name.endswith(".lock")),
        key=lambda p: p.stat().st_mtime_ns,
    )


def assert_lines_are_the_deliveries(files: list[Path], delivered: float, key: Path) -> None:
    """The files hold exactly the delivered events, each once, whole, valid and verified."""
    events = read_jsonl(*files)
    assert len(events) == delivered
    indexes = [event_index(event) for event in events]
    assert len(set(indexes)) == len(indexes), "an event was written twice"
    assert check_events(events, key) == delivered


def _file_size_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


def test_file_size_limit_below_rotation_size_rotates(workdir: Path) -> None:
    """A file-size limit below the rotation size rotates there instead of failing forever."""
    target = workdir / "out" / "events.jsonl"
    config = config_file(workdir, file_lineage(target, rotation_size_mb=1))
    with memory_agent(config, EVENTS, 600.0, preexec_fn=_file_size_limit) as process:
        samples = settle(process, "file", EVENTS)
        assert_healthy(process)
        delivered = metric(samples, "lineage_events_delivered_total", transport="file")
        lost = drops(samples, "file")
        accounting = stop_and_account(process)
    files = jsonl_files(target)
    assert len(files) >= 3, files
    assert all(f.stat().st_size <= 256 * 1024 for f in files)
    assert set(lost) <= {"write_error"}
    # At most one batch per rotation is lost; most events are delivered.
    assert delivered + lost.get("write_error", 0) == EVENTS
    assert delivered > EVENTS * 0.8, (delivered, lost)
    assert accounting["file"] == {
        "offered": EVENTS,
        "delivered": delivered,
        "dropped": EVENTS - delivered,
        "unconfirmed": 0,
        "queued": 0,
    }
    assert_lines_are_the_deliveries(files, delivered, workdir / "ed25519.key")


@needs_mount
def test_disk_full_then_space_freed(workdir: Path) -> None:
    """A full disk gives write_error drops, no torn line; writing resumes once space is freed."""
    with tmpfs(workdir / "disk", "8m") as disk:  # room for every event once freed
        target = disk / "events.jsonl"
        config = config_file(workdir, file_lineage(target, rotation_size_mb=0))
        with memory_agent(config, EVENTS, RATE) as process:
            wait_produced(process, EVENTS // 4)
            filler = fill(disk)
            wait_until(
                "write errors",
                lambda: drops(process.scrape(), "file").get("write_error", 0) > 0,
            )
            assert_healthy(process)  # the agent runs on; the health shows the transport's error
            filler.unlink()
            freed_at = wait_produced(process, 0)
            samples = settle(process, "file", EVENTS)
            assert_healthy(process)
            delivered = metric(samples, "lineage_events_delivered_total", transport="file")
            assert drops(samples, "file") == {"write_error": EVENTS - delivered}
            accounting = stop_and_account(process)
        assert accounting["file"]["delivered"] == delivered
        events = read_jsonl(target)
        assert set(range(freed_at + 1, EVENTS)) <= {event_index(e) for e in events}
        assert_lines_are_the_deliveries([target], delivered, workdir / "ed25519.key")


def test_directory_moved_away_then_back(workdir: Path) -> None:
    """The output directory moved away: write_error drops until it is back, nothing elsewhere."""
    directory = workdir / "out"
    target = directory / "events.jsonl"
    aside = workdir / "aside"
    config = config_file(workdir, file_lineage(target, rotation_size_mb=0))
    with memory_agent(config, EVENTS, RATE) as process:
        wait_produced(process, EVENTS // 4)
        directory.rename(aside)
        wait_until("write errors", lambda: "write_error" in drops(process.scrape(), "file"))
        wait_produced(process, EVENTS // 2)
        aside.rename(directory)
        back_at = wait_produced(process, 0)
        samples = settle(process, "file", EVENTS)
        assert_healthy(process)
        delivered = metric(samples, "lineage_events_delivered_total", transport="file")
        assert drops(samples, "file") == {"write_error": EVENTS - delivered}
        stop_and_account(process)
    assert not aside.exists()
    assert sorted(p.name for p in directory.iterdir()) == ["events.jsonl", "events.jsonl.lock"]
    events = read_jsonl(target)
    assert set(range(back_at + 1, EVENTS)) <= {event_index(e) for e in events}
    assert_lines_are_the_deliveries([target], delivered, workdir / "ed25519.key")


@needs_mount
def test_directory_shadowed_by_read_only_file_system(workdir: Path) -> None:
    """A read-only mount over the directory gives write_error drops; unmounted, it resumes."""
    directory = workdir / "out"
    target = directory / "events.jsonl"
    config = config_file(workdir, file_lineage(target, rotation_size_mb=0))
    with memory_agent(config, EVENTS, RATE) as process:
        wait_produced(process, EVENTS // 4)
        with tmpfs(directory, "64k", "ro"):
            wait_until("write errors", lambda: "write_error" in drops(process.scrape(), "file"))
            wait_produced(process, EVENTS // 2)
            assert os.listdir(directory) == []
        back_at = wait_produced(process, 0)
        samples = settle(process, "file", EVENTS)
        assert_healthy(process)
        delivered = metric(samples, "lineage_events_delivered_total", transport="file")
        assert drops(samples, "file") == {"write_error": EVENTS - delivered}
        stop_and_account(process)
    failing = process.wait_log("transport_failing", transport="file")
    assert failing["detail"] == f"cannot open {target}: Read-only file system"
    events = read_jsonl(target)
    assert set(range(back_at + 1, EVENTS)) <= {event_index(e) for e in events}
    assert_lines_are_the_deliveries([target], delivered, workdir / "ed25519.key")


def test_rotation_races_with_external_mv(workdir: Path) -> None:
    """An external mv racing the agent's rotation loses, repeats and tears no event."""
    target = workdir / "out" / "events.jsonl"
    config = config_file(workdir, file_lineage(target, rotation_size_mb=0.05))
    stop = threading.Event()
    moved = [0]

    def rotator() -> None:
        while not stop.wait(0.003):
            try:
                target.rename(target.with_name(f"events.jsonl.moved-{moved[0]}"))
                moved[0] += 1
            except FileNotFoundError:
                pass

    with memory_agent(config, EVENTS, 600.0) as process:
        thread = threading.Thread(target=rotator, name="external-mv")
        thread.start()
        try:
            samples = settle(process, "file", EVENTS)
        finally:
            stop.set()
            thread.join()
        # The last mv may have come after the last write: then the path names no file the
        # agent writes, which /healthz says until the next batch opens a new one.
        body = healthz(process)
        assert process.proc.poll() is None
        assert body["problems"] in ([], [f"{target} removed"]), body
        assert body["status"] == ("degraded" if body["problems"] else "ok"), body
        assert drops(samples, "file") == {}
        stop_and_account(process)
    files = outputs(target)
    assert moved[0] > 10  # the agent's own rotations race with these (as often as it wins)
    assert_lines_are_the_deliveries(files, EVENTS, workdir / "ed25519.key")


def test_torn_last_line_of_a_killed_writer_is_cut(workdir: Path) -> None:
    """A torn last line left by a killed writer is cut before the next agent appends."""
    target = workdir / "events.jsonl"
    config = config_file(workdir, file_lineage(target, rotation_size_mb=0))
    with memory_agent(config, 10) as process:
        settle(process, "file", 10)
        stop_and_account(process)
    whole = target.read_bytes()
    lines = whole.splitlines(keepends=True)
    torn = lines[-1][: len(lines[-1]) // 2]
    target.write_bytes(b"".join(lines[:-1]) + torn)
    with memory_agent(config, 10) as process:
        settle(process, "file", 10)
        assert_healthy(process)
        stop_and_account(process)
    cut = process.wait_log("file_torn_line_cut")
    assert (cut["path"], cut["bytes"]) == (str(target), len(torn))
    events = read_jsonl(target)  # every line parses
    assert len(events) == 9 + 10
    check_events(events, workdir / "ed25519.key")
