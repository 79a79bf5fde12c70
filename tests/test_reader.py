"""Tailing real and growing Spark event logs: lines, files, renames, damage, resuming."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.spark.eventlog.codecs import decoder_for
from agent.spark.eventlog.discovery import scan
from agent.spark.eventlog.layout import LogRef
from agent.spark.eventlog.reader import LogReader, Position, ReadError, SkippedLine
from tests.spark_logs import (
    LAYOUTS,
    LZF_MISSING,
    SparkLogs,
    codec_params,
    event_files,
    running_app,
    session_spark_logs,
)
from tests.test_codecs import BAD_AT, GARBAGE

ROOT = Path(__file__).resolve().parents[1]
BIG = 64 * 1024 * 1024
COMPRESSED = ("zstd", "lz4", "snappy", "lzf")


@pytest.fixture(scope="session")
def spark_logs(tmp_path_factory: pytest.TempPathFactory) -> SparkLogs:
    """The session's real Spark event logs."""
    return session_spark_logs(tmp_path_factory)


def decoded_lines(path: Path, codec: str) -> list[bytes]:
    """The lines of one event file, decoded in one piece (the codecs are tested apart)."""
    decoder = decoder_for(codec)
    data = decoder.feed(path.read_bytes())
    decoder.finish()
    lines = data.split(b"\n")
    assert lines.pop() == b""
    return lines


def only(directory: Path) -> LogRef:
    (ref,) = scan(directory)
    return ref


def read_all(reader: LogReader) -> list[bytes]:
    lines = reader.read_available()
    while not reader.caught_up:
        lines += reader.read_available()
    return lines


