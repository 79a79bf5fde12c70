"""The resume point of a directory on S3 (moto on loopback) and GCS (fake-gcs-server, which
pages and starts from a name as GCS does), with the agent's real SQLite state: the last name
of the longest prefix of the listing that is all decided, kept in the state. A restart lists
from it, a log appearing after it is followed, an undecided application stops it, and a log
appearing before it is found by the next listing from the start."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry

from agent.config.model import SparkConfig
from agent.spark.eventlog import discovery, stores
from agent.spark.eventlog.storage import listings
from agent.spark.follow import storewatch
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.emulators import EmulatedStore, running_gcs
from tests.s3server import S3Server, environment, running_s3
from tests.samples import sample_bytes
from tests.spark_scenarios import Event, read_all, source_running

BUCKET = "resume-logs"  # its own bucket: the agent keeps one client per bucket
#: Three finished applications, in the order S3 lists them.
DONE = ("local-1795495169101", "local-1795495169102", "local-1795495169103")
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with (
        running_s3(BUCKET, log=tmp_path_factory.mktemp("s3") / "moto.log") as server,
        environment(server.env),
    ):
        yield server


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedStore]:
    directory = tmp_path_factory.mktemp("gcs")
    with (
        running_gcs(directory, BUCKET, server="fake-gcs-server") as server,
        environment(server.env),
    ):
        yield server


@pytest.fixture(params=["s3", "gcs"])
def store(request: pytest.FixtureRequest) -> S3Server | EmulatedStore:
    """Each store whose listing starts after a name, in turn."""
    server: S3Server | EmulatedStore = request.getfixturevalue(request.param)
    return server


def source_for(url: str, state: Path) -> SparkSource:
    """A source following `url` alone, that looks again only when woken."""
    config = SparkConfig(
        event_log_dirs=(url,), poll_interval=0.1, store_poll_interval=3600, replay_horizon=0
    )
    return SparkSource(config, "spark", StateDB(state), Metrics(CollectorRegistry()))


@asynccontextmanager
async def following(
    url: str, state: Path
) -> AsyncIterator[tuple[SparkSource, list[tuple[str, Event]]]]:
    """The source running over `url`, once its first listing is made."""
    source = source_for(url, state)
    async with source_running(source) as emitted:
        async with asyncio.timeout(TIMEOUT):
            while source.stores()[0].last_listing is None:
                await asyncio.sleep(0.02)
        yield source, emitted


async def look(source: SparkSource) -> None:
    """One more listing of the store (and the reading that follows it), made now."""
    before = source.stores()[0].last_listing
    source.wake()
    async with asyncio.timeout(TIMEOUT):
        while source.stores()[0].last_listing == before:
            await asyncio.sleep(0.02)


async def until_finished(source: SparkSource, url: str, names: tuple[str, ...]) -> None:
    keys = {stores.child(url, name) for name in names}
    async with asyncio.timeout(TIMEOUT):
        while not keys <= source._finished:
            await look(source)


def put_rolling(s3: S3Server, prefix: str, key: str, parts: int) -> str:
    """A rolling log in progress under `prefix`: its appstatus and `parts` events files; its
    directory's name."""
    rolling = f"eventlog_v2_{key}"
    s3.put(f"{prefix}/{rolling}/appstatus_{key}.inprogress", b"")
    for part in range(1, parts + 1):
        s3.put(f"{prefix}/{rolling}/events_{part}_{key}", sample_bytes("success"))
    return rolling


async def replayed(name: str, sample: str, tmp_path: Path) -> list[bytes]:
    """The events of a local replay of the sample log `sample` named `name`."""
    local = tmp_path / f"replay-{name}"
    local.mkdir()
    (local / name).write_bytes(sample_bytes(sample))
    return [orjson.dumps(e) for _, e in await read_all(local, tmp_path / f"state-{name}")]


