"""The codec the agent logs for a rolling log found before its first event file: `pending`,
then the real one (zstd from Spark 4), never `none`."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.spark_logs import SparkLogs
from tests.test_watcher import run_until, source_for

pytestmark = pytest.mark.spark


async def test_rolling_zstd_log_found_early_logs_its_codec(
    spark_logs: SparkLogs, tmp_path: Path
) -> None:
    """A real Spark 4 rolling zstd log whose directory holds only its appstatus file when the
    agent finds it is followed with codec `pending`; once its events_N.zstd file appears the
    agent logs `eventlog_codec` zstd, and reads it."""
    [real] = [p for p in spark_logs.directory("rolling", "zstd").iterdir() if p.is_dir()]
    events_dir = tmp_path / "spark-events"
    early = events_dir / real.name
    early.mkdir(parents=True)
    statuses = [p for p in real.iterdir() if p.name.startswith("appstatus_")]
    event_files = [p for p in real.iterdir() if p.name.startswith("events_")]
    assert statuses and event_files and all(p.suffix == ".zstd" for p in event_files)
    names = [status.name.removesuffix(".inprogress") for status in statuses]
    for name in names:  # the in-progress name, as while Spark runs
        (early / f"{name}.inprogress").touch()
    source, _ = source_for([events_dir], tmp_path / "state")

    async def arrive() -> None:
        while not source.apps:
            await asyncio.sleep(0.05)
        for file in event_files:
            shutil.copy(file, early / file.name)
        for name in names:
            (early / f"{name}.inprogress").rename(early / name)

    def ended(emitted: list[tuple[str, dict[str, object]]]) -> bool:
        return any(event["eventType"] in ("COMPLETE", "FAIL") for _, event in emitted)

    with capture_logs() as logs:
        copier = asyncio.create_task(arrive())
        emitted = await run_until(source, ended)
        await copier
    followed = [line for line in logs if line["event"] == "eventlog_followed"]
    assert [(f["layout"], f["codec"]) for f in followed] == [("rolling", "pending")]
    codecs = [line["codec"] for line in logs if line["event"] == "eventlog_codec"]
    assert codecs == ["zstd"]
    assert emitted
