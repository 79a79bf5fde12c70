"""A store that drips its LIST answers (one byte a second, through a loopback proxy in front
of moto) holds its own directory only: a log moved into a local followed directory meanwhile
has its events out, the same as a replay of it; each request has a whole deadline, after
which `status` (the source's `stores()`), the metrics and /healthz name the stalled store and
since when, until it answers again. A listing holds a page at a time: a prefix of many
objects costs next to nothing more than a few, and the real daemon over a listing that never
ends (`tests.endless_store`) keeps a flat resident set."""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import time
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

from agent.config.loader import parse_config
from agent.config.model import SparkConfig
from agent.service.control.client import request
from agent.service.preflight import check_startup
from agent.spark.eventlog import discovery
from agent.spark.eventlog.storage import calls, listings
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.agentproc import keygen, write_config
from tests.bench.harness import agent_process, rss_mib, wait_until
from tests.dripstore import DripStore
from tests.endless_store import running_endless
from tests.s3server import environment, running_s3
from tests.samples import sample_bytes
from tests.spark_scenarios import read_all, source_running

BUCKET = "drip-logs"  # its own bucket: the agent keeps one client per bucket
APP = "local-1795495169157"
#: Taken by moto as any others are, and distinct enough to be found in any output.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIADRIPSTORE7Q2X",
    "AWS_SECRET_ACCESS_KEY": "dr1p-s3cr3t-v9Lq",
}
ENDLESS_ENV = {**CREDENTIALS, "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def drip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DripStore]:
    """moto on loopback behind the drip proxy; the AWS variables point at the proxy."""
    with running_s3(BUCKET, log=tmp_path_factory.mktemp("s3") / "moto.log") as s3:
        s3.client().put_object(Bucket=BUCKET, Key="logs/", Body=b"")
        with (
            DripStore(s3, interval=1.0) as proxy,
            environment({**s3.env, **CREDENTIALS, "AWS_ENDPOINT_URL": proxy.url}),
        ):
            yield proxy


def source_for(local: Path, state: Path, **spark: Any) -> tuple[SparkSource, Metrics]:
    metrics = Metrics(CollectorRegistry())
    config = SparkConfig(
        event_log_dirs=(str(local), f"s3a://{BUCKET}/logs"),
        poll_interval=0.1,
        store_poll_interval=0.1,
        replay_horizon=0,
        **spark,
    )
    return SparkSource(config, "spark", StateDB(state), metrics), metrics


def move_in(log: bytes, directory: Path, staging: Path) -> None:
    """The log written elsewhere, then renamed into the followed directory."""
    staging.mkdir(exist_ok=True)
    (staging / APP).write_bytes(log)
    os.rename(staging / APP, directory / APP)


async def test_local_events_out_while_a_store_listing_drips(
    drip: DripStore, tmp_path: Path
) -> None:
    """With a LIST answer dripping (and a deadline far away), a local log moved in has all
    its events out before that LIST answered: the store holds its own task only."""
    local = tmp_path / "local"
    local.mkdir()
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / APP).write_bytes(sample_bytes("success"))
    expected = await read_all(reference, tmp_path / "reference-state")
    assert expected
    source, _ = source_for(local, tmp_path / "state", store_request_timeout=600)
    drip.dripping.set()
    answered = drip.lists_answered
    try:
        async with source_running(source) as emitted:
            async with asyncio.timeout(30):
                while drip.lists_started == 0:
                    await asyncio.sleep(0.05)
            move_in(sample_bytes("success"), local, tmp_path / "staging")
            async with asyncio.timeout(30):
                while len(emitted) < len(expected):
                    await asyncio.sleep(0.05)
            assert drip.lists_answered == answered  # the LIST still drips
            [store] = source.stores()
            assert store.last_listing is None and store.last_error is None
            drip.dripping.clear()
            async with asyncio.timeout(30):  # the store is listed once it answers
                while source.stores()[0].last_listing is None:
                    await asyncio.sleep(0.05)
    finally:
        drip.dripping.clear()
    assert [orjson.dumps(e) for _, e in emitted] == [orjson.dumps(e) for _, e in expected]


