"""Event-log faults under the real daemon (`lineage-agent run`, file transport): damaged codec
streams (cut short, garbage between blocks and inside one), corrupt and future-versioned lines,
malformed events, a 100 MB line, a log deleted while tailed, a rolling log growing files
mid-read, and thousands of logs appearing at once in a directory that did not exist at start.
The agent keeps running, counts what it skipped, and every run it started ends with exactly
one terminal event."""

from __future__ import annotations

import os
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.agentproc import AgentProcess, metric
from tests.reliability import harness
from tests.samples import block_encoded, sample_bytes, sample_path
from tests.spark_logs import SparkLogs, codec_params

SUCCESS = sample_bytes("success")
SUCCESS_APP = b"local-1795495169157"
ENDED = "the event log ended without ApplicationEnd for this run"


def spark_agent_config(workdir: Path, *directories: Path, **spark: Any) -> Path:
    return harness.config_file(
        workdir,
        harness.file_lineage(workdir / "lineage.jsonl", rotation_size_mb=0),
        spark={"event_log_dirs": [str(d) for d in directories], **spark},
    )


def skipped(process: AgentProcess, reason: str) -> float:
    return metric(process.scrape(), "lineage_eventlog_lines_skipped_total", reason=reason)


def finish(process: AgentProcess, workdir: Path) -> list[dict[str, Any]]:
    """Healthy, exact accounting, stopped; the delivered events, all valid and verified."""
    samples = harness.settle(process, "file")
    harness.assert_healthy(process)
    assert harness.drops(samples, "file") == {}
    delivered = metric(samples, "lineage_events_delivered_total", transport="file")
    accounting = harness.stop_and_account(process)
    events = harness.read_jsonl(workdir / "lineage.jsonl")
    assert len(events) == delivered == accounting["file"]["delivered"]
    harness.check_events(events, workdir / "ed25519.key")
    return events


def app_ids_of(events: list[dict[str, Any]]) -> set[str]:
    return {e["job"]["name"].split(".")[0] for e in events}


# -- damaged codec streams ---------------------------------------------------------------------


def damage(data: bytes, how: str) -> bytes:
    """Cut the stream at 85% (a writer killed mid-flush) or overwrite 64 bytes there (a bad
    disk block): past the application's start, before its end."""
    at = len(data) * 85 // 100
    if how == "truncated":
        return data[:at]
    return data[:at] + b"\xff" * 64 + data[at + 64 :]


