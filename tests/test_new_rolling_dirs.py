"""A rolling log's directory appears empty and gets its first file a moment later (Spark 4
writes rolling logs by default): the listing between the two finds no application, so the
directory's first file must ask for a rescan, not wait for the periodic one. Real inotify,
real directories, the sample log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent.config.model import SparkConfig
from agent.spark.eventlog.inotify import DirectoryWatch
from agent.spark.follow import source as source_module
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.samples import sample_bytes
from tests.spark_scenarios import source_running

APP = "local-1795495169157"


async def rescan_after(
    watch: DirectoryWatch, wake: asyncio.Event, change: Callable[[], Any]
) -> bool:
    """Whether `change` made the watch ask for a rescan (waits for its wake-up)."""
    wake.clear()
    watch.rescan = False
    change()
    await asyncio.wait_for(wake.wait(), 30)
    await asyncio.sleep(0)  # the events of one change may come in two reads
    return watch.rescan


async def test_a_new_rolling_directory_s_first_files_ask_for_a_rescan(tmp_path: Path) -> None:
    """The directory's creation and its appstatus file each ask for a rescan; once the
    source follows it, its event files only wake; a directory named unlike a log is not
    watched at all."""
    wake = asyncio.Event()
    watch = DirectoryWatch({str(tmp_path)}, wake)
    loop = asyncio.get_running_loop()
    watch.start(loop, 0.1)
    assert watch.available
    watch.watch(str(tmp_path))
    rolling = tmp_path / f"eventlog_v2_{APP}"
    try:
        assert await rescan_after(watch, wake, rolling.mkdir)
        status = rolling / f"appstatus_{APP}.inprogress"
        assert await rescan_after(watch, wake, status.touch)
        watch.watch(str(rolling))  # followed now
        events = rolling / f"events_1_{APP}"
        assert not await rescan_after(watch, wake, events.touch)
        other = tmp_path / "backups"
        assert await rescan_after(watch, wake, other.mkdir)
        # Nothing in `backups/` is watched: only the followed log's write wakes the watch.

        def decoy_then_log() -> None:
            (other / "x").touch()
            events.write_bytes(b"{}\n")

        assert not await rescan_after(watch, wake, decoy_then_log)
    finally:
        watch.stop(loop)


async def test_a_rolling_log_listed_while_empty_is_followed_without_the_periodic_rescan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the periodic rescan an hour away, a log whose directory was listed empty is still
    followed as soon as Spark writes into it, and all its runs end."""
    monkeypatch.setattr(source_module, "RESCAN_EVERY", 3600.0)
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    config = SparkConfig(event_log_dirs=(str(events_dir),), poll_interval=0.05, replay_horizon=0)
    source = SparkSource(config, "spark", StateDB(tmp_path / "state"), Metrics(CollectorRegistry()))
    listings = 0
    discover = source._discover

    async def counted(listed: Any, *, first: bool) -> None:
        nonlocal listings
        listings += 1
        await discover(listed, first=first)

    monkeypatch.setattr(source, "_discover", counted)
    async with source_running(source) as emitted:
        async with asyncio.timeout(60):
            while listings < 1:
                await asyncio.sleep(0.02)
            rolling = events_dir / f"eventlog_v2_{APP}"
            rolling.mkdir()
            while listings < 2:  # the listing that finds the directory empty
                await asyncio.sleep(0.02)
            assert not source.apps
            # As Spark writes it: the appstatus file, the events, the completion rename.
            status = rolling / f"appstatus_{APP}.inprogress"
            status.touch()
            (rolling / f"events_1_{APP}").write_bytes(sample_bytes("success"))
            status.rename(rolling / f"appstatus_{APP}")
            while not any(e["eventType"] == "COMPLETE" for _, e in emitted):
                await asyncio.sleep(0.05)
    assert {e["run"]["runId"] for _, e in emitted if e["eventType"] == "START"} == {
        e["run"]["runId"] for _, e in emitted if e["eventType"] in ("COMPLETE", "FAIL")
    }
