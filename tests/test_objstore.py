"""Event logs on stores: real Spark logs copied to an S3-compatible server on loopback (moto in
server mode), a GCS emulator and Azurite (tests/emulators.py), and read through the Spark source
and the real daemon, against the same logs read from local disk."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from agent.config.loader import parse_config
from agent.config.model import SparkConfig
from agent.service.preflight import check_startup
from agent.spark.eventlog import discovery, stores
from agent.spark.follow import liveness
from agent.spark.follow.source import SparkSource
from agent.state.db import StateDB
from agent.telemetry.metrics import Metrics
from tests.agentproc import keygen, write_config
from tests.bench.harness import agent_process
from tests.emulators import EmulatedStore, running_azurite, running_gcs
from tests.s3server import S3Server, environment, running_s3
from tests.spark_logs import CODECS, LAYOUTS, SparkLogs, running_app
from tests.spark_scenarios import events_in, source_running, wait_events
from tests.test_watcher import run_until, settled

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One S3 server for the session, with the AWS variables pointing at it."""
    with (
        running_s3(log=tmp_path_factory.mktemp("s3") / "moto.log") as server,
        environment(server.env),
    ):
        yield server


@pytest.fixture(scope="session")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedStore]:
    """One GCS emulator for the session, with the variables pointing gcsfs at it."""
    with running_gcs(tmp_path_factory.mktemp("gcs")) as server, environment(server.env):
        yield server


@pytest.fixture(scope="session")
def azure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedStore]:
    """One Azurite for the session, with the connection string pointing adlfs at it."""
    with running_azurite(tmp_path_factory.mktemp("azure")) as server, environment(server.env):
        yield server


