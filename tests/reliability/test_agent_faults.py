"""Faults of the agent itself: SIGKILL at random points of a multi-application workload,
SIGTERM under full load, a burst of SIGHUP reloads while shipping, and a state database that
is locked, full or corrupt."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.agentproc import AgentProcess, metric
from tests.collector import slow
from tests.reliability.harness import (
    PATIENCE,
    TallyCollector,
    agent,
    assert_healthy,
    assert_runs_whole,
    can_mount,
    check_events,
    config_file,
    drops,
    file_lineage,
    fill,
    healthz,
    http_lineage,
    jsonl_files,
    kill,
    memory_agent,
    produced,
    read_jsonl,
    reference_events,
    settle,
    stop_and_account,
    tmpfs,
    unsigned,
    wait_until,
)
from tests.samples import NAMES, sample_bytes

NO_MOUNT = can_mount()
needs_mount = pytest.mark.skipif(NO_MOUNT is not None, reason=str(NO_MOUNT))
#: Real logs of complete applications (the SIGKILLed driver's log is complete-named here, so
#: its runs end FAIL when it is read to its end).
WORKLOAD = list(NAMES)


def app_id_of(log: bytes) -> bytes:
    start = log.index(b'"App ID":"') + len(b'"App ID":"')
    return log[start : log.index(b'"', start)]


def workload_logs(count: int) -> list[tuple[str, bytes]]:
    """`count` real application logs, each under its own application id: (name, content)."""
    logs = []
    for number in range(count):
        sample = sample_bytes(WORKLOAD[number % len(WORKLOAD)])
        app_id = f"local-17953{number:08d}"
        logs.append((app_id, sample.replace(app_id_of(sample), app_id.encode())))
    return logs


def feed(directory: Path, logs: list[tuple[str, bytes]], done: threading.Event) -> None:
    """Write the logs the way Spark does, a burst of applications at a time: in progress in
    two flushes, then renamed complete."""
    burst = 6
    for first in range(0, len(logs), burst):
        group = logs[first : first + burst]
        outs = []
        for name, content in group:
            lines = content.split(b"\n")
            growing = directory / f"{name}.inprogress"
            out = growing.open("wb")
            out.write(b"\n".join(lines[: len(lines) // 2]) + b"\n")
            out.flush()
            outs.append((out, growing, name, b"\n".join(lines[len(lines) // 2 :])))
        time.sleep(0.2)
        for out, growing, name, rest in outs:
            out.write(rest)
            out.close()
            growing.rename(directory / name)
        time.sleep(0.3)
    done.set()


def spark_config(workdir: Path, events_dir: Path, **lineage: Any) -> Path:
    return config_file(
        workdir,
        {**file_lineage(workdir / "lineage.jsonl", rotation_size_mb=0), **lineage},
        spark={"event_log_dirs": [str(events_dir)]},
    )


def finished_logs(state_dir: Path) -> int:
    """Logs the agent's state database records as read to their end (in any of its lives)."""
    # Closed at once: a connection left to the garbage collector keeps its shared lock on the
    # file (WAL mode), and an agent started on that file truncated could not take it over.
    path = state_dir / "state.sqlite3"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        count: int = db.execute("SELECT COUNT(*) FROM logs WHERE finished = 1").fetchone()[0]
    return count


