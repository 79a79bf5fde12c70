"""Committed versions read from Delta and Iceberg metadata files on disk (`spark.tablemeta`).

The files are written here in the layouts Delta 4.x and Iceberg 1.x write (one JSON action
per line in `_delta_log/<20 digits>.json`; `metadata/v<N>.metadata.json` of the hadoop
catalog, `metadata/<N>-<uuid>.metadata.json` of the others); `tests/test_lakehouse_live.py`
checks the same against tables real Spark jobs wrote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.spark.tablemeta import DiskTableVersions


def delta_commit(table: Path, version: int, timestamp: int) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    actions = [
        {"commitInfo": {"timestamp": timestamp, "operation": "WRITE", "readVersion": version - 1}},
        {"add": {"path": f"part-{version}.parquet", "size": 1, "dataChange": True}},
    ]
    (log / f"{version:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")


def iceberg_metadata(table: Path, name: str, snapshots: list[tuple[int, int]]) -> None:
    metadata = table / "metadata"
    metadata.mkdir(parents=True, exist_ok=True)
    document = {
        "format-version": 2,
        "current-snapshot-id": snapshots[-1][0] if snapshots else -1,
        "snapshots": [{"snapshot-id": s, "timestamp-ms": t} for s, t in snapshots],
    }
    (metadata / name).write_text(json.dumps(document))


def test_delta_version_committed_inside_the_window(tmp_path: Path) -> None:
    """The newest Delta commit whose commitInfo.timestamp falls in the run is its version;
    none when no commit does."""
    for version, stamp in enumerate((1000, 2000, 3000)):
        delta_commit(tmp_path, version, stamp)
    versions = DiskTableVersions()
    assert versions.committed("delta", str(tmp_path), 1500, 2500) == "1"
    assert versions.committed("delta", str(tmp_path), 1000, 3000) == "2"
    assert versions.committed("delta", str(tmp_path), 3001, 4000) is None
    assert versions.committed("delta", str(tmp_path / "missing"), 0, 4000) is None


def test_iceberg_snapshot_from_the_newest_metadata_file(tmp_path: Path) -> None:
    """The newest metadata file of either naming tells the snapshots; the latest in the
    window is the run's."""
    hadoop = tmp_path / "hadoop"
    iceberg_metadata(hadoop, "v1.metadata.json", [(11, 1000)])
    iceberg_metadata(hadoop, "v2.metadata.json", [(11, 1000), (22, 2000)])
    jdbc = tmp_path / "jdbc"
    iceberg_metadata(jdbc, "00000-6b1e-4c1a.metadata.json", [(7, 500)])
    iceberg_metadata(jdbc, "00001-9f2e-4d3b.metadata.json", [(7, 500), (8, 900), (9, 950)])
    versions = DiskTableVersions()
    assert versions.committed("iceberg", str(hadoop), 1500, 2500) == "22"
    assert versions.committed("iceberg", str(hadoop), 900, 1100) == "11"
    assert versions.committed("iceberg", str(jdbc), 800, 1000) == "9"
    assert versions.committed("iceberg", str(jdbc), 1000, 2000) is None


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A commit file that is a link or a FIFO, or a metadata file that is no JSON, tells
    nothing and raises nothing."""
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"commitInfo": {"timestamp": 1500}}))
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").symlink_to(outside)
    os.mkfifo(log / f"{1:020d}.json")
    versions = DiskTableVersions()
    assert versions.committed("delta", str(tmp_path / "t"), 0, 5000) is None
    broken = tmp_path / "broken" / "metadata"
    broken.mkdir(parents=True)
    (broken / "v1.metadata.json").write_text("{not json")
    assert versions.committed("iceberg", str(tmp_path / "broken"), 0, 5000) is None


def test_a_table_exists_where_its_metadata_is(tmp_path: Path) -> None:
    """A directory holds an Iceberg table when `metadata/` has a metadata file of either
    naming, a Delta table when `_delta_log/` has a commit; anything else holds none."""
    iceberg_metadata(tmp_path / "hadoop", "v1.metadata.json", [])
    iceberg_metadata(tmp_path / "jdbc", "00000-6b1e-4c1a.metadata.json", [])
    delta_commit(tmp_path / "delta", 0, 1000)
    (tmp_path / "empty" / "metadata").mkdir(parents=True)
    (tmp_path / "empty" / "metadata" / "snap-1.avro").write_bytes(b"")
    versions = DiskTableVersions()
    assert versions.exists("iceberg", str(tmp_path / "hadoop"))
    assert versions.exists("iceberg", str(tmp_path / "jdbc"))
    assert versions.exists("delta", str(tmp_path / "delta"))
    assert not versions.exists("iceberg", str(tmp_path / "delta"))
    assert not versions.exists("iceberg", str(tmp_path / "empty"))
    assert not versions.exists("iceberg", str(tmp_path / "missing"))
    (tmp_path / "link").symlink_to(tmp_path / "hadoop" / "metadata")
    os.mkdir(tmp_path / "linked")
    (tmp_path / "linked" / "metadata").symlink_to(tmp_path / "hadoop" / "metadata")
    assert not versions.exists("iceberg", str(tmp_path / "linked"))