Store = S3Server | EmulatedStore
STORES = ["s3", "gcs", "azure"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    """Each store in turn: the same checks hold for S3, GCS and Azure."""
    server: Store = request.getfixturevalue(request.param)
    return server


def url(s3: S3Server, prefix: str) -> str:
    return f"s3a://{s3.bucket}/{prefix}"


def source_for(
    dirs: list[str | Path], state_dir: Path, **spark: Any
) -> tuple[SparkSource, Metrics]:
    """A Spark source over `dirs` (paths or URLs) that looks at the store every 0.1 s."""
    metrics = Metrics(CollectorRegistry())
    spark.setdefault("store_poll_interval", 0.1)
    config = SparkConfig(
        event_log_dirs=tuple(str(d) for d in dirs), poll_interval=0.1, replay_horizon=0, **spark
    )
    return SparkSource(config, "spark", StateDB(state_dir), metrics), metrics


async def test_byte_identical_to_local_disk(
    store: Store, spark_logs: SparkLogs, tmp_path: Path
) -> None:
    """Every layout and codec read from the store gives the very bytes read from local disk."""
    for layout_name in LAYOUTS:
        for codec in CODECS:
            local = spark_logs.directory(layout_name, codec)
            store.upload_tree(local, f"identity/{layout_name}-{codec}")
            runs = []
            for name, directory in (
                ("local", str(local)),
                ("store", store.url(f"identity/{layout_name}-{codec}")),
            ):
                source, _ = source_for([directory], tmp_path / f"{layout_name}-{codec}-{name}")
                emitted = await run_until(source, settled(source))
                runs.append([orjson.dumps(e) for _, e in emitted])
            assert len(runs[0]) == 6, (layout_name, codec)
            assert runs[1] == runs[0], (layout_name, codec)


async def test_restart_emits_nothing_twice_and_counts_requests(
    s3: S3Server, spark_logs: SparkLogs, tmp_path: Path
) -> None:
    """A second agent on the same state emits nothing and never lists the finished log."""
    s3.upload_tree(spark_logs.multi, "restart")
    source, metrics = source_for([url(s3, "restart")], tmp_path / "state")
    first = await run_until(source, settled(source))
    local, _ = source_for([spark_logs.multi], tmp_path / "local")
    assert len(first) == len(await run_until(local, settled(local))) >= 2
    assert metrics.store_requests.labels(request="get")._value.get() >= 1
    # One LIST: on S3 the rolling directory's files come with the listing of its directory.
    assert metrics.store_requests.labels(request="list")._value.get() == 1

    source, metrics = source_for([url(s3, "restart")], tmp_path / "state")
    assert await run_until(source, lambda _: not source._first_scan, seconds=10) == []
    # One LIST of the directory: the finished rolling directory is not listed again.
    assert metrics.store_requests.labels(request="list")._value.get() == 1
    assert metrics.store_requests.labels(request="get")._value.get() == 0


async def test_rolling_parts_read_as_they_appear(
    store: Store, spark_logs: SparkLogs, tmp_path: Path
) -> None:
    """A rolling log's parts are read as each appears; it ends when appstatus loses
    .inprogress, with the same events as the whole log read at once."""
    [rolling] = [p for p in spark_logs.multi.iterdir() if p.name.startswith("eventlog_v2_")]
    parts = sorted(
        (p for p in rolling.iterdir() if p.name.startswith("events_")),
        key=lambda p: int(p.name.split("_")[1]),
    )
    assert len(parts) >= 2
    status = next(p.name for p in rolling.iterdir() if p.name.startswith("appstatus_"))
    prefix = f"parts/{rolling.name}"
    store.put(f"{prefix}/{status}.inprogress", b"")
    source, _ = source_for([store.url("parts")], tmp_path / "state", store_poll_interval=0.2)
    async with source_running(source) as emitted:
        for number, part in enumerate(parts):
            store.put(f"{prefix}/{part.name}", part.read_bytes())
            async with asyncio.timeout(30):
                # The first part's START comes before the next part exists.
                while not _read_part(source, part.name) or (number == 0 and not emitted):
                    await asyncio.sleep(0.05)
        # Spark renames the empty status file: a new object, then the old one gone.
        store.put(f"{prefix}/{status}", b"")
        store.delete(f"{prefix}/{status}.inprogress")
        async with asyncio.timeout(30):
            while source.apps or source._first_scan:
                await asyncio.sleep(0.05)
    whole, _ = source_for([str(spark_logs.multi)], tmp_path / "whole")
    expected = await run_until(whole, settled(whole))
    assert [orjson.dumps(e) for _, e in emitted] == [orjson.dumps(e) for _, e in expected]


def test_the_daemon_follows_the_store_and_shows_no_credential(
    store: Store, spark_logs: SparkLogs, tmp_path: Path
) -> None:
    """The real daemon following a directory on the store sends the events of a local replay
    of the same logs, and no credential of the store is in its output or its events."""
    store.upload_tree(spark_logs.multi, "daemon")
    local, _ = source_for([spark_logs.multi], tmp_path / "local")
    expected = [event for _, event in asyncio.run(run_until(local, settled(local)))]
    keygen(tmp_path)
    events = tmp_path / "events.jsonl"
    config = write_config(
        tmp_path,
        {"transport": "file", "file": {"path": str(events)}},
        spark={
            "event_log_dirs": [store.url("daemon")],
            "store_poll_interval": "0.5s",
            "replay_horizon": 0,
        },
    )
    with agent_process(config) as agent:
        wait_events(events, lambda sent: len(sent) >= len(expected), seconds=60)
        agent.stop()
        output = agent.raw_output()
    sent = events_in(events)
    # The daemon signs each event; what it signs is the replay's event.
    assert all(e["run"]["facets"].pop("lineageAgent_signature") for e in sent)
    assert sent == expected
    written = events.read_text()
    assert not [secret for secret in store.secrets if secret in output or secret in written]


def test_gcs_is_read_with_the_service_account_token(gcs: EmulatedStore) -> None:
    """gcsfs reads the emulator with the token bought by the key file's signed assertion
    (the emulator itself checks no token, so the loopback token endpoint counts)."""
    gcs.put("token/app-1", b"{}\n")
    assert [e.name for e in stores.listdir(gcs.url("token"))] == ["app-1"]
    assert gcs.token_exchanges() >= 1


def _read_part(source: SparkSource, name: str) -> bool:
    for app in source.apps.values():
        position = app.log.reader.position
        if position is not None and position.path.endswith(name):
            return True
    return False


async def test_stale_log_on_a_store_ends_fail_without_local_checks(
    s3: S3Server, spark_logs: SparkLogs, tmp_path: Path
) -> None:
    """An in-progress log on a store that stopped growing ends FAIL without looking at this
    node's processes or ports, and `job stop` points at the cluster manager."""
    [rolling] = [p for p in spark_logs.multi.iterdir() if p.name.startswith("eventlog_v2_")]
    first = min(
        (p for p in rolling.iterdir() if p.name.startswith("events_")),
        key=lambda p: int(p.name.split("_")[1]),
    )
    status = next(p.name for p in rolling.iterdir() if p.name.startswith("appstatus_"))
    prefix = f"stale/{rolling.name}"
    client = s3.client()
    client.put_object(Bucket=s3.bucket, Key=f"{prefix}/{status}.inprogress", Body=b"")
    client.put_object(Bucket=s3.bucket, Key=f"{prefix}/{first.name}", Body=first.read_bytes())
    source, _ = source_for(
        [url(s3, "stale")], tmp_path / "state", store_poll_interval=0.2, stale_after=1.0
    )
    stop = asyncio.Event()
    emitted: list[dict[str, Any]] = []
    task = asyncio.create_task(
        source.run(lambda ex, ev, _fence=None: emitted.append(dict(ev)), stop)
    )
    try:
        async with asyncio.timeout(30):
            while not emitted:
                await asyncio.sleep(0.05)
        app_id = next(iter(source.apps.values())).app_id
        with pytest.raises(Exception) as refused:
            await source.stop_application(app_id, reason="r", requested_by="t", grace=1)
        assert str(refused.value) == (
            f"application {app_id} logs to a shared store and its driver runs elsewhere: "
            "job stop cannot reach it from here; stop it through the cluster manager"
        )
        async with asyncio.timeout(30):
            while not any(e["eventType"] == "FAIL" for e in emitted):
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
        source.state.close()
    fail = next(
        e for e in emitted if e["eventType"] == "FAIL" and "parent" not in e["run"]["facets"]
    )
    message = fail["run"]["facets"]["errorMessage"]["message"]
    assert message.endswith(liveness.REMOTE_REASON)


def test_scan_skips_finished_rolling_directories(s3: S3Server, spark_logs: SparkLogs) -> None:
    """A store's scan takes a rolling log from the one listing of its directory, and passes
    over that of a finished application."""
    s3.upload_tree(spark_logs.multi, "skip")
    directory = url(s3, "skip")
    before = stores.requests()["list"]
    [ref] = discovery.scan(directory)
    assert stores.requests()["list"] - before == 1 and ref.complete and len(ref.files) >= 2
    before = stores.requests()["list"]
    assert discovery.scan(directory, skip={ref.key}) == []
    assert stores.requests()["list"] - before == 1


def test_config_check_notes_reachability(s3: S3Server, tmp_path: Path) -> None:
    """config check accepts store URLs and tells whether each can be listed, as a note."""
    s3.client().put_object(Bucket=s3.bucket, Key="check/app-1", Body=b"")
    text = (
        f"lineage: {{transport: file, file: {{path: {tmp_path / 'events.jsonl'}}}}}\n"
        f"signing: {{key_path: {tmp_path / 'key'}}}\n"
        f"state_dir: {tmp_path / 'state'}\n"
        f"spark: {{event_log_dirs: [s3a://{s3.bucket}/check, 's3://no-such-bucket-here/x']}}\n"
    )
    checked = check_startup(parse_config(text, "c.yaml"), service=False)
    notes = [n for n in checked.notes if n.startswith("spark.")]
    assert notes[0] == (
        f"spark.event_log_dirs[0]: s3a://{s3.bucket}/check: reachable from here (1 entries)"
    )
    assert notes[1].startswith("spark.event_log_dirs[1]: s3://no-such-bucket-here/x: ")


def test_store_error_texts_carry_no_password() -> None:
    """A URL's password never reaches a message: `redact` replaces it."""
    assert stores.redact("s3a://AKIA:s3cr3t@bucket/logs") == "s3a://AKIA:***@bucket/logs"
    assert stores.redact("abfss://logs@acct.dfs.core.windows.net/x") == (
        "abfss://logs@acct.dfs.core.windows.net/x"
    )


def test_state_keys_are_urls(s3: S3Server, spark_logs: SparkLogs, tmp_path: Path) -> None:
    """Positions of logs on a store are kept in the state database under the log's URL."""
    s3.upload_tree(spark_logs.directory("single", "zstd"), "keys")
    source, _ = source_for([url(s3, "keys")], tmp_path / "state")
    asyncio.run(run_until(source, settled(source)))
    db = StateDB(tmp_path / "state")
    try:
        [key] = [k for k in db.finished_keys() if k.startswith("s3a://")]
        assert key.startswith(url(s3, "keys") + "/")
    finally:
        db.close()
    shutil.rmtree(tmp_path / "state")


def s3a_confs(s3: S3Server) -> dict[str, str]:
    """Spark properties for S3A against the loopback server (credentials from AWS_*)."""
    jars = sorted((ROOT / "build" / "jars").glob("hadoop-aws/*.jar"))
    if not jars:
        jars = [Path(p) for p in _fetch_jars("hadoop-aws")]
    return {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.hadoop.fs.s3a.endpoint": s3.endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": s3.env["AWS_DEFAULT_REGION"],
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
        ),
    }