async def test_a_restart_lists_from_the_resume_point(
    store: S3Server | EmulatedStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three logs read to their end set the resume point after the last of them; a restart
    then lists with one LIST request from there (pages of two names: from the start it takes
    two) and reads nothing again; a log appearing after the point is followed, its events
    the same as a local replay's, and the point moves past it once it is finished."""
    monkeypatch.setattr(listings, "LIST_PAGE", 2)
    url = store.url("restart")
    for name, sample in zip(DONE, ("success", "sql_failure", "cancelled"), strict=True):
        store.put(f"restart/{name}", sample_bytes(sample))
    state = tmp_path / "state"
    async with following(url, state) as (source, _):
        await until_finished(source, url, DONE)
        await look(source)  # the listing after the last one finished
        assert source.state.resume_point(url) == DONE[-1]
    lists = stores.requests()["list"]
    async with following(url, state) as (source, emitted):
        assert stores.requests()["list"] - lists == 1
        assert not emitted and not source.apps
        new = "local-1795495169104"
        store.put(f"restart/{new}", sample_bytes("sigterm"))
        await until_finished(source, url, (new,))
        await look(source)
        assert source.state.resume_point(url) == new
    expected = await replayed(new, "sigterm", tmp_path)
    assert expected and [orjson.dumps(e) for _, e in emitted] == expected


async def test_a_log_before_the_resume_point_is_found_from_the_start(
    store: S3Server | EmulatedStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log whose name sorts before the resume point (another id scheme) is not in a
    listing made from the point; the next listing from the start follows it and moves the
    point back before it, until it is finished."""
    url = store.url("before")
    store.put(f"before/{DONE[0]}", sample_bytes("success"))
    state = tmp_path / "state"
    async with following(url, state) as (source, _):
        await until_finished(source, url, DONE[:1])
        await look(source)
        assert source.state.resume_point(url) == DONE[0]
    async with following(url, state) as (source, emitted):
        earlier = "app-20261129010000-0001"  # a standalone master's id: sorts before `local-`
        store.put(f"before/{earlier}", sample_bytes("sigterm"))
        await look(source)
        assert not emitted and stores.child(url, earlier) not in source.apps
        monkeypatch.setattr(storewatch, "FULL_LISTING_EVERY", 0.0)
        await look(source)
        assert source.state.resume_point(url) == ""  # the new log is not decided yet
        await until_finished(source, url, (earlier,))
        await look(source)
        assert source.state.resume_point(url) == DONE[0]
    assert [orjson.dumps(e) for _, e in emitted] == await replayed(earlier, "sigterm", tmp_path)


def test_an_undecided_application_ends_the_resume_point(s3: S3Server) -> None:
    """The point is the last name of the longest decided prefix, in the store's key order:
    a rolling directory not finished (which sorts before every `local-` log, however new)
    leaves none; a log in progress stops it; logs past the horizon count as decided."""
    url = s3.url("undecided")
    put_rolling(s3, "undecided", "local-1795495169100", parts=1)
    s3.put(f"undecided/{DONE[0]}", sample_bytes("success"))
    s3.put(f"undecided/{DONE[1]}.inprogress", sample_bytes("sigkill"))
    s3.put(f"undecided/{DONE[2]}", sample_bytes("cancelled"))
    s3.put("undecided/notes.txt", b"not a log")  # not Spark's: changes nothing
    finished = {"local-1795495169100", DONE[0], DONE[2]}
    assert discovery.listing(url, finished - {"local-1795495169100"}).settled == ""
    assert discovery.listing(url, finished).settled == DONE[0]
    assert discovery.listing(url, finished, start_after=DONE[0]).settled == DONE[0]
    future = 2**62  # every log last written before it: past the horizon
    assert discovery.listing(url, finished, since_ns=future).settled == "notes.txt"
    # The rolling directory's files come in the same listing, so its age is known too.
    assert discovery.listing(url, frozenset(), since_ns=future).settled == "notes.txt"


def test_rolling_directories_come_with_the_listing_of_their_directory(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One listing at every depth finds rolling and single-file logs as a local scan of the
    same tree does, in as many LIST requests as it has pages of objects, none per rolling
    directory; a directory Spark does not write, and one inside a rolling directory, are
    left out once each however many objects they hold."""
    monkeypatch.setattr(listings, "LIST_PAGE", 7)
    local = tmp_path / "tree"
    for n in range(12):
        key = f"local-17954951692{n:02d}"
        if n % 3:
            app = local / f"eventlog_v2_{key}"
            app.mkdir(parents=True)
            (app / f"appstatus_{key}{'' if n % 2 else '.inprogress'}").write_bytes(b"")
            for part in (1, 2):
                (app / f"events_{part}_{key}").write_bytes(sample_bytes("success"))
        else:
            local.mkdir(exist_ok=True)
            (local / key).write_bytes(sample_bytes("cancelled"))
    decoy = local / "checkpoints"
    (local / "eventlog_v2_local-1795495169201" / "nested").mkdir()
    for n in range(9):
        decoy.mkdir(exist_ok=True)
        (decoy / f"part-{n}").write_bytes(b"x")
        (local / "eventlog_v2_local-1795495169201" / "nested" / f"x{n}").write_bytes(b"x")
    objects = 0
    for path in sorted(local.rglob("*")):
        if path.is_file():
            s3.put(f"deep/{path.relative_to(local)}", path.read_bytes())
            objects += 1
    url = s3.url("deep")
    before = stores.requests()["list"]
    found = discovery.listing(url)
    assert stores.requests()["list"] - before == -(-objects // 7)
    expected = discovery.listing(local)
    shape = [(r.key, r.layout, r.complete, r.error, len(r.files)) for r in expected.refs]
    assert [(r.key, r.layout, r.complete, r.error, len(r.files)) for r in found.refs] == shape
    assert len(shape) == 12 and found.ignored == (
        stores.child(url, "checkpoints"),
        stores.child(url, "eventlog_v2_local-1795495169201/nested"),
    )


def test_a_listing_from_inside_a_rolling_directory_passes_it_by(s3: S3Server) -> None:
    """A resume point that is the last object of a rolling directory (decided when it was
    set) leaves that directory's later objects out of the listing from it: the directory is
    not taken from a part of its files; a listing from the start finds it whole."""
    url = s3.url("inside")
    rolling = put_rolling(s3, "inside", "local-1795495169300", parts=2)
    s3.put(f"inside/{DONE[0]}", sample_bytes("success"))
    point = f"{rolling}/events_1_local-1795495169300"
    listed = discovery.listing(url, start_after=point)
    assert [ref.key for ref in listed.refs] == [DONE[0]]
    assert listed.settled == f"{rolling}/events_2_local-1795495169300"  # passed by: decided
    [single, whole] = discovery.listing(url).refs  # by key: local-…101 first
    assert whole.layout == "rolling" and len(whole.files) == 2 and whole.error is None
    assert single.key == DONE[0]
