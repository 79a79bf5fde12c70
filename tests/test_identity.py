"""Replaying the fixture logs gives the recorded events, byte for byte."""

from __future__ import annotations

import json

from tests.identity import RECORD, digests, fixture_logs


def test_fixture_logs_replay_to_the_recorded_events() -> None:
    """Every fixture log replays to exactly the signed events recorded in the digest file."""
    logs = fixture_logs()
    assert logs, "no fixture logs found"
    recorded = json.loads(RECORD.read_text())
    found = digests(logs)
    assert sorted(found) == sorted(recorded)
    for log, events in found.items():
        assert events == recorded[log], f"{log}: events changed"
        assert events, f"{log}: no events"
