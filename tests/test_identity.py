"""Replaying the fixture logs gives the recorded events, byte for byte, and every event holds
to what the agent promises of all of them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.identity import RECORD, fixture_logs, replayed

Event = dict[str, Any]
Replays = dict[str, tuple[list[str], list[Event]]]


@pytest.fixture(scope="module")
def replays() -> Replays:
    """Every fixture log, replayed once through `lineage-agent replay`."""
    logs = fixture_logs()
    assert logs, "no fixture logs found"
    return replayed(logs)


def test_fixture_logs_replay_to_the_recorded_events(replays: Replays) -> None:
    """Every fixture log replays to exactly the signed events recorded in the digest file."""
    recorded = json.loads(RECORD.read_text())
    found = {log: digests for log, (digests, _) in replays.items()}
    assert sorted(found) == sorted(recorded)
    for log, events in found.items():
        assert events == recorded[log], f"{log}: events changed"
        assert events, f"{log}: no events"


def test_no_fixture_event_has_a_schema_field_without_a_type(replays: Replays) -> None:
    """Marquez takes an untyped field for a column of its own: no schema facet of any event
    of any fixture log has a field, or a nested field, without a type (nor an empty one)."""
    untyped = [
        (log, event["eventType"], event["job"]["name"], dataset["name"], path)
        for log, (_, events) in replays.items()
        for event in events
        for dataset in event["inputs"] + event["outputs"]
        if "schema" in dataset.get("facets", {})
        for path in _untyped(dataset["facets"]["schema"]["fields"])
    ]
    assert untyped == []


def _untyped(fields: list[dict[str, Any]], prefix: str = "") -> list[str]:
    """The paths of the fields without a type; an empty list of fields is one too."""
    if not fields:
        return [prefix or "(no fields)"]
    found = []
    for field in fields:
        path = prefix + field["name"]
        if not field.get("type"):
            found.append(path)
        if "fields" in field:
            found += _untyped(field["fields"], path + ".")
    return found