async def test_a_stalled_store_is_named_until_it_answers(drip: DripStore, tmp_path: Path) -> None:
    """A LIST that has not answered whole within store_request_timeout is given up; the
    store is then named with its error and since when, counted and shown down, and shown up
    again with its last good listing once it answers."""
    local = tmp_path / "local"
    local.mkdir()
    source, metrics = source_for(local, tmp_path / "state", store_request_timeout=2)
    label = f"s3a://{BUCKET}/logs"
    drip.dripping.set()
    try:
        async with source_running(source):
            async with asyncio.timeout(60):
                while source.stores()[0].last_error is None:
                    await asyncio.sleep(0.05)
            [stalled] = source.stores()
            assert stalled.directory == label and stalled.last_listing is None
            assert "no whole answer within 2 s" in (stalled.last_error or "")
            assert stalled.error_since is not None
            assert label in (stalled.problem() or "")
            assert metrics.store_up.labels(store=label)._value.get() == 0
            assert metrics.store_failures.labels(store=label)._value.get() >= 1
            drip.dripping.clear()
            async with asyncio.timeout(60):
                while source.stores()[0].last_error is not None:
                    await asyncio.sleep(0.05)
            [recovered] = source.stores()
            assert recovered.last_listing is not None and recovered.problem() is None
            assert metrics.store_up.labels(store=label)._value.get() == 1
    finally:
        drip.dripping.clear()


def test_the_daemon_names_a_stalled_store(drip: DripStore, tmp_path: Path) -> None:
    """The real daemon: with its store dripping, /healthz says degraded and names the store,
    `status` shows its error and since when, and no credential is in its output; once the
    store answers, /healthz is ok again and `status` shows its last good listing."""
    local = tmp_path / "local"
    local.mkdir()
    keygen(tmp_path)
    config = write_config(
        tmp_path,
        {"transport": "file", "file": {"path": str(tmp_path / "events.jsonl")}},
        spark={
            "event_log_dirs": [str(local), f"s3a://{BUCKET}/logs"],
            "store_poll_interval": "0.5s",
            "store_request_timeout": "2s",
        },
    )
    socket_path = str(tmp_path / "control.sock")
    drip.dripping.set()
    try:
        with agent_process(config) as agent:
            assert agent.metrics_url is not None
            healthz = agent.metrics_url.replace("/metrics", "/healthz")

            def stalled() -> bool:
                body = httpx.get(healthz, timeout=5).json()
                return body["status"] == "degraded" and any(
                    f"s3a://{BUCKET}/logs" in p for p in body["problems"]
                )

            wait_until(stalled, 60, "/healthz naming the stalled store")
            [store] = request(socket_path, {"command": "status"}, timeout=10)["stores"]
            assert store["directory"] == f"s3a://{BUCKET}/logs"
            assert "no whole answer within 2 s" in store["last_error"]
            assert store["error_since"] is not None and store["last_listing"] is None
            drip.dripping.clear()
            wait_until(
                lambda: httpx.get(healthz, timeout=5).json()["status"] == "ok",
                60,
                "/healthz ok once the store answers",
            )
            [store] = request(socket_path, {"command": "status"}, timeout=10)["stores"]
            assert store["last_error"] is None and store["last_listing"] is not None
            agent.stop()
            output = agent.raw_output()
    finally:
        drip.dripping.clear()
    assert not any(secret in output for secret in CREDENTIALS.values())