@pytest.mark.spark
@pytest.mark.parametrize("how", ["truncated", "corrupt"])
def test_damaged_compressed_logs(spark_logs: SparkLogs, workdir: Path, how: str) -> None:
    """Damaged zstd, lz4, snappy logs: counted, lines before the damage kept, every run ends."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    clean_dir = workdir / "clean"
    for codec in ("zstd", "lz4", "snappy"):
        [log] = spark_logs.directory("single", codec).iterdir()
        (events_dir / log.name).write_bytes(damage(log.read_bytes(), how))
        shutil.copytree(spark_logs.directory("single", codec), clean_dir / codec)
    damaged_logs = 3
    if how == "corrupt":
        [rolling] = spark_logs.multi.iterdir()
        shutil.copytree(rolling, events_dir / rolling.name)
        shutil.copytree(spark_logs.multi, clean_dir / "multi")
        first = next((events_dir / rolling.name).glob("events_1_*"))
        first.write_bytes(damage(first.read_bytes(), how))
        damaged_logs = 4
    config = spark_agent_config(workdir, events_dir)
    with harness.agent(config) as process:
        harness.wait_until("every damaged log finished", lambda: finished(process) == damaged_logs)
        read_errors = skipped(process, "read_error")
        corrupt_lines = skipped(process, "corrupt_json")
        events = finish(process, workdir)

    runs = harness.assert_runs_whole(events)
    assert len(app_ids_of(events)) == damaged_logs
    if how == "corrupt":
        # Where the bad bytes land decides how they surface: a codec check fails (read_error)
        # or bytes decode into a broken line (corrupt_json); either way each log says so.
        assert read_errors + corrupt_lines >= damaged_logs
        return
    assert (read_errors, corrupt_lines) == (damaged_logs, 0)
    assert sum(types[-1] == "FAIL" for types in runs.values()) >= damaged_logs
    clean = [clean_dir / name for name in sorted(p.name for p in clean_dir.iterdir())]
    reference = {(e["run"]["runId"], e["eventType"]): e for e in harness.reference_events(*clean)}
    for event in events:
        plain = harness.unsigned(event)
        if event["eventType"] == "FAIL":  # a run the damage cut short
            assert plain["run"]["facets"]["errorMessage"]["message"] == ENDED
        else:  # everything read before the cut is exactly what the clean log gives
            assert plain == reference[(event["run"]["runId"], event["eventType"])]


BLOCK = 32 * 1024  # Spark's default block size of lz4, snappy and lzf
DAMAGED_DETAIL = {
    "zstd": "zstd: undecodable frame starting at byte 0 "
    "(zstd decompressor error: Data corruption detected)",
    "lz4": "lz4: undecodable block (Decompression failed: corrupt input or insufficient space "
    "in destination buffer. Error code: 3193) at byte 13218",
    "snappy": "snappy: undecodable chunk (snappy: corrupt input (expected valid offset but got "
    "offset 29168; dst position: 29050)) at byte 14272",
    "lzf": "lzf: chunk does not decode to 32768 bytes at byte 15646",
}


def damaged_inside_a_block(codec: str) -> tuple[bytes, bytes]:
    """The success sample encoded as `codec` with garbage inside a block in its middle, and
    the complete lines a streaming decoder gives before the damage. zstd: the real file, 64
    bytes overwritten at 85%, inside its one frame; block codecs: 32 KiB blocks, the middle
    block's payload zeroed in its middle."""
    if codec == "zstd":
        broken = damage(sample_path("success").read_bytes(), "corrupt")
        return broken, streamed_lines(broken)
    plain = sample_bytes("success")
    blocks = [plain[at : at + BLOCK] for at in range(0, len(plain), BLOCK)]
    encoded = block_encoded(codec, blocks)
    middle = len(encoded) - len(blocks) + len(blocks) // 2
    mid = len(encoded[middle]) // 2
    encoded[middle] = encoded[middle][:mid] + bytes(64) + encoded[middle][mid + 64 :]
    before = b"".join(blocks[: len(blocks) // 2])
    return b"".join(encoded), before[: before.rfind(b"\n") + 1]


def streamed_lines(data: bytes) -> bytes:
    """The complete lines libzstd's streaming decoder gives of `data` fed one byte at a time,
    up to its first error: what must survive damage, computed without the agent's decoder."""
    stream = zstandard.ZstdDecompressor().decompressobj()
    out: list[bytes] = []
    for at in range(len(data)):
        try:
            out.append(stream.decompress(data[at : at + 1]))
        except zstandard.ZstdError:
            break
    decoded = b"".join(out)
    return decoded[: decoded.rfind(b"\n") + 1]


@pytest.mark.parametrize("codec", codec_params(("zstd", "lz4", "snappy", "lzf")))
def test_damage_inside_a_block_keeps_the_lines_before_it(workdir: Path, codec: str) -> None:
    """Garbage inside a zstd frame or an lz4 / snappy / lzf block of a real log: every
    complete line decodable before it is read, so the application STARTs, its first SQL run
    is whole, and the application ends FAIL, exactly as the undamaged prefix says."""
    broken, kept = damaged_inside_a_block(codec)
    assert b'"SparkListenerApplicationStart"' in kept
    events_dir = workdir / "events"
    events_dir.mkdir()
    log = events_dir / f"{SUCCESS_APP.decode()}.{codec}"
    log.write_bytes(broken)
    clean = workdir / "clean"
    clean.mkdir()
    (clean / SUCCESS_APP.decode()).write_bytes(kept)
    mtime = log.stat().st_mtime_ns
    os.utime(clean / SUCCESS_APP.decode(), ns=(mtime, mtime))  # the FAIL's time: the log's end
    config = spark_agent_config(workdir, events_dir)
    with harness.agent(config) as process:
        harness.wait_until("the log finished", lambda: finished(process) == 1)
        assert skipped(process, "read_error") == 1
        assert skipped(process, "corrupt_json") == 0
        error = process.wait_log("eventlog_read_error")
        assert (error["log"], error["detail"]) == (str(log), DAMAGED_DETAIL[codec])
        events = finish(process, workdir)
    assert [harness.unsigned(e) for e in events] == harness.reference_events(clean)
    harness.assert_runs_whole(events)
    insert = "exp_success.execute_insert_into_hadoop_fs_relation_command.data_success_"
    cut_short = [(insert + "agg_json", kind) for kind in ("START", "FAIL") if codec != "zstd"]
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("exp_success", "START"),
        (insert + "parquet", "START"),
        (insert + "parquet", "COMPLETE"),
        *cut_short,
        ("exp_success", "FAIL"),
    ]
    failed = [e for e in events if e["eventType"] == "FAIL"]
    assert all(e["run"]["facets"]["errorMessage"]["message"] == ENDED for e in failed)


def finished(process: AgentProcess) -> int:
    return sum(line.get("event") == "eventlog_finished" for line in process.logs())


# -- bad lines ---------------------------------------------------------------------------------


def with_unknown_fields(line: bytes) -> bytes:
    """A later Spark adds fields to every event: append one before the closing brace."""
    if not line.endswith(b"}"):
        return line
    return line[:-1] + b',"Spark 9 Field":{"nested":[1,2,{"x":null}]}}'


BAD_LINES = [
    b'{"Event":"SparkListenerJobStart","Job ID":' + b"\xff" * 10,  # corrupt bytes
    b'{"Event":"SparkListenerJobEnd","Job ID":',  # cut short
    b"\x00\x00\x00garbage",  # not JSON at all
]
STRANGE_BUT_JSON = [
    b'[{"Event":"SparkListenerEnvironmentUpdate","Spark Properties":{}}]',  # a list
    b'"{\\"Event\\":\\"SparkListenerApplicationEnd\\"}"',  # a string
    b"12345",
    b"null",
    b'{"Event":"SparkListenerFutureThing","Payload":{"a":1}}',  # a future event type
    b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLFutureEvent","executionId":0}',
    b'{"Event":null}',
    b'{"Event":"SparkListenerJobEnd","Job ID":"zero","Job Result":7}',  # wrong types
]


def clean_and_events(workdir: Path) -> tuple[Path, Path]:
    """A `clean` directory holding the untouched success log (the reference) and an empty
    `events` directory for the agent to watch."""
    clean = workdir / "clean"
    clean.mkdir()
    (clean / SUCCESS_APP.decode()).write_bytes(SUCCESS)
    events_dir = workdir / "events"
    events_dir.mkdir()
    return clean, events_dir


def test_corrupt_strange_and_future_lines(workdir: Path) -> None:
    """Corrupt lines are counted; other JSON shapes and future fields change no event."""
    clean, events_dir = clean_and_events(workdir)
    lines = [with_unknown_fields(line) for line in SUCCESS.split(b"\n")]
    at = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line)
    lines[at:at] = BAD_LINES + STRANGE_BUT_JSON
    lines[3:3] = STRANGE_BUT_JSON  # before the application started, too
    (events_dir / SUCCESS_APP.decode()).write_bytes(b"\n".join(lines))
    config = spark_agent_config(workdir, events_dir)
    with harness.agent(config) as process:
        harness.wait_until("the log finished", lambda: finished(process) == 1)
        assert skipped(process, "corrupt_json") == len(BAD_LINES)
        assert skipped(process, "malformed_event") == 2  # the JobEnd with a Job ID "zero"
        assert process.wait_log("eventlog_corrupt_line")["log"] == str(
            events_dir / SUCCESS_APP.decode()
        )
        events = finish(process, workdir)
    assert [harness.unsigned(e) for e in events] == harness.reference_events(clean)


