"""The OpenLineage Spark listener's per-application settings, read from a real PySpark log.

tests/sparkjobs/openlineage_conf.py sets `spark.openlineage.namespace`, `appName`,
`job.tags`, `run.tags` and the `parent*` keys; the agent's events of that application show
them as the listener's would, and validate against the OpenLineage schemas.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable
from typing import Any

import orjson
import pytest

from agent.spark.translate.facets.appfacets import listener_tags, tags_facet
from agent.spark.translate.listener import wanted
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.olschema import validate_run_event
from tests.spark_logs import JOBS, spark_env

TIMEOUT = 600.0
Event = dict[str, Any]


@pytest.fixture(scope="module")
def log_lines(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, ...]:
    """The event log of openlineage_conf.py, run once for the module."""
    work = tmp_path_factory.mktemp("listener-conf")
    with (work / "spark.log").open("wb") as output:
        subprocess.run(
            [sys.executable, str(JOBS / "openlineage_conf.py"), str(work)],
            env=spark_env(),
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT,
            check=True,
        )
    app_id = (work / "app_id").read_text()
    data = (work / "events" / app_id).read_bytes()
    return tuple(line for line in data.splitlines() if line)


def translate(lines: Iterable[bytes], **options: Any) -> list[Event]:
    translator = ApplicationTranslator(TranslateOptions(namespace="spark", **options))
    events: list[Event] = []
    for line in lines:
        if wanted(line):
            events += translator.feed(orjson.loads(line))
    assert translator.warnings == []
    return events


def test_events_take_the_application_namespace_and_name(log_lines: tuple[bytes, ...]) -> None:
    """Every job of the application is in its spark.openlineage.namespace, named from appName."""
    events = translate(log_lines)
    assert events
    assert {e["job"]["namespace"] for e in events} == {"team-payments"}
    names = {e["job"]["name"] for e in events}
    assert "nightly_ledger" in names
    assert all(name.startswith("nightly_ledger") for name in names)
    for event in events:
        validate_run_event(event)


def test_parent_of_children_is_in_the_application_namespace(log_lines: tuple[bytes, ...]) -> None:
    """Child runs point at the application run in its namespace; the application at the
    scheduler's run from the parent keys."""
    events = translate(log_lines)
    app = next(e for e in events if e["job"]["name"] == "nightly_ledger")
    assert app["run"]["facets"]["parent"]["job"] == {
        "namespace": "airflow",
        "name": "ledger_dag.spark_task",
    }
    children = [e for e in events if e["job"]["name"] != "nightly_ledger"]
    assert children
    for child in children:
        assert child["run"]["facets"]["parent"]["job"] == {
            "namespace": "team-payments",
            "name": "nightly_ledger",
        }


def test_job_and_run_tags_as_the_listener_reads_them(log_lines: tuple[bytes, ...]) -> None:
    """job.tags become the job's `tags` facet (after the configured tags, replacing a
    configured tag of the same key) and run.tags the run's `tags` facet, on every event."""
    events = translate(log_lines, tags=(("team", "platform"), ("env", "prod")))
    for event in events:
        assert event["job"]["facets"]["tags"]["tags"] == [
            {"key": "env", "value": "prod", "source": "CONFIG"},
            {"key": "spark", "value": "true", "source": "CONFIG"},
            {"key": "team", "value": "payments", "source": "CONFIG"},
            {"key": "tier", "value": "gold", "source": "OWNER"},
            {"key": "escaped:key", "value": "a;b", "source": "CONFIG"},
        ]
        run_tags = event["run"]["facets"]["tags"]
        assert run_tags["_schemaURL"].endswith("TagsRunFacet.json#/$defs/TagsRunFacet")
        assert run_tags["tags"] == [
            {"key": "run", "value": "true", "source": "CONFIG"},
            {"key": "attempt", "value": "first", "source": "CONFIG"},
        ]
        validate_run_event(event)


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        (
            "tag;key:value;k:v:s;this:will:get:skipped",
            [
                ("tag", "true", "CONFIG"),
                ("key", "value", "CONFIG"),
                ("k", "v", "s"),
                ("this", "will", "get"),
            ],
        ),
        (
            "escaped\\:key:escaped\\;value;other:notescaped:tag",
            [
                ("escaped:key", "escaped;value", "CONFIG"),
                ("other", "notescaped", "tag"),
            ],
        ),
        ("a:;:b", [("a", "true", "CONFIG")]),
        (";;:; : ;", []),
        ("", []),
    ],
)
def test_listener_tags_parse_like_the_listener(text: str, tags: list[tuple[str, str, str]]) -> None:
    """The listener's tag syntax: `;` between tags, `:` inside, escapes, blank keys skipped."""
    assert list(listener_tags(text)) == tags


def test_listener_tags_are_linear_and_bounded() -> None:
    """A hostile property of a million separators parses fast (in CPU time, which a busy
    machine does not lengthen) into at most MAX_TAGS tags."""
    began = time.thread_time()
    found = listener_tags("k:v;" * 250_000 + "\\" * 100_000)
    assert len(found) == 256
    assert time.thread_time() - began < 5.0
    assert tags_facet((), found[:1], run=True) is not None