# -- SIGKILL -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [7, 1234])
def test_sigkill_at_random_points_loses_and_repeats_nothing(workdir: Path, seed: int) -> None:
    """Seeded SIGKILLs: nothing written twice, all claimed once, at most a batch lost per kill."""
    rng = random.Random(seed)
    events_dir = workdir / "events"
    events_dir.mkdir()
    logs = workload_logs(60)
    config = spark_config(workdir, events_dir)
    done = threading.Event()
    feeder = threading.Thread(target=feed, args=(events_dir, logs, done), name="feeder")
    feeder.start()
    kills = 0
    try:
        while not done.is_set() or kills < 6:
            with agent(config) as process:
                time.sleep(rng.uniform(0.0, 0.6))
                kill(process)
                kills += 1
    finally:
        feeder.join()
    with agent(config) as process:
        wait_until(
            "every application finished",
            lambda: finished_logs(workdir / "state") == len(logs),
        )
        samples = settle(process, "file")
        assert drops(samples, "file") == {}
        assert_healthy(process)
        stop_and_account(process)

    written = read_jsonl(workdir / "lineage.jsonl")
    keys = [(e["run"]["runId"], e["eventType"]) for e in written]
    repeated = [key for key, n in Counter(keys).items() if n > 1]
    assert repeated == [], f"written twice after {kills} kills: {repeated}"
    reference = reference_events(events_dir)
    expected = {(e["run"]["runId"], e["eventType"]): e for e in reference}
    assert set(keys) <= set(expected)
    for event in written:  # what was written is what the translator makes, byte for byte
        assert unsigned(event) == expected[(event["run"]["runId"], event["eventType"])]
    with sqlite3.connect(workdir / "state" / "state.sqlite3") as db:
        claimed = {
            (run_id, "START" if key == "START" else event_type)
            for run_id, key, event_type in db.execute(
                "SELECT run_id, event_key, event_type FROM emitted"
            )
        }
    unclaimed = sorted(set(expected) - claimed)
    assert unclaimed == [], f"events the logs call for were never claimed: {unclaimed}"
    assert claimed == set(expected), f"claimed but not called for: {claimed - set(expected)}"
    # At-most-once: an event claimed and not yet written when SIGKILL lands is lost, never
    # sent twice. The source hands each batch to the deliveries before it reads on, so at
    # most one application's batch is in flight at any instant: at most one per kill.
    lost = set(expected) - set(keys)
    in_flight = {application_of(expected[key]) for key in lost}
    print(f"seed {seed}: {kills} kills, {len(written)} written, lost in flight: {sorted(lost)}")
    assert len(in_flight) <= kills, sorted(lost)
    check_events(written, workdir / "ed25519.key")


def application_of(event: dict[str, Any]) -> str:
    """The application run an event belongs to (its parent run, or its own for the app)."""
    parent = event["run"]["facets"].get("parent")
    return str(parent["run"]["runId"]) if parent else str(event["run"]["runId"])


# -- SIGHUP ------------------------------------------------------------------------------------


def test_burst_of_reloads_while_shipping_loses_nothing(workdir: Path) -> None:
    """100 SIGHUPs while shipping and switching transports: every offered event accounted for."""
    events, rate = 3000, 300.0
    target = workdir / "lineage.jsonl"
    with TallyCollector() as first, TallyCollector() as second:
        variants = [
            {**http_lineage(first.url)},
            {
                "transport": ["http", "file"],
                "http": {"endpoint": second.url},
                "file": {"path": str(target)},
            },
            {**file_lineage(target, rotation_size_mb=32)},  # same path, new settings
            {
                "transport": ["http", "file"],
                "http": {"endpoint": first.url},
                "file": {"path": str(target)},
            },
        ]
        config = config_file(workdir, variants[0])
        document = yaml.safe_load(config.read_text())

        def write(variant: dict[str, Any]) -> None:
            # Whole files only, as an operator's deploy tool would (rename is atomic).
            staged = config.with_suffix(".new")
            staged.write_text(yaml.safe_dump({**document, "lineage": {"enabled": True, **variant}}))
            staged.rename(config)

        with memory_agent(config, events, rate) as process:
            wait_until("shipping", lambda: produced(process.scrape()) >= 300)
            for number in range(100):
                write(variants[number % len(variants)])
                process.signal(signal.SIGHUP)
                time.sleep(0.01)
            write(variants[1])
            process.signal(signal.SIGHUP)
            wait_until("the last reload", lambda: reloads(process) >= 2)
            settle(process, "file", events)
            samples = settle(process, "http", events)
            assert_healthy(process)
            assert metric(samples, "lineage_config_reloads_total", result="error") == 0
            http_drops, file_drops = drops(samples, "http"), drops(samples, "file")
            delivered = {
                name: metric(samples, "lineage_events_delivered_total", transport=name)
                for name in ("http", "file")
            }
            accounting = stop_and_account(process)
    print(f"{reloads(process)} reloads applied; accounting {accounting}")
    assert set(http_drops) | set(file_drops) <= {"shutdown"}
    assert delivered["http"] == first.accepted + second.accepted
    assert delivered["http"] == accounting["http"]["delivered"]
    assert accounting["http"]["dropped"] == sum(http_drops.values())
    file_events = read_jsonl(*jsonl_files(target))
    assert delivered["file"] == len(file_events) == accounting["file"]["delivered"]
    assert accounting["file"]["dropped"] == sum(file_drops.values())
    key = workdir / "ed25519.key"
    check_events(first.events[::50] + second.events[::50] + file_events[::50], key)