# -- malformed events --------------------------------------------------------------------------

SQL = "org.apache.spark.sql.execution.ui."
#: Valid JSON of event kinds the translator acts on, each without a field Spark always writes
#: in it (or with a value of another type): (line, event kind, the field it lacks).
MALFORMED = [
    (b'{"Event":"SparkListenerApplicationEnd"}', "SparkListenerApplicationEnd", "Timestamp"),
    (
        b'{"Event":"SparkListenerApplicationStart","App Name":"other","Timestamp":1}',
        "SparkListenerApplicationStart",
        "App ID",
    ),
    (
        b'{"Event":"SparkListenerJobStart","Job ID":99,"Stage Infos":[],"Stage IDs":[]}',
        "SparkListenerJobStart",
        "Submission Time",
    ),
    (
        b'{"Event":"SparkListenerJobEnd","Job ID":1,"Completion Time":1795495170000}',
        "SparkListenerJobEnd",
        "Job Result.Result",
    ),
    (
        b'{"Event":"' + SQL.encode() + b'SparkListenerSQLExecutionStart","executionId":99}',
        "SparkListenerSQLExecutionStart",
        "time",
    ),
    (
        b'{"Event":"' + SQL.encode() + b'SparkListenerSQLExecutionEnd","executionId":"2",'
        b'"time":1795495170000}',
        "SparkListenerSQLExecutionEnd",
        "executionId",
    ),
    (
        b'{"Event":"' + SQL.encode() + b'SparkListenerDriverAccumUpdates","executionId":2}',
        "SparkListenerDriverAccumUpdates",
        "accumUpdates",
    ),
    (
        b'{"Event":"' + SQL.encode() + b'SparkListenerSQLAdaptiveExecutionUpdate"}',
        "SparkListenerSQLAdaptiveExecutionUpdate",
        "executionId",
    ),
    (
        b'{"Event":"SparkListenerStageCompleted","Stage Info":{"Completion Time":1}}',
        "SparkListenerStageCompleted",
        "Stage Info.Stage ID",
    ),
    (
        b'{"Event":"SparkListenerTaskEnd","Stage ID":0,"Task End Reason":{}}',
        "SparkListenerTaskEnd",
        "Task End Reason.Reason",
    ),
    (b'{"Event":"SparkListenerLogStart"}', "SparkListenerLogStart", "Spark Version"),
    (
        b'{"Event":"SparkListenerEnvironmentUpdate","Spark Properties":null}',
        "SparkListenerEnvironmentUpdate",
        "Spark Properties",
    ),
]


