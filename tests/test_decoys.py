"""Only the names Spark writes make applications: decoy files beside a live log (an unknown
extension, a backup, an events file of a foreign codec, a directory named like the
application, a symlink loop) leave every run of the application with its START and terminal
event, the same as a replay of the final log, also when the agent (re)starts with the decoys
already there; and no file name makes discovery raise."""

from __future__ import annotations

import asyncio
import json
import os
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from agent.config.model import SparkConfig
from agent.spark.eventlog import layout, names
from agent.spark.eventlog.discovery import listing
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.reliability.harness import assert_runs_whole, reference_events, run_shapes
from tests.samples import sample_bytes

SUCCESS = sample_bytes("success")
APP = "local-1795495169157"
PIECES = 6
Step = Callable[[Path, int], None]


def plant_decoys(directory: Path) -> None:
    """The issue's decoys of APP, as an attacker who may write into the directory leaves them."""
    (directory / f"{APP}.x").write_bytes(b"not a log")
    (directory / f"{APP}.zip").write_bytes(b"PK\x03\x04")
    (directory / f"{APP}.inprogress.bak").write_bytes(SUCCESS[:100])
    rolling = directory / f"eventlog_v2_{APP}"
    rolling.mkdir()
    (rolling / f"events_1_{APP}.gz").write_bytes(b"\x1f\x8b junk")
    (directory / f"{APP}.zstd").mkdir()  # named like a log; `<APP>/` would block the rename
    (directory / f"{APP}.zstd" / "junk").write_bytes(b"junk")
    os.symlink(f"{APP}.lz4", directory / f"{APP}.lz4")  # a loop: it points at itself


def write_in_pieces(directory: Path, piece: int) -> None:
    """Piece `piece` of the log, at line boundaries; the completion rename after the last."""
    lines = SUCCESS.splitlines(keepends=True)
    bounds = [len(lines) * i // PIECES for i in range(PIECES + 1)]
    growing = directory / f"{APP}.inprogress"
    with growing.open("ab") as out:
        out.write(b"".join(lines[bounds[piece] : bounds[piece + 1]]))
    if piece == PIECES - 1:
        growing.rename(directory / APP)


def follow(directory: Path, first: int = 0) -> tuple[list[dict[str, Any]], Metrics]:
    """Run the Spark source on `directory` while the log is written from piece `first` on, a
    pass between pieces, until the log is read to its end; the events it made."""
    metrics = Metrics(CollectorRegistry())

    async def run(state_dir: Path) -> list[dict[str, Any]]:
        config = SparkConfig(event_log_dirs=(str(directory),), poll_interval=0.05, replay_horizon=0)
        source = SparkSource(config, "spark", StateDB(state_dir), metrics, use_inotify=False)
        emitted: list[dict[str, Any]] = []
        stop = asyncio.Event()
        task = asyncio.create_task(
            source.run(lambda _ex, ev, _fence=None: emitted.append(dict(ev)), stop)
        )
        try:
            async with asyncio.timeout(60):
                for piece in range(first, PIECES):
                    await asyncio.sleep(0.3)
                    write_in_pieces(directory, piece)
                while not (directory / APP).exists() or source._first_scan or source.apps:
                    await asyncio.sleep(0.02)
        finally:
            stop.set()
            await task
            source.state.close()
        return [json.loads(json.dumps(event)) for event in emitted]

    with tempfile.TemporaryDirectory(prefix="decoys-state-") as state_dir:
        return asyncio.run(run(Path(state_dir))), metrics


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The events of a replay of the final log, alone in its directory."""
    clean = tmp_path_factory.mktemp("clean")
    (clean / APP).write_bytes(SUCCESS)
    return reference_events(clean)


def test_decoys_before_the_log_change_nothing(
    tmp_path: Path, replayed: list[dict[str, Any]]
) -> None:
    """Decoys present before the application's log: the log, written in pieces and renamed
    at completion, gives the same events as a replay of the final log; each decoy is
    counted once."""
    plant_decoys(tmp_path)
    events, metrics = follow(tmp_path)
    assert events == replayed
    shapes = assert_runs_whole(events)
    assert all(
        kinds[0] == "START" and kinds[-1] in ("COMPLETE", "FAIL") for kinds in shapes.values()
    )
    assert metrics.registry.get_sample_value("lineage_eventlog_files_ignored_total") == 6


def test_decoys_at_a_restart_change_nothing(tmp_path: Path, replayed: list[dict[str, Any]]) -> None:
    """The agent starts (as after a restart) with half the log beside its decoys: it is one
    application, read to its end, the same runs as a replay of the final log."""
    plant_decoys(tmp_path)
    for piece in range(PIECES // 2):
        write_in_pieces(tmp_path, piece)
    events, _ = follow(tmp_path, first=PIECES // 2)
    assert run_shapes(events) == run_shapes(replayed)
    assert events == replayed


def test_a_listing_names_a_bounded_number_of_decoys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoys by the dozen at the top and inside a live rolling directory: a listing names
    the first MAX_LEFT_OUT of them in all (3 here), the rolling directory's own list no
    more, and the application is found as if they were not there."""
    monkeypatch.setattr(layout, "MAX_LEFT_OUT", 3)
    rolling = tmp_path / f"eventlog_v2_{APP}"
    rolling.mkdir()
    (rolling / f"appstatus_{APP}.inprogress").write_bytes(b"")
    (rolling / f"events_1_{APP}").write_bytes(SUCCESS)
    for n in range(12):
        (tmp_path / f"{APP}.x{n}").write_bytes(b"not a log")
        (rolling / f"events_{n}_{APP}.gz").write_bytes(b"not a log")
    listed = listing(tmp_path)
    [ref] = listed.refs
    assert ref.key == APP and ref.error is None and not ref.complete
    assert len(listed.ignored) == 3 and len(ref.ignored) <= 3


_NAME_CHARS = string.ascii_letters + string.digits + "._-~ %\x7f\u00e9\udc80"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(_NAME_CHARS, min_size=1, max_size=40),
            st.builds(
                lambda prefix, tail: prefix + tail,
                st.sampled_from(
                    [APP, f"{APP}.", "eventlog_v2_", f"events_1_{APP}", f"appstatus_{APP}"]
                ),
                st.text(_NAME_CHARS, max_size=20),
            ),
        ),
        max_size=8,
    )
)
def test_no_file_name_makes_discovery_raise(file_names: list[str]) -> None:
    """Whatever names a directory (or a rolling directory) holds, a scan lists without
    raising, and every application it finds has a name Spark gives."""
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        rolling = root / f"eventlog_v2_{APP}"
        rolling.mkdir()
        for name in file_names:
            if "/" in name or name in (".", ".."):
                continue
            for where in (root, rolling):
                try:
                    (where / name).write_bytes(b"")
                except (OSError, UnicodeEncodeError):
                    continue
        found = listing(root)
        assert all(names.is_log_name(ref.key) for ref in found.refs)