def poll(
    reader: LogReader,
    lines: list[bytes],
    done: Callable[[], bool],
    what: str,
    timeout: float = 90.0,
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {timeout} s")
        time.sleep(0.2)
        lines += read_all(reader)


def events(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["Event"] for line in lines]


# -- real logs -------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", codec_params())
def test_reads_every_real_log_completely(spark_logs: SparkLogs, layout: str, codec: str) -> None:
    """Each layout x codec reads to the same lines as decoding the file whole, then the
    reader is exhausted, read every compressed byte once, and returns nothing more."""
    directory = spark_logs.directory(layout, codec)
    (path,) = event_files(directory)
    ref = only(directory)
    reader = LogReader(ref, max_line_bytes=BIG)
    lines = read_all(reader)
    assert lines == decoded_lines(path, codec)
    if codec == "none":
        assert lines == path.read_bytes().split(b"\n")[:-1]
    assert (reader.complete, reader.exhausted, reader.caught_up, reader.gone) == (
        True,
        True,
        True,
        False,
    )
    assert reader.bytes_read == ref.size
    assert reader.take_errors() == [] and reader.take_skipped() == []
    position = reader.position
    assert position is not None
    assert (position.clean, position.consumed, position.lines) == (True, ref.size, len(lines))
    assert reader.read_available() == []


@pytest.mark.spark
def test_follows_a_rolled_over_log_across_files(spark_logs: SparkLogs) -> None:
    """A log of several events_N files reads as their lines in order, in bounded batches."""
    files = event_files(spark_logs.multi)
    ref = only(spark_logs.multi)
    reader = LogReader(ref, max_line_bytes=BIG)
    batches = []
    while not reader.exhausted:
        batches.append(reader.read_available(max_bytes=4 * 1024 * 1024))
    assert len(batches) > 2  # the batch bound cut the reading up
    assert [line for batch in batches for line in batch] == [
        line for path in files for line in decoded_lines(path, "zstd")
    ]
    assert reader.bytes_read == ref.size


@pytest.mark.spark
def test_overlong_lines_are_skipped_with_file_and_line_number(spark_logs: SparkLogs) -> None:
    """Lines longer than max_line_bytes are skipped, counted and listed by file and line."""
    limit = 1024 * 1024
    reader = LogReader(only(spark_logs.multi), max_line_bytes=limit)
    kept: list[bytes] = []
    skipped: list[SkippedLine] = []
    for path in event_files(spark_logs.multi):
        for number, line in enumerate(decoded_lines(path, "zstd"), start=1):
            if len(line) > limit:
                reason = f"line longer than max_line_bytes ({limit})"
                skipped.append(SkippedLine(str(path), number, reason))
            else:
                kept.append(line)
    assert len(skipped) >= 4  # the padded JobStart and StageSubmitted events
    assert read_all(reader) == kept
    assert reader.take_skipped() == skipped
    assert reader.skipped_long_lines == len(skipped)
    assert reader.take_skipped() == []


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.integers(min_value=1, max_value=20_000), min_size=1, max_size=30))
def test_growing_real_log_is_read_as_it_grows(
    spark_logs: SparkLogs, codec: str, pieces: list[int]
) -> None:
    """A real log appended in random pieces, then renamed at completion, is read in full,
    each line once, without reading any byte twice."""
    (source,) = event_files(spark_logs.directory("single", codec))
    data = source.read_bytes()
    with tempfile.TemporaryDirectory() as work:
        growing = Path(work) / f"{source.name}.inprogress"
        growing.write_bytes(b"")
        reader = LogReader(only(Path(work)), max_line_bytes=BIG)
        lines: list[bytes] = []
        pos, turn = 0, 0
        with growing.open("ab") as out:
            while pos < len(data):
                size = pieces[turn % len(pieces)]
                out.write(data[pos : pos + size])
                out.flush()
                pos, turn = pos + size, turn + 1
                lines += read_all(reader)
                assert not reader.complete
        growing.rename(Path(work) / source.name)
        lines += read_all(reader)
        reader.close()
    assert lines == decoded_lines(source, codec)
    assert reader.exhausted
    assert reader.bytes_read == len(data)
    assert reader.take_errors() == []


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params())
def test_resuming_from_a_position_neither_loses_nor_repeats(
    spark_logs: SparkLogs, codec: str, tmp_path: Path
) -> None:
    """A reader started at another reader's position returns exactly the remaining lines; from
    a clean position it reads none of the earlier bytes again."""
    (source,) = event_files(spark_logs.directory("single", codec))
    data = source.read_bytes()
    growing = tmp_path / f"{source.name}.inprogress"
    growing.write_bytes(b"")
    first = LogReader(only(tmp_path), max_line_bytes=BIG)
    taken: list[tuple[Position, int]] = []
    lines: list[bytes] = []
    step = len(data) // 9 + 1
    for pos in range(0, len(data), step):
        with growing.open("ab") as out:
            out.write(data[pos : pos + step])
        lines += read_all(first)
        position = first.position
        assert position is not None
        taken.append((position, len(lines)))
    growing.rename(tmp_path / source.name)
    expected = decoded_lines(source, codec)
    assert taken[-1][0].clean  # Spark's last bytes end a block and a line
    for position, seen in taken:
        second = LogReader(only(tmp_path), start=position, max_line_bytes=BIG)
        assert lines[:seen] + read_all(second) == expected
        assert second.exhausted
        if position.clean:
            assert second.bytes_read == len(data) - position.offset
        elif codec == "none":  # seeks to the end of the last consumed line
            assert second.bytes_read == len(data) - position.decoded
        second.close()


def test_position_of_a_replaced_file_starts_over(tmp_path: Path) -> None:
    """A position whose inode no longer matches is ignored: the log is read from its start."""
    path = tmp_path / "local-1"
    path.write_bytes(b"a\nb\n")
    first = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert read_all(first) == [b"a", b"b"]
    position = first.position
    first.close()
    replacement = tmp_path / ".replacement"  # exists beside the old file: another inode
    replacement.write_bytes(b"c\nd\n")
    replacement.rename(path)
    second = LogReader(only(tmp_path), start=position, max_line_bytes=BIG)
    assert read_all(second) == [b"c", b"d"]


