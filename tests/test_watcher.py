"""The Spark source over real event logs: every layout and codec, restarts, live logs,
missing directories and corrupt lines."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from agent.config.model import SparkConfig
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.olschema import validate_run_event
from tests.spark_logs import CODECS, LAYOUTS, SparkLogs, running_app
from tests.spark_scenarios import source_running

pytestmark = pytest.mark.spark

Emitted = list[tuple[str, dict[str, Any]]]


def source_for(dirs: list[Path], state_dir: Path, **spark: Any) -> tuple[SparkSource, Metrics]:
    metrics = Metrics(CollectorRegistry())
    config = SparkConfig(
        event_log_dirs=tuple(str(d) for d in dirs), poll_interval=0.1, replay_horizon=0, **spark
    )
    return SparkSource(config, "spark", StateDB(state_dir), metrics), metrics


async def run_until(
    source: SparkSource, done: Callable[[Emitted], bool], seconds: float = 30
) -> Emitted:
    """Run the source until `done(emitted)` holds (or the timeout), then stop it."""
    async with source_running(source) as emitted:
        async with asyncio.timeout(seconds):
            while not done(emitted):
                await asyncio.sleep(0.05)
    return emitted


def settled(source: SparkSource) -> Callable[[Emitted], bool]:
    """Every log found was read to its end."""
    return lambda _: not source._first_scan and not source.apps


def summary(emitted: Emitted) -> list[tuple[str, str, list[str], list[str]]]:
    return [
        (
            e["eventType"],
            e["job"]["name"].split(".", 1)[-1],
            [o["name"].rsplit("/", 1)[-1] for o in e["outputs"]],
            [i["name"].rsplit("/", 1)[-1] for i in e["inputs"]],
        )
        for _, e in emitted
    ]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", CODECS)
async def test_every_layout_and_codec(
    spark_logs: SparkLogs, tmp_path: Path, layout: str, codec: str
) -> None:
    """Each real log yields the application run and both SQL runs, in order, schema-valid."""
    source, metrics = source_for([spark_logs.directory(layout, codec)], tmp_path)
    emitted = await run_until(source, settled(source))
    app = f"eventlogs_{layout}_{codec}"
    write = f"execute_insert_into_hadoop_fs_relation_command.{layout}-{codec}"
    assert summary(emitted) == [
        ("START", app, [], []),
        ("START", f"{write}_numbers", ["numbers"], []),
        ("COMPLETE", f"{write}_numbers", ["numbers"], []),
        ("START", f"{write}_counts", ["counts"], ["numbers"]),
        ("COMPLETE", f"{write}_counts", ["counts"], ["numbers"]),
        ("COMPLETE", app, [], []),
    ]
    assert {ex for ex, _ in emitted} == {spark_logs.app_ids[f"{layout}-{codec}"]}
    for _, event in emitted:
        validate_run_event(event)
    assert (metrics.registry.get_sample_value("lineage_eventlog_read_bytes_total") or 0) > 0


async def test_restart_emits_nothing_twice(spark_logs: SparkLogs, tmp_path: Path) -> None:
    """A second agent on the same state emits nothing; a half-done one only the rest."""
    directory = tmp_path / "logs"
    shutil.copytree(spark_logs.directory("rolling", "zstd"), directory)
    source, _ = source_for([directory], tmp_path / "state")
    first = await run_until(source, settled(source))
    assert len(first) == 6
    source, _ = source_for([directory], tmp_path / "state")
    assert await run_until(source, settled(source), seconds=5) == []

    # A crash after the first three events were claimed: the rest comes, nothing repeats.
    half = tmp_path / "half"
    db = StateDB(half)
    db.claim(str(directory) + "/" + source_key(directory), [e for _, e in first[:3]])
    db.close()
    source, _ = source_for([directory], half)
    rest = await run_until(source, settled(source))
    assert [e for _, e in rest] == [e for _, e in first[3:]]


def source_key(directory: Path) -> str:
    [entry] = [p.name for p in directory.iterdir() if not p.name.startswith(".")]
    return entry.removeprefix("eventlog_v2_").split(".")[0]


async def test_replay_is_byte_identical(spark_logs: SparkLogs, tmp_path: Path) -> None:
    """Two agents reading the same log produce byte-identical events."""
    runs = []
    for name in ("a", "b"):
        source, _ = source_for([spark_logs.multi], tmp_path / name)
        runs.append([orjson.dumps(e) for _, e in await run_until(source, settled(source))])
    assert runs[0] and runs[0] == runs[1]


async def test_missing_directory_is_waited_for(spark_logs: SparkLogs, tmp_path: Path) -> None:
    """A directory missing at start is not fatal; its logs are read once it appears."""
    directory = tmp_path / "later"
    source, _ = source_for([directory], tmp_path / "state")

    async def create_later() -> None:
        await asyncio.sleep(0.5)
        shutil.copytree(spark_logs.directory("single", "zstd"), directory)

    creator = asyncio.create_task(create_later())
    emitted = await run_until(source, lambda e: len(e) == 6)
    await creator
    assert [e["eventType"] for _, e in emitted][-1] == "COMPLETE"


async def test_corrupt_line_counted_and_skipped(spark_logs: SparkLogs, tmp_path: Path) -> None:
    """A corrupt JSON line is counted and skipped; everything else still comes out."""
    directory = tmp_path / "logs"
    directory.mkdir()
    [log] = [p for p in spark_logs.directory("single", "none").iterdir()]
    lines = log.read_bytes().split(b"\n")
    job_start = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line)
    lines.insert(job_start, b'{"Event":"SparkListenerJobStart","Job ID":' + b"\xff" * 10)
    (directory / log.name).write_bytes(b"\n".join(lines))
    source, metrics = source_for([directory], tmp_path / "state")
    emitted = await run_until(source, settled(source))
    assert len(emitted) == 6
    assert (
        metrics.registry.get_sample_value(
            "lineage_eventlog_lines_skipped_total", {"reason": "corrupt_json"}
        )
        == 1
    )
    assert source.health.get(emitted[0][0]).dropped == {"corrupt_json": 1}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_live_application_is_followed(tmp_path: Path, layout: str) -> None:
    """The application's START arrives while it runs; its end arrives after it stops."""
    with running_app(tmp_path / "app", layout, "zstd") as app:
        source, _ = source_for([app.event_dir], tmp_path / "state")
        async with source_running(source) as emitted:
            async with asyncio.timeout(60):
                while not emitted:
                    await asyncio.sleep(0.05)
            assert [e["eventType"] for _, e in emitted] == ["START"]
            assert emitted[0][0] == app.app_id
            await asyncio.to_thread(app.finish)
            async with asyncio.timeout(60):
                while emitted[-1][1]["eventType"] == "START":
                    await asyncio.sleep(0.05)
    assert [e["eventType"] for _, e in emitted] == ["START", "COMPLETE"]


