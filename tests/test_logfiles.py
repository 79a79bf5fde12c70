"""Discovery of Spark applications in event-log directories, both layouts."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from agent.spark.eventlog.discovery import listing, restat, scan
from agent.spark.eventlog.layout import LogRef, parse_single_name
from tests.spark_logs import CODECS, LAYOUTS, SparkLogs, event_files, session_spark_logs

APP = "application_1700000000000_0001"


@pytest.fixture(scope="session")
def spark_logs(tmp_path_factory: pytest.TempPathFactory) -> SparkLogs:
    """The session's real Spark event logs."""
    return session_spark_logs(tmp_path_factory)


def touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def rolling(
    root: Path,
    name: str,
    indices: list[int],
    *,
    codec: str = "zstd",
    status: str | None = ".inprogress",
) -> Path:
    """A rolling log directory as Spark lays it out (contents are not read by discovery)."""
    directory = root / f"eventlog_v2_{name}"
    directory.mkdir(parents=True)
    suffix = "" if codec == "none" else f".{codec}"
    for index in indices:
        touch(directory / f"events_{index}_{name}{suffix}", b"e" * index)
    if status is not None:
        touch(directory / f"appstatus_{name}{status}", b"")
    return directory


def summary(refs: list[LogRef]) -> list[tuple[str, str, str, bool, list[int], str | None]]:
    return [
        (r.key, r.layout, r.codec, r.complete, [f.index for f in r.files], r.error) for r in refs
    ]


@pytest.mark.spark
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", CODECS)
def test_scan_finds_real_logs(spark_logs: SparkLogs, layout: str, codec: str) -> None:
    """A real log of each layout and codec is one complete LogRef keyed by its app id."""
    directory = spark_logs.directory(layout, codec)
    (ref,) = scan(directory)
    files = event_files(directory)
    assert ref.error is None
    assert (ref.key, ref.layout, ref.codec, ref.complete) == (
        spark_logs.app_ids[f"{layout}-{codec}"],
        layout,
        codec,
        True,
    )
    assert ref.paths == tuple(str(p) for p in files)
    assert ref.size == sum(p.stat().st_size for p in files)
    assert ref.mtime_ns >= max(p.stat().st_mtime_ns for p in files)


@pytest.mark.spark
def test_scan_orders_the_files_of_a_rolled_over_log(spark_logs: SparkLogs) -> None:
    """A log that rolled over lists events_1, events_2, ... in index order."""
    (ref,) = scan(spark_logs.multi)
    assert [f.index for f in ref.files] == list(range(1, len(ref.files) + 1))
    assert len(ref.files) >= 2
    assert ref.paths == tuple(str(p) for p in event_files(spark_logs.multi))


def test_both_layouts_attempt_ids_and_ignored_files(tmp_path: Path) -> None:
    """Single files and rolling directories, with and without attempt ids and codecs, are
    found; dot-files and .crc files are not applications."""
    touch(tmp_path / f"{APP}_1.zstd")
    touch(tmp_path / f".{APP}_1.zstd.crc")
    touch(tmp_path / f"{APP}_2.lz4.inprogress")
    touch(tmp_path / "local-1700000000001")
    touch(tmp_path / "local-1700000000001.crc")
    touch(tmp_path / ".hidden")
    directory = rolling(tmp_path, "application_1700000000000_0002_1", [2, 1])
    touch(directory / ".events_1_application_1700000000000_0002_1.zstd.crc")
    touch(directory / ".appstatus_application_1700000000000_0002_1.inprogress.crc")
    rolling(tmp_path, "local-1700000000002", [1], codec="none", status="")
    assert summary(scan(tmp_path)) == [
        (f"{APP}_1", "single", "zstd", True, [0], None),
        (f"{APP}_2", "single", "lz4", False, [0], None),
        ("application_1700000000000_0002_1", "rolling", "zstd", False, [1, 2], None),
        ("local-1700000000001", "single", "none", True, [0], None),
        ("local-1700000000002", "rolling", "none", True, [1], None),
    ]


def test_rolling_sizes_and_paths(tmp_path: Path) -> None:
    """A rolling LogRef sums its event files' sizes and keeps their paths in order."""
    directory = rolling(tmp_path, "local-1", [1, 2, 3], status="")
    (ref,) = scan(tmp_path)
    assert ref.size == 1 + 2 + 3
    assert ref.path == str(directory)
    assert ref.paths == tuple(str(directory / f"events_{i}_local-1.zstd") for i in (1, 2, 3))


def test_problems_are_per_application(tmp_path: Path) -> None:
    """Broken rolling directories each give a LogRef with an error, and the healthy
    application beside them is still found; names Spark does not write (an unknown codec, a
    malformed events file, a stray directory) are left out, not errors."""
    touch(tmp_path / "local-1.gz")
    touch(tmp_path / "local-2.zstd.inprogress")
    rolling(tmp_path, "local-3", [1], codec="brotli")
    rolling(tmp_path, "local-4", [1], status=None)
    rolling(tmp_path, "local-5", [1, 3])
    rolling(tmp_path, "local-6", [], status="")
    directory = rolling(tmp_path, "local-7", [1])
    touch(directory / "events_2_local-7.lz4")
    rolling(tmp_path, "local-8", [1])
    touch(tmp_path / "eventlog_v2_local-8" / "events_x_local-8.zstd")
    (tmp_path / "spark-warehouse").mkdir()
    found = listing(tmp_path)
    assert summary(found.refs) == [
        ("local-2", "single", "zstd", False, [0], None),
        ("local-3", "rolling", "none", False, [], None),
        ("local-4", "rolling", "zstd", False, [], "no appstatus file"),
        ("local-5", "rolling", "zstd", False, [], "event files are not contiguous: indices [1, 3]"),
        ("local-6", "rolling", "none", False, [], "complete, but no event files"),
        ("local-7", "rolling", "none", False, [], "event files use different codecs: lz4, zstd"),
        ("local-8", "rolling", "zstd", False, [1], None),
    ]
    assert sorted(found.ignored) == sorted(
        str(p)
        for p in (
            tmp_path / "local-1.gz",
            tmp_path / "eventlog_v2_local-3" / "events_1_local-3.brotli",
            tmp_path / "eventlog_v2_local-8" / "events_x_local-8.zstd",
            tmp_path / "spark-warehouse",
        )
    )