def _fetch_jars(bundle: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "jars.py"), "--classpath", bundle],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return done.stdout.strip().split(":")


async def test_spark_writes_to_s3_and_the_agent_follows(s3: S3Server, tmp_path: Path) -> None:
    """Spark itself logs to s3a:// (rolling, Spark 4's default) while the agent follows the
    bucket: the application shows up while it runs, its runs come out START then COMPLETE,
    nothing twice. (A single-file log on S3 appears only once complete: the byte-identity
    test covers reading one.)"""
    layout_name = "rolling"
    prefix = f"live-{layout_name}"
    # Spark requires spark.eventLog.dir to exist: a directory marker, as `hadoop fs -mkdir` makes.
    s3.client().put_object(Bucket=s3.bucket, Key=f"{prefix}/", Body=b"")
    source, metrics = source_for([url(s3, prefix)], tmp_path / "state", store_poll_interval=0.2)
    async with source_running(source) as emitted:
        with running_app(
            tmp_path / "app", layout_name, "zstd", event_url=url(s3, prefix), confs=s3a_confs(s3)
        ) as app:
            async with asyncio.timeout(60):  # appstatus_*.inprogress shows the application
                while not source.apps:
                    await asyncio.sleep(0.05)
            for step, done in (("go-job", None), ("release", "job-done"), ("go-stop", "stopped")):
                app.signal(step)
                if done:
                    await asyncio.to_thread(app.wait, done)
            async with asyncio.timeout(60):
                while not any(
                    e["eventType"] == "COMPLETE" and "parent" not in e["run"]["facets"]
                    for _, e in emitted
                ):
                    await asyncio.sleep(0.05)
            app_id = app.app_id
    assert {ex for ex, _ in emitted} == {app_id}
    application = [e["eventType"] for _, e in emitted if "parent" not in e["run"]["facets"]]
    assert application == ["START", "COMPLETE"]
    assert len({orjson.dumps(e) for _, e in emitted}) == len(emitted)
    assert metrics.store_requests.labels(request="get")._value.get() >= 1