async def test_old_completed_logs_skipped_by_horizon(spark_logs: SparkLogs, tmp_path: Path) -> None:
    """At first start a completed log older than the horizon is not replayed; a newer one is,
    and with the horizon at 0 every log is."""
    directory = tmp_path / "logs"
    shutil.copytree(spark_logs.directory("single", "zstd"), directory / "old")
    shutil.copytree(spark_logs.directory("single", "none"), directory / "new")
    [old] = list((directory / "old").iterdir())
    two_days_ago = old.stat().st_mtime - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    dirs = [directory / "old", directory / "new"]

    metrics = Metrics(CollectorRegistry())
    config = SparkConfig(
        event_log_dirs=tuple(str(d) for d in dirs), poll_interval=0.1, replay_horizon=86400
    )
    source = SparkSource(config, "spark", StateDB(tmp_path / "state"), metrics)
    emitted = await run_until(source, settled(source))
    assert {e["job"]["name"] for _, e in emitted if e["job"]["name"].count(".") == 0} == {
        "eventlogs_single_none"
    }
    # The skip is remembered: a restart with the same state does not replay it either.
    source, _ = source_for(dirs, tmp_path / "state")
    assert await run_until(source, settled(source), seconds=5) == []
    # A fresh agent with the horizon off replays both.
    source, _ = source_for(dirs, tmp_path / "fresh")
    names = {e["job"]["name"] for _, e in await run_until(source, settled(source))}
    assert {"eventlogs_single_none", "eventlogs_single_zstd"} <= names
