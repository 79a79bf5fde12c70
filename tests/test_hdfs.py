"""Event logs on HDFS: Spark writes to a mini HDFS cluster on loopback (Hadoop's own) while
the agent follows the directory through WebHDFS, in-progress logs included. The NameNode
answers listings in pages of two names (`dfs.ls.limit`), so that a few files make pages."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.spark.eventlog import discovery, stores
from tests.hdfs import Hdfs, running_hdfs
from tests.spark_logs import running_app
from tests.spark_scenarios import source_running
from tests.test_objstore import source_for

pytestmark = pytest.mark.spark
PAGE = 2  # names per WebHDFS listing page


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hdfs]:
    work = tmp_path_factory.mktemp("hdfs")
    with running_hdfs(work, {"dfs.ls.limit": str(PAGE)}) as cluster:
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


def test_a_listing_is_paged_and_resumes_after_a_name(hdfs: Hdfs) -> None:
    """LISTSTATUS_BATCH a page at a time (one request each, made as it is asked for), in
    HDFS' order of names; from a resume point, the names after it only. The resume point
    follows that order: a decoy `eventlog_v2_<app>.x` sorts after the live rolling directory
    `eventlog_v2_<app>` on HDFS (before it on an object store), so it cannot carry the point
    past that directory."""
    hdfs.mkdir("paged")
    names = [f"local-17954951691{n:02d}" for n in range(5)]
    for name in names:
        hdfs.put(f"paged/{name}", b"{}\n")
    url = hdfs.webhdfs("paged")
    before = stores.requests()["list"]
    pages = []
    for page in stores.pages(url):
        pages.append([entry.name for entry in page])
        assert stores.requests()["list"] - before == len(pages)
    assert pages == [names[:2], names[2:4], names[4:]]
    before = stores.requests()["list"]
    assert [e.name for p in stores.pages(url, names[2]) for e in p] == names[3:]
    assert stores.requests()["list"] - before == 1

    live = "eventlog_v2_local-1795495169200"
    hdfs.put(f"rolling/{live}/appstatus_local-1795495169200.inprogress", b"")
    hdfs.put(f"rolling/{live}/events_1_local-1795495169200", b"{}\n")
    hdfs.put(f"rolling/{live}.x", b"a decoy")
    listed = discovery.listing(hdfs.webhdfs("rolling"))
    assert [ref.key for ref in listed.refs] == ["local-1795495169200"]
    assert listed.settled == ""  # the live directory comes first: nothing is decided before it