def test_malformed_events_are_skipped_and_counted_never_acted_on(workdir: Path) -> None:
    """An ApplicationEnd without a Timestamp, and an event of every other kind the translator
    acts on without a required field, spliced in after ApplicationStart: each is counted as
    `malformed_event` and logged with the field it lacks; the events equal the clean log's,
    the two SQL runs after the splice included."""
    clean, events_dir = clean_and_events(workdir)
    lines = SUCCESS.split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"SparkListenerApplicationStart"' in line) + 1
    lines[at:at] = [line for line, _, _ in MALFORMED]
    (events_dir / SUCCESS_APP.decode()).write_bytes(b"\n".join(lines))
    config = spark_agent_config(workdir, events_dir)
    with harness.agent(config) as process:
        harness.wait_until("the log finished", lambda: finished(process) == 1)
        assert skipped(process, "malformed_event") == len(MALFORMED)
        assert skipped(process, "corrupt_json") == 0
        end = process.wait_log(
            "eventlog_malformed_event", spark_event="SparkListenerApplicationEnd"
        )
        assert (end["log"], end["field"], end["detail"]) == (
            str(events_dir / SUCCESS_APP.decode()),
            "Timestamp",
            "SparkListenerApplicationEnd without a valid Timestamp: skipped, nothing changed",
        )
        logged = [
            (line["spark_event"], line["field"])
            for line in process.logs()
            if line.get("event") == "eventlog_malformed_event"
        ]
        assert sorted(logged) == sorted((kind, field) for _, kind, field in MALFORMED)
        events = finish(process, workdir)
    assert [harness.unsigned(e) for e in events] == harness.reference_events(clean)
    harness.assert_runs_whole(events)
    insert = "exp_success.execute_insert_into_hadoop_fs_relation_command.data_success_"
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("exp_success", "START"),
        (insert + "parquet", "START"),
        (insert + "parquet", "COMPLETE"),
        (insert + "agg_json", "START"),
        (insert + "agg_json", "COMPLETE"),
        ("exp_success", "COMPLETE"),
    ]


def skip_one_line(
    config: Path, staged: Path, log: Path, at: int, workdir: Path, clean: Path
) -> tuple[int, int]:
    """An agent on `config` reads `staged`, moved to `log`: it skips the line at index `at` as
    too long and says so, and what it emits is `clean`'s events. RSS (before, peak)."""
    with harness.agent(config) as process:
        before = harness.rss_bytes(process.proc.pid)
        staged.rename(log)
        harness.wait_until("the log finished", lambda: finished(process) == 1)
        peak = peak_rss(process.proc.pid)
        assert skipped(process, "too_long") == 1
        line = process.wait_log("eventlog_line_skipped")
        assert (line["log"], line["line"]) == (str(log), at + 1)
        events = finish(process, workdir)
    assert [harness.unsigned(e) for e in events] == harness.reference_events(clean)
    return before, peak