# -- lines -------------------------------------------------------------------------------------


def test_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    """The end of a line without its newline is held back until the rest is written."""
    path = tmp_path / "local-1.inprogress"
    path.write_bytes(b'{"a":1}\n{"b"')
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert reader.read_available() == [b'{"a":1}']
    assert reader.read_available() == []
    with path.open("ab") as out:
        out.write(b":2}")
    assert reader.read_available() == []
    position = reader.position
    assert position is not None and not position.clean
    assert (position.decoded, position.lines) == (8, 1)
    with path.open("ab") as out:
        out.write(b"\n")
    assert reader.read_available() == [b'{"b":2}']
    assert not reader.exhausted and reader.caught_up


def test_line_limit_is_exact_across_tiny_reads(tmp_path: Path) -> None:
    """With 3-byte reads, a line of max_line_bytes is kept and one byte more is skipped,
    also for an unterminated last line of a complete log."""
    path = tmp_path / "local-1"
    path.write_bytes(b"aaaaa\nbbbbbb\nccccc\n\ndddddd")
    reader = LogReader(only(tmp_path), max_line_bytes=5, read_size=3)
    assert read_all(reader) == [b"aaaaa", b"ccccc", b""]
    reason = "line longer than max_line_bytes (5)"
    assert reader.take_skipped() == [
        SkippedLine(str(path), 2, reason),
        SkippedLine(str(path), 5, reason),
    ]
    assert reader.exhausted
    position = reader.position
    assert position is not None and (position.lines, position.decoded) == (5, 26)


def test_unterminated_last_line_of_a_complete_log_is_returned(tmp_path: Path) -> None:
    """When the log is complete, a last line without newline is returned too."""
    (tmp_path / "local-1").write_bytes(b"a\nb")
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert read_all(reader) == [b"a", b"b"]
    assert reader.exhausted


def test_batches_stop_at_max_bytes_and_resume(tmp_path: Path) -> None:
    """read_available stops near max_bytes with caught_up False; the next call goes on."""
    lines = [b"%04d" % i + b"x" * 1000 for i in range(2000)]
    (tmp_path / "local-1").write_bytes(b"\n".join(lines) + b"\n")
    reader = LogReader(only(tmp_path), max_line_bytes=BIG, read_size=64 * 1024)
    first = reader.read_available(max_bytes=100_000)
    assert not reader.caught_up
    assert 0 < len(first) < 200
    assert first + read_all(reader) == lines


def test_max_line_bytes_must_be_positive(tmp_path: Path) -> None:
    """A reader without room for any line is a programming error, said plainly."""
    (tmp_path / "local-1").write_bytes(b"")
    with pytest.raises(ValueError) as caught:
        LogReader(only(tmp_path), max_line_bytes=0)
    assert str(caught.value) == "max_line_bytes must be >= 1, got 0"


# Peak memory of the reading process. VmHWM, not ru_maxrss: Linux carries ru_maxrss over
# from the parent across exec, so a child of a big test process would inherit its peak.
MEMORY_PROBE = """
import json, sys
from agent.spark.eventlog.discovery import scan
from agent.spark.eventlog.reader import LogReader

def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))

(ref,) = scan(sys.argv[1])
reader = LogReader(ref, max_line_bytes=int(sys.argv[2]))
before = peak_kib()
lines = []
while not reader.exhausted:
    lines += reader.read_available()
print(json.dumps({"grew_kib": peak_kib() - before, "lines": [len(l) for l in lines],
                  "skipped": [[s.line_no, s.reason] for s in reader.take_skipped()]}))
"""


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_hundred_megabyte_line_is_skipped_in_bounded_memory(tmp_path: Path, codec: str) -> None:
    """A 100 MB line is skipped with its line number while the reading process's peak memory
    grows by far less than the line; held whole (a limit above it) it grows by more."""
    line = b'{"Event":"big","x":"' + base64.b64encode(os.urandom(75_000_000)) + b'"}'
    data = b'{"Event":"a"}\n' + line + b'\n{"Event":"b"}\n'
    if codec == "zstd":  # one frame, written in pieces, as Spark's writer does for a long line
        compressor = zstandard.ZstdCompressor().compressobj()
        data = compressor.compress(data) + compressor.flush()
    name = "local-1" if codec == "none" else f"local-1.{codec}"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / name).write_bytes(data)
    del data, line

    def probe(max_line_bytes: int) -> dict[str, object]:
        result = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE, str(tmp_path / "logs"), str(max_line_bytes)],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=300,
        )
        report: dict[str, object] = json.loads(result.stdout)
        return report

    bounded = probe(1024 * 1024)
    assert bounded["lines"] == [13, 13]
    assert bounded["skipped"] == [[2, "line longer than max_line_bytes (1048576)"]]
    assert isinstance(bounded["grew_kib"], int) and bounded["grew_kib"] < 30 * 1024
    whole = probe(200 * 1024 * 1024)  # the measurement can see a line held in memory
    assert isinstance(whole["grew_kib"], int) and whole["grew_kib"] > 100 * 1024