def test_rolling_directory_before_its_first_file(tmp_path: Path) -> None:
    """A rolling directory Spark has just created is an in-progress log with no files yet
    once its appstatus file is there; before, it holds nothing Spark wrote and is no
    application yet."""
    (tmp_path / "eventlog_v2_local-1").mkdir()
    rolling(tmp_path, "local-2", [])
    assert summary(scan(tmp_path)) == [("local-2", "rolling", "none", False, [], None)]


def test_compact_file_replaces_the_files_before_it(tmp_path: Path) -> None:
    """Reading starts at the last .compact file; plain files it replaced are left out."""
    directory = rolling(tmp_path, "local-1", [2, 3, 4, 5], status="")
    touch(directory / "events_1_local-1.zstd.compact")
    touch(directory / "events_3_local-1.zstd.compact")
    (ref,) = scan(tmp_path)
    assert ref.error is None
    assert ref.compacted
    assert [(f.index, f.compacted) for f in ref.files] == [(3, True), (4, False), (5, False)]
    assert ref.codec == "zstd"


def test_one_ref_per_key(tmp_path: Path) -> None:
    """Both names of a single file seen during its rename give the complete one; a rolling
    directory and a single file of one application are a conflict."""
    touch(tmp_path / "local-1.zstd.inprogress")
    touch(tmp_path / "local-1.zstd")
    touch(tmp_path / "local-2.zstd")
    rolling(tmp_path, "local-2", [1])
    refs = scan(tmp_path)
    assert summary(refs)[0] == ("local-1", "single", "zstd", True, [0], None)
    assert refs[1].error == (
        f"two event logs for one application: {tmp_path / 'eventlog_v2_local-2'} and "
        f"{tmp_path / 'local-2.zstd'}"
    )


def test_restat_follows_the_completion_rename(tmp_path: Path) -> None:
    """restat finds a renamed single file by its final name (same inode), and None once the
    file is removed."""
    path = touch(tmp_path / "local-1.lz4.inprogress", b"abc")
    (ref,) = scan(tmp_path)
    path.rename(tmp_path / "local-1.lz4")
    fresh = restat(ref)
    assert fresh is not None
    assert (fresh.complete, fresh.path, fresh.files[0].ino) == (
        True,
        str(tmp_path / "local-1.lz4"),
        ref.files[0].ino,
    )
    (tmp_path / "local-1.lz4").unlink()
    assert restat(ref) is None


def test_restat_sees_new_rolling_files_and_completion(tmp_path: Path) -> None:
    """restat of a rolling log lists files added since, sees the appstatus rename, and
    returns None once the directory is gone."""
    directory = rolling(tmp_path, "local-1", [1])
    (ref,) = scan(tmp_path)
    assert not ref.complete
    touch(directory / "events_2_local-1.zstd")
    (directory / "appstatus_local-1.inprogress").rename(directory / "appstatus_local-1")
    fresh = restat(ref)
    assert fresh is not None
    assert (fresh.complete, [f.index for f in fresh.files]) == (True, [1, 2])
    shutil.rmtree(directory)
    assert restat(ref) is None


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("local-1", ("local-1", "none", False, False)),
        ("local-1.inprogress", ("local-1", "none", True, False)),
        ("local-1.zstd", ("local-1", "zstd", False, False)),
        ("local-1.lzf.inprogress", ("local-1", "lzf", True, False)),
        (f"{APP}_1.snappy", (f"{APP}_1", "snappy", False, False)),
        ("local-1.zstd.compact", ("local-1", "zstd", False, True)),
        ("local-1.tar.gz", ("local-1", "tar.gz", False, False)),
    ],
)
def test_parse_single_name(name: str, parsed: tuple[str, str, bool, bool]) -> None:
    """A single-file name splits into key, codec, in-progress and compacted flags."""
    assert parse_single_name(name) == parsed


def test_scan_of_thousands_of_applications_is_cheap(tmp_path: Path) -> None:
    """3000 single files and 300 rolling directories scan in well under the 5 s bound (CPU
    time: a busy machine does not lengthen it)."""
    for i in range(3000):
        touch(tmp_path / f"local-{i}.zstd")
    for i in range(300):
        rolling(tmp_path, f"app-20261127161443-{i:04d}", [1, 2], status="")
    started = time.thread_time()
    refs = scan(tmp_path)
    took = time.thread_time() - started
    assert len(refs) == 3300
    assert all(r.error is None and r.complete for r in refs)
    assert took < 5.0, f"scan took {took:.2f} s"


def test_missing_directory_raises(tmp_path: Path) -> None:
    """Only an unusable top directory raises, since then nothing can be scanned."""
    with pytest.raises(FileNotFoundError):
        scan(tmp_path / "absent")