def test_hundred_megabyte_line_is_skipped_in_bounded_memory(workdir: Path) -> None:
    """A 100 MB line is skipped and counted without ever being held; events unchanged."""
    clean, events_dir = clean_and_events(workdir)
    lines = SUCCESS.split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line)
    size = 100 * 1024 * 1024
    huge = b'{"Event":"SparkListenerJobStart","Padding":"' + b"x" * size + b'"}'
    config = spark_agent_config(workdir, events_dir, max_line_bytes=8 * 1024 * 1024)
    staged = workdir / SUCCESS_APP.decode()
    with staged.open("wb") as out:
        out.write(b"\n".join(lines[:at]) + b"\n")
        out.write(huge + b"\n")
        out.write(b"\n".join(lines[at:]))
    del huge
    log = events_dir / SUCCESS_APP.decode()
    before, peak = skip_one_line(config, staged, log, at, workdir, clean)
    # Never the whole line, nor the whole file, in memory: far below 100 MB over the start.
    assert peak - before < 60 * 1024 * 1024, (before, peak)


def test_gigabyte_line_in_a_small_zstd_log_is_skipped_in_bounded_memory(workdir: Path) -> None:
    """A 1 GB line packed into a 32 KB zstd log: skipped, peak RSS within the line bound."""
    clean, events_dir = clean_and_events(workdir)
    lines = SUCCESS.split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line)
    max_line_bytes = 8 * 1024 * 1024
    config = spark_agent_config(workdir, events_dir, max_line_bytes=max_line_bytes)
    staged = workdir / f"{SUCCESS_APP.decode()}.zstd"
    compressor = zstandard.ZstdCompressor(level=1)
    with staged.open("wb") as out:
        out.write(compressor.compress(b"\n".join(lines[:at]) + b"\n"))
        frame = compressor.compressobj()  # one frame, as Spark writes between two flushes
        out.write(frame.compress(b'{"Event":"SparkListenerJobStart","Padding":"'))
        padding = b"x" * (64 * 1024 * 1024)
        for _ in range(16):
            out.write(frame.compress(padding))
        out.write(frame.compress(b'"}\n') + frame.flush())
        del padding
        out.write(compressor.compress(b"\n".join(lines[at:])))
    assert staged.stat().st_size < 256 * 1024
    log = events_dir / staged.name
    before, peak = skip_one_line(config, staged, log, at, workdir, clean)
    # Whatever the ratio, a read holds at most the line bound plus one codec block or so.
    assert peak - before < max_line_bytes + 60 * 1024 * 1024, (before, peak)


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


# -- logs that change under the agent ----------------------------------------------------------


def test_in_progress_log_deleted_while_tailed(workdir: Path) -> None:
    """A tailed in-progress log deleted: its open runs end FAIL, the next log is followed."""
    events_dir = workdir / "events"
    events_dir.mkdir()
    lines = SUCCESS.split(b"\n")
    cut = next(i for i, line in enumerate(lines) if b"SQLExecutionEnd" in line)
    growing = events_dir / (SUCCESS_APP.decode() + ".inprogress")
    growing.write_bytes(b"\n".join(lines[:cut]) + b"\n")
    config = spark_agent_config(workdir, events_dir)
    with harness.agent(config) as process:
        harness.wait_until("two STARTs", lambda: delivered_count(process) >= 2)
        growing.unlink()
        process.wait_log("eventlog_gone", timeout=harness.PATIENCE, log=str(growing))
        harness.settle(process, "file")
        gone = harness.read_jsonl(workdir / "lineage.jsonl")
        other = SUCCESS.replace(SUCCESS_APP, b"local-1795324432999")
        staged = workdir / "local-1795324432999"
        staged.write_bytes(other)
        staged.rename(events_dir / staged.name)  # a complete log appears whole, as Spark's does
        harness.wait_until("the next log finished", lambda: finished(process) == 2)
        events = finish(process, workdir)
    runs = harness.assert_runs_whole(events)
    assert events[: len(gone)] == gone
    terminals = [e for e in gone if e["eventType"] != "START"]
    assert terminals and all(e["eventType"] == "FAIL" for e in terminals)
    assert all(e["run"]["facets"]["errorMessage"]["message"] == ENDED for e in terminals)
    assert len(runs) == len({e["run"]["runId"] for e in gone}) + 3