def listed_peak(url: str) -> int:
    """The peak of Python memory allocated while one listing of `url` is scanned."""
    tracemalloc.start()
    try:
        discovery.listing(url, since_ns=time.time_ns())
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_listing_holds_a_page_not_the_prefix(
    drip: DripStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scanning a prefix of many objects past the horizon holds a page of them at a time:
    four times the objects cost next to no more memory (under 100 bytes per object more;
    the whole listing held cost about 460). Pages of 100 names, so that a few thousand
    objects make many pages (the benchmark lists a million in pages of 1,000)."""
    monkeypatch.setattr(listings, "LIST_PAGE", 100)
    monkeypatch.setattr(calls, "_deadline", calls.REQUEST_DEADLINE)  # not another test's
    client = drip.upstream.client()
    bucket = "many-logs"  # listed straight from moto: the proxy's memory is not the agent's
    client.create_bucket(Bucket=bucket)

    def put(key: str) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=b"")

    counts = {"small": 300, "large": 1300}
    with ThreadPoolExecutor(16) as pool:
        for prefix, count in counts.items():
            names = (f"many-{prefix}/app-20261127000000-{n:05d}" for n in range(count))
            list(pool.map(put, names))
    with environment({"AWS_ENDPOINT_URL": drip.upstream.endpoint}):
        for prefix in counts:  # the client made, and each listing's paths taken, once
            listed_peak(f"s3a://{bucket}/many-{prefix}")
        small = listed_peak(f"s3a://{bucket}/many-small")
        large = listed_peak(f"s3a://{bucket}/many-large")
    per_object = (large - small) / (counts["large"] - counts["small"])
    assert per_object < 100, (small, large)


def test_rolling_directories_past_the_horizon_pass_by_as_their_page_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A prefix of rolling logs' directories only (a bucket whose applications all roll),
    every one last written in 2020: their files come in the listing of the prefix, so none
    is listed by a request of its own, and each is passed over as its page goes by: four
    times the directories cost next to no more memory (under 100 bytes a directory more;
    listed one by one and held to the listing's end, they cost about 750). Pages of 100
    names, as above."""
    monkeypatch.setattr(listings, "LIST_PAGE", 100)
    monkeypatch.setattr(calls, "_deadline", calls.REQUEST_DEADLINE)
    peaks = {}
    for run, pages in enumerate((2, 2, 8)):  # the first makes the client, takes the paths once
        with (
            running_endless(pages=pages, rolling=True) as store,
            # A bucket of its own per store: the agent keeps one client per bucket.
            environment({**ENDLESS_ENV, "AWS_ENDPOINT_URL": store.endpoint}),
        ):
            peaks[pages] = listed_peak(f"s3a://rolling-{run}/logs")
        assert store.directories_listed == 0 and store.served == pages
    per_directory = (peaks[8] - peaks[2]) / 600
    assert per_directory < 100, peaks


def test_config_check_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store URL whose library is not installed: config check names the package and the
    exact extra that brings it. (The library is hidden from the import system, since this
    machine has it installed for the other tests.)"""
    monkeypatch.setitem(sys.modules, "s3fs", None)  # `import s3fs` now raises ImportError
    # ... and fsspec forgets the class it imported for other tests, so it imports it again.
    monkeypatch.delitem(importlib.import_module("fsspec.registry")._registry, "s3", False)
    text = (
        f"lineage: {{transport: file, file: {{path: {tmp_path / 'events.jsonl'}}}}}\n"
        f"signing: {{key_path: {tmp_path / 'key'}}}\n"
        f"state_dir: {tmp_path / 'state'}\n"
        "spark: {event_log_dirs: ['s3://no-library-bucket/logs']}\n"
    )
    checked = check_startup(parse_config(text, "c.yaml"), service=False)
    [note] = [n for n in checked.notes if n.startswith("spark.")]
    assert "needs the s3fs package: install the agent's [s3] extra" in note, note
    assert "pip install 'edge-lineage-agent[s3]'" in note, note


#: LIST pages of an endless listing before the daemon's resident set is first read (its
#: client made, botocore's model loaded), and between that reading and the second.
WARM_PAGES = 20
MEASURED_PAGES = 120  # 120,000 objects: held whole, about 1 KB each, they would cost 120 MB
GROWTH_MIB = 16  # at most, over those pages (the bound: 64 MB over 120 s of pages)


def test_an_endless_listing_leaves_the_daemon_flat(tmp_path: Path) -> None:
    """The real daemon following a prefix that lists without end (`tests.endless_store`:
    old logs, decoys, keys of 1,024 bytes): its resident set (VmRSS) grows by at most 16 MiB
    (0.2 measured) between the first pages and 120,000 objects later. Once the listing ends,
    `status` shows the store listed, with no error and no application."""
    keygen(tmp_path)
    with (
        running_endless(pages=WARM_PAGES + MEASURED_PAGES + 1) as store,
        environment({**ENDLESS_ENV, "AWS_ENDPOINT_URL": store.endpoint}),
    ):
        config = write_config(
            tmp_path,
            {"transport": "file", "file": {"path": str(tmp_path / "events.jsonl")}},
            spark={"event_log_dirs": ["s3a://endless/logs"], "store_poll_interval": "1s"},
        )
        with agent_process(config) as agent:
            store.wait_served(WARM_PAGES, 60)
            before = rss_mib(agent.proc.pid)
            store.wait_served(WARM_PAGES + MEASURED_PAGES, 300)
            after = rss_mib(agent.proc.pid)

            def listed() -> dict[str, Any] | None:
                status = request(str(tmp_path / "control.sock"), {"command": "status"}, 10)
                [listing] = status["stores"]
                return listing if listing["last_listing"] is not None else None

            listing = wait_until(listed, 60, "the end of the listing in status")
            agent.stop()
    assert after - before <= GROWTH_MIB, f"VmRSS {before:.1f} MiB, then {after:.1f} MiB"
    assert listing["last_error"] is None and listing["applications"] == 0, listing
    assert store.requests == [], store.requests  # LIST requests only