# Current memory of a process reading many logs in a row, each closed at its end, with the
# cyclic garbage collector off, as between two of its runs in the daemon.
MANY_LOGS_PROBE = """
import gc, json, sys
from agent.spark.eventlog.discovery import scan
from agent.spark.eventlog.reader import LogReader

def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS:"))

gc.disable()
refs = scan(sys.argv[1])
before = rss_kib()
for ref in refs:
    reader = LogReader(ref, max_line_bytes=1 << 20)
    while not reader.exhausted:
        reader.read_available()
    reader.close()
    del reader
print(json.dumps({"logs": len(refs), "grew_kib": rss_kib() - before}))
"""


def test_closed_readers_free_their_decoders_at_once(tmp_path: Path) -> None:
    """Reading 300 zstd logs in a row, closing each, holds no decoder's window (libzstd keeps
    512 KiB for Spark's level-1 streams) waiting for the garbage collector: memory grows by
    less than 16 MiB, where 300 kept windows would take about 150 MiB."""
    text = b"".join(b'{"Event":"e","n":%d,"pad":"%s"}\n' % (n, b"x" * 200) for n in range(2000))
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in range(300):
        stream = zstandard.ZstdCompressor(level=1).compressobj()  # no content size, as Spark
        (logs / f"local-{n}.zstd").write_bytes(stream.compress(text) + stream.flush())
    result = subprocess.run(
        [sys.executable, "-c", MANY_LOGS_PROBE, str(logs)],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=300,
    )
    report = json.loads(result.stdout)
    assert report["logs"] == 300
    assert report["grew_kib"] < 16 * 1024


# -- files ---------------------------------------------------------------------------------------


def test_single_file_rename_is_followed_without_rereading(tmp_path: Path) -> None:
    """The open in-progress file is read on after Spark renames it: same inode, every byte
    read once, and the reader then knows the final path."""
    compressor = zstandard.ZstdCompressor()
    growing = tmp_path / "local-1.zstd.inprogress"
    growing.write_bytes(compressor.compress(b"one\ntwo\n"))
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert reader.read_available() == [b"one", b"two"]
    with growing.open("ab") as out:
        out.write(compressor.compress(b"three\n"))
    growing.rename(tmp_path / "local-1.zstd")
    assert read_all(reader) == [b"three"]
    assert reader.exhausted and reader.complete
    assert reader.bytes_read == (tmp_path / "local-1.zstd").stat().st_size
    position = reader.position
    assert position is not None and position.path == str(tmp_path / "local-1.zstd")