def reloads(process: AgentProcess) -> int:
    return sum(line.get("event") == "reload_ok" for line in process.logs())


# -- SIGTERM -----------------------------------------------------------------------------------


def test_sigterm_under_full_load_exits_within_the_drain_timeout(workdir: Path) -> None:
    """SIGTERM under full load: exit 0 within drain_timeout; what waits stays in the spool
    for the next start (queued, not dropped), what is in flight is unconfirmed."""
    drain = 2.0
    with TallyCollector(slow(0.3)) as collector:
        lineage = {
            **http_lineage(collector.url, timeout="5s"),
            "queue_size": 200,
            "drain_timeout": f"{drain:g}s",
        }
        config = config_file(workdir, lineage)
        with memory_agent(config, 10_000_000, 0.0) as process:
            wait_until(
                "a full queue",
                lambda: drops(process.scrape(), "http").get("queue_full", 0) > 1000,
            )
            assert_healthy(process)
            process.signal(signal.SIGTERM)
            code = process.proc.wait(drain + 30)  # a stop that hangs fails here
            line = process.wait_log("agent_stopped", timeout=30)
    assert code == 0
    # It did not wait for the queue: events still queued at the exit (counted, where a time
    # bound would be a busy machine's guess), kept for the next start.
    numbers = line["accounting"]["http"]
    assert 0 < numbers["queued"] == line["kept"]["http"] <= 200
    resolved = numbers["delivered"] + numbers["dropped"] + numbers["unconfirmed"]
    assert numbers["offered"] == resolved + numbers["queued"]
    assert line["undelivered"]["http"] == 0
    assert numbers["delivered"] <= collector.tally(201)
    # A request in flight at the deadline is unconfirmed (its answer may come later), never
    # delivered; one still waiting in the queue is kept.
    assert collector.tally(201) - numbers["delivered"] <= numbers["unconfirmed"]


# -- the state database ------------------------------------------------------------------------


def some_logs(directory: Path, count: int, first: int = 0) -> list[tuple[str, bytes]]:
    logs = workload_logs(first + count)[first:]
    directory.mkdir(exist_ok=True)
    staging = directory.parent / f"staging-{first}"
    staging.mkdir()
    for name, content in logs:
        (staging / name).write_bytes(content)
    for path in staging.iterdir():  # complete logs appear whole, as a rename would make them
        path.rename(directory / path.name)
    staging.rmdir()
    return logs


