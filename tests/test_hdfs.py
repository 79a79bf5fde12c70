"""Event logs on HDFS: Spark writes to a mini HDFS cluster on loopback (Hadoop's own) while
the agent follows the directory through WebHDFS, in-progress logs included."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hdfs import Hdfs, running_hdfs
from tests.spark_logs import running_app
from tests.spark_scenarios import source_running
from tests.test_objstore import source_for

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hdfs]:
    with running_hdfs(tmp_path_factory.mktemp("hdfs")) as cluster:
        yield cluster


def application_events(emitted: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [e["eventType"] for _, e in emitted if "parent" not in e["run"]["facets"]]


async def test_spark_writes_to_hdfs_and_the_agent_follows_in_progress(
    hdfs: Hdfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An in-progress single-file log on HDFS is read as Spark flushes it (START while the
    application runs), then its end after the completion rename, nothing twice."""
    # Spark's log files are rw-rw----: the agent reads as their owner (simple authentication).
    monkeypatch.setenv("HADOOP_USER_NAME", "root")
    hdfs.mkdir("spark-logs")
    source, metrics = source_for(
        [hdfs.webhdfs("spark-logs")], tmp_path / "state", store_poll_interval=0.2
    )
    async with source_running(source) as emitted:
        with running_app(
            tmp_path / "app", "single", "none", event_url=hdfs.url("spark-logs")
        ) as app:
            async with asyncio.timeout(60):  # read while the application runs
                while application_events(emitted) != ["START"]:
                    await asyncio.sleep(0.05)
            await asyncio.to_thread(app.finish)
            async with asyncio.timeout(60):
                while application_events(emitted) != ["START", "COMPLETE"]:
                    await asyncio.sleep(0.05)
            app_id = app.app_id
    assert {ex for ex, _ in emitted} == {app_id}
    assert metrics.store_requests.labels(request="get")._value.get() >= 2