def test_rolling_log_moves_to_the_next_file_and_completes(tmp_path: Path) -> None:
    """events_1 is read to its end once events_2 exists (its last bytes may land just before
    events_2 appears), then events_2, and the appstatus rename completes the log."""
    compressor = zstandard.ZstdCompressor()
    directory = tmp_path / "eventlog_v2_local-1"
    directory.mkdir()
    (directory / "appstatus_local-1.inprogress").write_bytes(b"")
    first = directory / "events_1_local-1.zstd"
    first.write_bytes(compressor.compress(b"a\n"))
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert read_all(reader) == [b"a"]
    with first.open("ab") as out:
        out.write(compressor.compress(b"b\n"))
    (directory / "events_2_local-1.zstd").write_bytes(compressor.compress(b"c\n"))
    assert read_all(reader) == [b"b", b"c"]
    assert not reader.complete
    (directory / "appstatus_local-1.inprogress").rename(directory / "appstatus_local-1")
    assert read_all(reader) == []
    assert reader.exhausted
    position = reader.position
    assert position is not None and position.index == 2
    assert position.consumed == reader.bytes_read == only(tmp_path).size


def test_deleted_logs_are_gone_without_an_exception(tmp_path: Path) -> None:
    """A single file or rolling directory removed while tailed sets `gone`; nothing raises."""
    single = tmp_path / "local-1.inprogress"
    single.write_bytes(b"a\n")
    directory = tmp_path / "eventlog_v2_local-2"
    directory.mkdir()
    (directory / "appstatus_local-2.inprogress").write_bytes(b"")
    (directory / "events_1_local-2").write_bytes(b"b\n")
    readers = [LogReader(ref, max_line_bytes=BIG) for ref in scan(tmp_path)]
    assert [read_all(r) for r in readers] == [[b"a"], [b"b"]]
    single.unlink()
    shutil.rmtree(directory)
    assert [read_all(r) for r in readers] == [[], []]
    assert [r.gone for r in readers] == [True, True]
    assert [r.exhausted for r in readers] == [False, False]


def test_unreadable_application_is_a_read_error(tmp_path: Path) -> None:
    """A log listed with an error (here a rolling log without appstatus) gives a ReadError
    once, no lines."""
    (tmp_path / "eventlog_v2_local-1").mkdir()
    (tmp_path / "eventlog_v2_local-1" / "events_1_local-1").write_bytes(b"{}\n")
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert reader.read_available() == []
    assert reader.read_available() == []
    assert reader.take_errors() == [
        ReadError(str(tmp_path / "eventlog_v2_local-1"), 0, "no appstatus file")
    ]


# -- damage --------------------------------------------------------------------------------------


TRAILING = {"none": None, **BAD_AT}


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_garbage_after_a_real_log_is_a_read_error(
    spark_logs: SparkLogs, codec: str, tmp_path: Path
) -> None:
    """Garbage after a real log's last block: every line is returned, then one ReadError
    naming the offset; nothing raises and the complete log counts as exhausted."""
    (source,) = event_files(spark_logs.directory("single", codec))
    data = source.read_bytes()
    (tmp_path / source.name).write_bytes(data + GARBAGE)
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert read_all(reader) == decoded_lines(source, codec)
    detail = str(TRAILING[codec]).format(at=len(data))
    assert reader.take_errors() == [ReadError(str(tmp_path / source.name), len(data), detail)]
    assert reader.exhausted
    assert reader.read_available() == []


@pytest.mark.spark
@pytest.mark.parametrize("codec", codec_params(COMPRESSED))
def test_truncated_real_log_returns_the_lines_before_the_cut(
    spark_logs: SparkLogs, codec: str, tmp_path: Path
) -> None:
    """A complete log cut mid-block returns the whole lines before the cut, then reports
    that the stream ended inside a block."""
    (source,) = event_files(spark_logs.directory("single", codec))
    data = source.read_bytes()
    cut = len(data) // 2 + 7
    (tmp_path / source.name).write_bytes(data[:cut])
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    lines = read_all(reader)
    expected = decoded_lines(source, codec)
    assert 0 < len(lines) < len(expected)
    assert lines == expected[: len(lines)]
    (error,) = reader.take_errors()
    assert (error.path, error.offset) == (str(tmp_path / source.name), cut)
    assert error.detail.startswith(f"{codec}: stream ends inside ")
    assert reader.exhausted