def delivered_count(process: AgentProcess) -> float:
    return metric(process.scrape(), "lineage_events_delivered_total", transport="file")


@pytest.mark.spark
def test_rolling_log_gains_files_mid_read(spark_logs: SparkLogs, workdir: Path) -> None:
    """A rolling log gaining files mid-read gives exactly the finished log's events."""
    [source] = spark_logs.multi.iterdir()
    name = source.name.removeprefix("eventlog_v2_")
    files = sorted(source.glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    assert len(files) >= 3
    events_dir = workdir / "events"
    rolling = events_dir / source.name
    rolling.mkdir(parents=True)
    (rolling / f"appstatus_{name}.inprogress").touch()
    config = spark_agent_config(workdir, events_dir)
    with harness.agent(config) as process:
        for file in files:
            shutil.copy(file, rolling / file.name)
            time.sleep(0.3)
        (rolling / f"appstatus_{name}.inprogress").rename(rolling / f"appstatus_{name}")
        harness.wait_until("the log finished", lambda: finished(process) == 1)
        events = finish(process, workdir)
    assert [harness.unsigned(e) for e in events] == harness.reference_events(spark_logs.multi)


# -- many logs at once -------------------------------------------------------------------------

MANY = 3000


def small_log(app_id: str, complete: bool) -> bytes:
    """The application lines of a real log under another id: START (and its end when
    complete), the smallest real application there is."""
    wanted: tuple[bytes, ...] = (
        b'{"Event":"SparkListenerLogStart"',
        b'{"Event":"SparkListenerApplicationStart"',
    )
    if complete:
        wanted += (b'{"Event":"SparkListenerApplicationEnd"',)
    lines = [line for line in SUCCESS.split(b"\n") if line.startswith(wanted)]
    return b"\n".join(lines).replace(SUCCESS_APP, app_id.encode()) + b"\n"


def _service_fd_limit() -> None:
    # systemd starts services with a soft limit of 1024 open files.
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 8192))


def test_missing_directory_then_thousands_of_logs_at_once(workdir: Path) -> None:
    """Missing directory, then 3,000 logs at once past 1,024 open files: every event once."""
    staging = workdir / "staging"
    staging.mkdir()
    first = 1795324500000
    complete_ids = {f"local-{first + i}" for i in range(0, MANY, 2)}
    for i in range(MANY):
        app_id = f"local-{first + i}"
        name = app_id if app_id in complete_ids else app_id + ".inprogress"
        (staging / name).write_bytes(small_log(app_id, app_id in complete_ids))
    events_dir = workdir / "events"
    config = spark_agent_config(workdir, events_dir, poll_interval="1s")
    with harness.agent(config, preexec_fn=_service_fd_limit) as process:
        process.wait_log("eventlog_dir_missing", directory=str(events_dir))
        staging.rename(events_dir)
        process.wait_log("eventlog_dir_found", directory=str(events_dir))
        expected = MANY + len(complete_ids)
        samples = harness.settle(process, "file", expected)
        assert metric(samples, "lineage_eventlog_lines_skipped_total", reason="read_error") == 0
        assert metric(samples, "lineage_applications_tracked") == MANY - len(complete_ids)
        harness.assert_healthy(process)
        accounting = harness.stop_and_account(process)
    assert accounting["file"] == {
        "offered": expected,
        "delivered": expected,
        "dropped": 0,
        "unconfirmed": 0,
        "queued": 0,
    }
    events = harness.read_jsonl(workdir / "lineage.jsonl")
    runs: dict[str, list[str]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert len(runs) == MANY
    assert sorted(map(tuple, runs.values())) == sorted(
        [("START", "COMPLETE")] * len(complete_ids) + [("START",)] * (MANY - len(complete_ids))
    )
    harness.check_events(
        events[:: MANY // 20], workdir / "ed25519.key"
    )  # a sample: schema checks cost