def test_state_database_locked_by_another_process(workdir: Path) -> None:
    """A state database locked by another process holds events until released; none lost."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    config = spark_config(workdir, events_dir)
    with agent(config) as process:
        some_logs(events_dir, 3)
        wait_until("the first logs", lambda: finished_logs(workdir / "state") == 3)
        locker = sqlite3.connect(workdir / "state" / "state.sqlite3", isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            some_logs(events_dir, 4, first=3)
            failed = process.wait_log("state_write_failed", timeout=PATIENCE)
            assert failed["error"] == "database is locked"
            time.sleep(2.0)  # held for a while, across several passes of the source
            assert_healthy(process)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        recover_and_drain(process, workdir)
    assert sum(line.get("event") == "state_write_failed" for line in process.logs()) == 1
    written = read_jsonl(workdir / "lineage.jsonl")
    assert_all_written(written, events_dir, workdir)


def test_state_database_lost_while_an_application_runs(workdir: Path) -> None:
    """An application still running when the state database is lost: after the restart its
    START is not sent again, what its log gains afterwards is, and each event exactly once."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    config = spark_config(workdir, events_dir)
    ((name, content),) = workload_logs(1)
    lines = content.split(b"\n")
    growing = events_dir / f"{name}.inprogress"
    growing.write_bytes(b"\n".join(lines[: len(lines) // 2]) + b"\n")
    with agent(config) as process:
        wait_until("the first half", lambda: (workdir / "lineage.jsonl").exists())
        settle(process, "file")
        stop_and_account(process)
    first_life = read_jsonl(workdir / "lineage.jsonl")
    assert [e["eventType"] for e in first_life][:1] == ["START"]
    for path in workdir.glob("state/state.sqlite3*"):
        path.unlink()
    with agent(config) as process:
        caught_up = process.wait_log("eventlog_caught_up", timeout=PATIENCE)
        assert caught_up["events_taken_as_emitted"] == len(first_life)
        with growing.open("ab") as out:
            out.write(b"\n".join(lines[len(lines) // 2 :]))
        growing.rename(events_dir / name)
        wait_until("the log finished", lambda: finished_logs(workdir / "state") == 1)
        settle(process, "file")
        stop_and_account(process)
    written = read_jsonl(workdir / "lineage.jsonl")
    assert len(written) > len(first_life)
    assert_all_written(written, events_dir, workdir)


def test_events_file_moved_under_a_running_agent(workdir: Path) -> None:
    """The events file moved away: one log line, /healthz degraded until the next batch opens
    a new file; the moved file and the new one hold every event once."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    config = spark_config(workdir, events_dir)
    written_to = workdir / "lineage.jsonl"
    moved_to = workdir / "moved.jsonl"
    with agent(config) as process:
        some_logs(events_dir, 2)
        wait_until("the first logs", lambda: finished_logs(workdir / "state") == 2)
        settle(process, "file")
        written_to.rename(moved_to)
        changed = process.wait_log(
            "file_changed_under_agent", timeout=PATIENCE, path=str(written_to)
        )
        assert changed["change"] == "removed"
        assert changed["detail"] == (
            "events already written are in the file that path named; the next batch starts a "
            "new file at the path"
        )
        body = healthz(process)
        assert body["status"] == "degraded"
        assert body["problems"] == [f"{written_to} removed"]
        some_logs(events_dir, 2, first=2)
        process.wait_log("file_reopened", timeout=PATIENCE, path=str(written_to))
        process.wait_log("file_change_resolved", timeout=PATIENCE, path=str(written_to))
        wait_until("the new logs", lambda: finished_logs(workdir / "state") == 4)
        settle(process, "file")
        assert_healthy(process)
        stop_and_account(process)
    written = read_jsonl(moved_to) + read_jsonl(written_to)
    assert_all_written(written, events_dir, workdir)


def assert_same_events(written: list[dict[str, Any]], reference: list[dict[str, Any]]) -> None:
    """Each event the logs call for was written exactly once, byte for byte as the translator
    makes it (applications held by a fault may come later than others)."""
    expected = {(e["run"]["runId"], e["eventType"]): e for e in reference}
    keys = [(e["run"]["runId"], e["eventType"]) for e in written]
    assert sorted(keys) == sorted(expected)
    for key, event in zip(keys, written, strict=True):
        assert unsigned(event) == expected[key]


@needs_mount
def test_state_directory_full(workdir: Path) -> None:
    """A full state file system holds claims and ledger rows until space returns; nothing lost."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    with tmpfs(workdir / "state", "2m"):
        config = spark_config(workdir, events_dir)
        with agent(config) as process:
            some_logs(events_dir, 3)
            wait_until("the first logs", lambda: finished_logs(workdir / "state") == 3)
            filler = fill(workdir / "state")
            some_logs(events_dir, 4, first=3)
            failed = process.wait_log("state_write_failed", timeout=PATIENCE)
            assert failed["error"] == "database or disk is full"
            time.sleep(2.0)
            assert_healthy(process)
            filler.unlink()
            recover_and_drain(process, workdir)
        written = read_jsonl(workdir / "lineage.jsonl")
        assert_all_written(written, events_dir, workdir)
        with sqlite3.connect(workdir / "state" / "state.sqlite3") as db:
            rows = db.execute("SELECT COUNT(*) FROM ledger WHERE outcome = 'delivered'").fetchone()
        assert rows[0] == len(written)  # the ledger rows held during the outage were kept


def recover_and_drain(process: AgentProcess, workdir: Path) -> None:
    """The agent says its state writes recovered, finishes all seven logs, ships everything
    without a drop, stays healthy and stops with every event accounted for."""
    process.wait_log("state_write_recovered", timeout=PATIENCE)
    wait_until("every log finished", lambda: finished_logs(workdir / "state") == 7)
    samples = settle(process, "file")
    assert drops(samples, "file") == {}
    assert_healthy(process)
    stop_and_account(process)


def assert_all_written(written: list[dict[str, Any]], events_dir: Path, workdir: Path) -> None:
    """`written` holds the events of the logs in `events_dir`, each once, every run whole,
    each signed with the key in `workdir`."""
    assert_same_events(written, reference_events(events_dir))
    assert_runs_whole(written)
    check_events(written, workdir / "ed25519.key")


def test_corrupt_state_database_refuses_to_start(workdir: Path) -> None:
    """A corrupt state database refuses the start (exit 78) naming the file and what to do."""
    (workdir / "state").mkdir()
    (workdir / "state" / "state.sqlite3").write_bytes(b"this is not a database\n" * 512)
    config = spark_config(workdir, workdir / "events")
    with agent(config, wait=False) as process:
        assert process.proc.wait(PATIENCE) == 78
    path = workdir / "state" / "state.sqlite3"
    assert process.wait_log("start_refused")["error"] == (
        f"{path}: state database is unusable (file is not a database); stop the agent, move "
        "the file aside and start again (runs already emitted may then be emitted again)"
    )
    assert "Traceback" not in process.raw_output()


def test_state_database_locked_at_start_is_a_clear_refusal(workdir: Path) -> None:
    """A state database locked at start is refused as locked, not advised to be moved aside."""
    (workdir / "state").mkdir()
    path = workdir / "state" / "state.sqlite3"
    locker = sqlite3.connect(path, isolation_level=None)
    try:
        locker.execute("PRAGMA journal_mode=WAL")
        locker.execute("CREATE TABLE held (x)")
        locker.execute("BEGIN EXCLUSIVE")
        locker.execute("INSERT INTO held VALUES (1)")
        config = spark_config(workdir, workdir / "events")
        with agent(config, wait=False) as process:
            assert process.proc.wait(PATIENCE) == 78
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    error = process.wait_log("start_refused")["error"]
    assert error == (
        f"{path}: state database is locked by another process (database is locked); "
        "stop that process and start the agent again"
    )


def test_state_database_deleted_under_a_running_agent(workdir: Path) -> None:
    """`rm state.sqlite3*` and the events file's lock removed while running: one log line per
    file, /healthz degraded naming both; the next start takes the completed logs as emitted
    (nothing written twice) and follows new ones; `spark.replay_existing: true` replays."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    config = spark_config(workdir, events_dir)
    state = workdir / "state" / "state.sqlite3"
    lock = workdir / "lineage.jsonl.lock"
    with agent(config) as process:
        some_logs(events_dir, 4)
        wait_until("the first logs", lambda: finished_logs(workdir / "state") == 4)
        for path in workdir.glob("state/state.sqlite3*"):
            path.unlink()
        lost = process.wait_log("file_changed_under_agent", timeout=PATIENCE, path=str(state))
        assert lost["change"] == "removed"
        assert lost["detail"] == (
            "the agent keeps using the file it opened, which that path no longer names; "
            "restart the agent (see docs/operations/files.md, 'Files the agent owns')"
        )
        lock.unlink()
        lock.write_text("")
        moved = process.wait_log("file_changed_under_agent", timeout=PATIENCE, path=str(lock))
        assert moved["change"] == "replaced"
        time.sleep(2.5)  # more checks: still one line per file
        body = healthz(process)
        assert body["status"] == "degraded"
        assert body["problems"] == [f"{lock} replaced", f"{state} removed"]
        stop_and_account(process)
    changes = [line for line in process.logs() if line.get("event") == "file_changed_under_agent"]
    assert len(changes) == 2
    with agent(config) as process:
        recreated = process.wait_log("state_database_recreated", timeout=PATIENCE)
        assert recreated["eventlogs_skipped"] == 4
        assert recreated["detail"] == (
            "the state database was lost: completed event logs older than it are taken as "
            "already emitted (spark.replay_existing: true replays them)"
        )
        some_logs(events_dir, 2, first=4)
        wait_until("the new logs", lambda: finished_logs(workdir / "state") == 6)
        settle(process, "file")
        assert_healthy(process)
        stop_and_account(process)
    written = read_jsonl(workdir / "lineage.jsonl")
    assert_all_written(written, events_dir, workdir)

    for path in workdir.glob("state/state.sqlite3*"):
        path.unlink()
    replaying = spark_config(workdir, events_dir)
    text = yaml.safe_load(replaying.read_text())
    text["spark"]["replay_existing"] = True
    replaying.write_text(yaml.safe_dump(text))
    with agent(replaying) as process:
        wait_until("every log again", lambda: finished_logs(workdir / "state") == 6)
        settle(process, "file")
        stop_and_account(process)
    assert not any(line.get("event") == "state_database_recreated" for line in process.logs())
    assert len(read_jsonl(workdir / "lineage.jsonl")) == 2 * len(written)


@pytest.mark.parametrize(
    ("damage", "found"),
    [("truncated", "an empty file"), ("schemaless", "a database without the agent's tables")],
)
def test_state_database_emptied_while_stopped_is_a_lost_one(
    workdir: Path, damage: str, found: str
) -> None:
    """A state database truncated to 0 bytes (its -wal and -shm removed) or replaced by a
    SQLite file without the agent's tables while the agent was stopped, the lock file still
    there, is a lost one as a deleted one is: `state_database_recreated` logged, nothing sent
    again, new logs sent."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    config = spark_config(workdir, events_dir)
    with agent(config) as process:
        some_logs(events_dir, 4)
        wait_until("the first logs", lambda: finished_logs(workdir / "state") == 4)
        settle(process, "file")
        stop_and_account(process)
    first_life = read_jsonl(workdir / "lineage.jsonl")
    state = workdir / "state" / "state.sqlite3"
    for stale in workdir.glob("state/state.sqlite3-*"):
        stale.unlink()
    if damage == "truncated":
        os.truncate(state, 0)
    else:
        state.unlink()
        with contextlib.closing(sqlite3.connect(state)) as other:
            other.execute("CREATE TABLE notes (text TEXT)")
            other.commit()
    assert (workdir / "state" / "state.lock").exists()
    with agent(config) as process:
        wait_until("the logs again", lambda: finished_logs(workdir / "state") == 4)
        settle(process, "file")
        some_logs(events_dir, 1, first=4)
        wait_until("the new log", lambda: finished_logs(workdir / "state") == 5)
        settle(process, "file")
        stop_and_account(process)
    written = read_jsonl(workdir / "lineage.jsonl")
    sent = {(e["run"]["runId"], e["eventType"]) for e in first_life}
    again = [e for e in written[len(first_life) :] if (e["run"]["runId"], e["eventType"]) in sent]
    assert len(again) == 0, f"{len(again)} of the {len(first_life)} events sent again"
    recreated = [line for line in process.logs() if line.get("event") == "state_database_recreated"]
    assert len(recreated) == 1, process.raw_output()[-3000:]
    assert recreated[0]["level"] == "warning"
    assert recreated[0]["found"] == found
    assert recreated[0]["eventlogs_skipped"] == 4
    assert_all_written(written, events_dir, workdir)
