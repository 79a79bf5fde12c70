"""What the translator writes survives Marquez: no nulls, times as Java's formatter writes them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.commands.replay import replay
from agent.spark.translate.facets.events import MAX_MS, iso
from tests.applog import unpacked
from tests.identity import fixture_logs
from tests.marquez import instant, java_offset_date_time
from tests.olschema import validate_run_event


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1, "1970-01-01T00:00:00.001Z"),
        (10, "1970-01-01T00:00:00.01Z"),
        (100, "1970-01-01T00:00:00.1Z"),
        (1_000, "1970-01-01T00:00:01Z"),
        (1_795_495_185_220, "2026-11-24T04:39:45.22Z"),
        (1_795_495_194_890, "2026-11-24T04:39:54.89Z"),
        (1_795_495_185_597, "2026-11-24T04:39:45.597Z"),
        (1_795_495_620_000, "2026-11-24T04:47:00Z"),
        (MAX_MS, "9999-12-31T23:59:59.999Z"),
        (-5, "1970-01-01T00:00:00Z"),
        (MAX_MS + 1, "9999-12-31T23:59:59.999Z"),
    ],
)
def test_event_time_is_written_as_javas_iso_offset_date_time(ms: int, text: str) -> None:
    """Milliseconds without trailing zeros, none when zero, seconds always, `Z`; clamped to
    the years 1970 to 9999."""
    assert iso(ms) == text


@given(st.integers(min_value=0, max_value=MAX_MS))
def test_event_time_reads_back_unchanged_from_marquez(ms: int) -> None:
    """Parsed and written again as Marquez does, every time the translator writes is the
    same text, and it still names the same millisecond."""
    text = iso(ms)
    moment, nanos = instant(text)
    assert java_offset_date_time(moment, nanos) == text
    parsed = datetime.fromisoformat(text)
    assert parsed.tzinfo == UTC
    assert round(parsed.timestamp() * 1000) == ms


def nulls(value: Any, where: str = "") -> list[str]:
    """JSON Pointers of every null inside `value`, members and array elements."""
    if value is None:
        return [where]
    if isinstance(value, dict):
        return [p for name, item in value.items() for p in nulls(item, f"{where}/{name}")]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in nulls(item, f"{where}/{index}")]
    return []


def test_fixture_events_hold_no_null_and_marquez_times(tmp_path: Path) -> None:
    """Every event of every checked-in log, unsigned as the translator makes it, holds no
    null anywhere, writes eventTime as Marquez writes it back, and validates."""
    logs = []
    for index, log in enumerate(fixture_logs()):
        logs.append(tmp_path / f"local-{index:04d}")
        logs[-1].write_bytes(unpacked(log) if log.suffix == ".zst" else log.read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    report = replay(logs, namespace="form", output_dir=out)
    assert report.errors == ()
    events = [
        orjson.loads(line)
        for path in sorted(out.iterdir())
        for line in path.read_bytes().splitlines()
    ]
    assert len(events) > 200
    trailing_zeros = 0
    for event in events:
        assert nulls(event) == [], event["run"]["runId"]
        moment, nanos = instant(event["eventTime"])
        assert java_offset_date_time(moment, nanos) == event["eventTime"]
        trailing_zeros += nanos % 10_000_000 == 0
        validate_run_event(event)
    assert trailing_zeros > 20  # times that ended in 0 are among them