def test_corrupt_file_of_a_rolling_log_is_left_for_the_next(tmp_path: Path) -> None:
    """A damaged events_1 keeps its lines before the damage; events_2 is still read."""
    compressor = zstandard.ZstdCompressor()
    directory = tmp_path / "eventlog_v2_local-1"
    directory.mkdir()
    (directory / "appstatus_local-1").write_bytes(b"")
    good = compressor.compress(b"a\nb\n")
    (directory / "events_1_local-1.zstd").write_bytes(good + GARBAGE + compressor.compress(b"x\n"))
    (directory / "events_2_local-1.zstd").write_bytes(compressor.compress(b"c\n"))
    reader = LogReader(only(tmp_path), max_line_bytes=BIG)
    assert read_all(reader) == [b"a", b"b", b"c"]
    assert reader.take_errors() == [
        ReadError(
            str(directory / "events_1_local-1.zstd"),
            len(good),
            f"zstd: bad frame magic 0x62726167 at byte {len(good)}",
        )
    ]
    assert reader.exhausted


@pytest.mark.spark
@pytest.mark.skipif(not LZF_MISSING, reason="the lzf module is installed")
def test_lzf_log_without_its_module_is_a_read_error(spark_logs: SparkLogs) -> None:
    """Without python-lzf an lzf log is a per-application ReadError, not an exception."""
    (source,) = event_files(spark_logs.directory("single", "lzf"))
    reader = LogReader(only(spark_logs.directory("single", "lzf")), max_line_bytes=BIG)
    assert read_all(reader) == []
    assert reader.take_errors() == [
        ReadError(
            str(source),
            0,
            "lzf: decoding needs the python-lzf package (module 'lzf'), which is not installed",
        )
    ]


# -- live applications ---------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(("layout", "codec"), [("rolling", "zstd"), ("single", "snappy")])
def test_running_application_is_read_while_it_runs(tmp_path: Path, layout: str, codec: str) -> None:
    """A live application's JobStart is read while the job still runs; after spark.stop the
    reader follows the completion (appstatus or file rename) and has read every line once."""
    with running_app(tmp_path, layout, codec) as app:
        reader = LogReader(only(app.event_dir), max_line_bytes=BIG)
        lines = read_all(reader)
        app.signal("go-job")
        poll(reader, lines, lambda: "SparkListenerJobStart" in events(lines), "JobStart")
        assert not reader.complete
        assert "SparkListenerApplicationEnd" not in events(lines)
        app.signal("release")
        app.wait("job-done")
        app.signal("go-stop")
        app.wait("stopped")
        poll(reader, lines, lambda: reader.exhausted, "completion")
        assert app.process.wait(timeout=60) == 0
    ref = only(app.event_dir)
    assert ref.complete
    assert lines == [line for path in ref.paths for line in decoded_lines(Path(path), codec)]
    assert events(lines)[-1] == "SparkListenerApplicationEnd"
    assert reader.bytes_read == ref.size
    assert reader.take_errors() == []


def test_rolling_file_removed_before_it_was_read(tmp_path: Path) -> None:
    """An events_N file removed between listing and reading is a ReadError; the files after
    it are still read."""
    directory = tmp_path / "eventlog_v2_local-1"
    directory.mkdir()
    (directory / "appstatus_local-1").write_bytes(b"")
    (directory / "events_1_local-1").write_bytes(b"a\n")
    (directory / "events_2_local-1").write_bytes(b"b\n")
    ref = only(tmp_path)
    (directory / "events_1_local-1").unlink()
    reader = LogReader(ref, max_line_bytes=BIG)
    assert read_all(reader) == [b"b"]
    assert reader.take_errors() == [
        ReadError(str(directory / "events_1_local-1"), 0, "removed before it could be read")
    ]
    assert reader.exhausted and not reader.gone
