"""Over every event log the suite keeps (tests/data/eventlogs/, tests/golden/): no dataset is
named after a plan node or a command, and none gets a name the log does not give."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.logsets import DESCRIBED_ONLY, named_after_a_node, node_names

TESTS = Path(__file__).resolve().parent
LOGS = sorted([*(TESTS / "data" / "eventlogs").rglob("*.jsonl.zst"), *TESTS.glob("golden/*.zst")])
#: A regular expression's marks: a made-up name for topics chosen row by row.
PATTERN = re.compile(r"\.\*|\[\^|\\\\")


def records(path: Path) -> Iterator[dict[str, Any]]:
    data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(path.read_bytes())).read()
    for line in data.splitlines():
        if line.strip():
            yield json.loads(line)


def test_the_suite_keeps_fixture_logs() -> None:
    """The walk below has logs to walk: the samples, the lakehouse and JDBC logs, golden."""
    assert len(LOGS) >= 30
    kept = {p.name for p in LOGS}
    assert {"kafka_sink_columns", "kafka_save_files", "stream_fail_iceberg"} <= {
        name.removesuffix(".jsonl.zst") for name in kept
    }


@pytest.mark.parametrize("log", LOGS, ids=[str(p.relative_to(TESTS)) for p in LOGS])
def test_no_dataset_is_named_after_a_plan_node_or_made_up(log: Path) -> None:
    """Every dataset of every event: not named after any node of the log's plans (nor the
    logical operators its descriptions print), not in namespace `unknown` unless it is a
    table whose place the log does not show, no output named by a pattern."""
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    nodes: set[str] = set(DESCRIBED_ONLY)
    events = []
    for record in records(log):
        nodes.update(node_names(record.get("sparkPlanInfo")))
        events += translator.feed(record)
    nodes.discard("")
    assert events
    for event in events:
        for role in ("inputs", "outputs"):
            for dataset in event[role]:
                name, namespace = dataset["name"], dataset["namespace"]
                assert not named_after_a_node(name, nodes), f"{role[:-1]} {name!r}"
                facets = dataset.get("facets", {})
                if namespace == "unknown":  # a table (catalog or JDBC) of unknown place
                    assert re.fullmatch(r"[\w.$`\"-]+", name), name
                if role == "outputs":
                    assert not PATTERN.search(name), f"output {name!r} is a pattern"
                    assert "lineageAgent_topicPattern" not in facets
