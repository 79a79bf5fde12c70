"""Shapes a real PySpark application once gave wrong datasets or column lineage for: a read
of 30 paths and of two, every generator, INSERT OVERWRITE DIRECTORY in both forms
(tests/sparkjobs/fidelity_jobs.py, one application, its log cached under build/spark-logs)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.olschema import validate_run_event
from tests.spark_logs import CACHE, spark_env

JOBS = Path(__file__).resolve().parent / "sparkjobs"
PROGRAM = (JOBS / "fidelity_jobs.py", JOBS / "columns_jobs.py", JOBS / "local.py")
TIMEOUT = 900.0
MANY = 30

Event = dict[str, Any]


@cache
def fidelity_run() -> Path:
    """The output folder of one run of fidelity_jobs.py, made once per program and PySpark
    version and kept in build/spark-logs (one process makes it; the others wait, then reuse)."""
    digest = hashlib.sha256(f"pyspark {metadata.version('pyspark')}".encode())
    for path in PROGRAM:
        digest.update(path.read_bytes())
    entry = CACHE / f"fidelity-{digest.hexdigest()[:16]}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"{entry.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = entry / "out"
        if (out / "manifest.json").is_file():
            return out
        shutil.rmtree(entry, ignore_errors=True)
        entry.mkdir()
        result = subprocess.run(
            [sys.executable, str(JOBS / "fidelity_jobs.py"), str(out)],
            env=spark_env(),
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")[-4000:]
        return out


@pytest.fixture(scope="module")
def run() -> tuple[Path, dict[str, str], list[Event], list[str]]:
    """The run's folder, what each query wrote, its RunEvents and the translator's warnings."""
    out = fidelity_run()
    written = json.loads((out / "manifest.json").read_text())["written"]
    (log,) = (out / "events").iterdir()
    translator = ApplicationTranslator(TranslateOptions(namespace="spark"))
    events: list[Event] = []
    with log.open("rb") as lines:
        for line in lines:
            events += translator.feed(json.loads(line))
    return out, written, events, translator.warnings


def writing(events: list[Event], path: str) -> Event:
    """The one COMPLETE event that writes `path`."""
    found = [
        e
        for e in events
        if e["eventType"] == "COMPLETE" and any(o["name"] == path for o in e["outputs"])
    ]
    assert len(found) == 1, f"{len(found)} COMPLETE events write {path}"
    return found[0]


def lineage(event: Event, path: str) -> dict[str, list[tuple[str, str, str]]]:
    """Output column -> (input's last path part, field, field-level type)."""
    (output,) = [o for o in event["outputs"] if o["name"] == path]
    fields = output["facets"]["columnLineage"]["fields"]
    return {
        column: [
            (i["name"].rsplit("/", 1)[-1], i["field"], entry["transformationType"])
            for i in entry["inputFields"]
        ]
        for column, entry in fields.items()
    }


def inputs(event: Event) -> list[str]:
    return [i["name"].rsplit("/", 1)[-1] for i in event["inputs"]]


@pytest.mark.spark
def test_every_event_validates(run: tuple[Path, dict[str, str], list[Event], list[str]]) -> None:
    """Every RunEvent of the application validates against the OpenLineage schemas."""
    _, _, events, _ = run
    assert len(events) > MANY
    for event in events:
        validate_run_event(event)


@pytest.mark.spark
def test_read_of_30_paths_names_what_the_log_lists_and_says_what_it_cut(
    run: tuple[Path, dict[str, str], list[Event], list[str]],
) -> None:
    """By default Spark logs the first few of 30 paths (as many as fit in 100 characters)
    and a count, and the rest nowhere: those few are the inputs, each saying the scan read
    30; column lineage comes from every one of them, not the first only. With the list
    logged whole, all 30 are inputs and lineage sources."""
    _, written, events, warnings = run
    event = writing(events, written["many_paths"])
    named = len(event["inputs"])
    assert 1 < named < MANY
    assert inputs(event) == [f"part_{i:02d}" for i in range(named)]
    for read in event["inputs"]:
        cut = read["facets"]["lineageAgent_pathList"]
        assert (cut["pathsRead"], cut["pathsNamed"]) == (MANY, named)
    assert lineage(event, written["many_paths"])["n"] == [
        (f"part_{i:02d}", "name", "TRANSFORMATION") for i in range(named)
    ]
    assert any(f"reads 30 paths but the plan lists {named}" in w for w in warnings)
    listed = writing(events, written["many_paths_listed"])
    assert inputs(listed) == [f"part_{i:02d}" for i in range(MANY)]
    assert not any("lineageAgent_pathList" in i["facets"] for i in listed["inputs"])
    assert lineage(listed, written["many_paths_listed"])["id"] == [
        (f"part_{i:02d}", "id", "IDENTITY") for i in range(MANY)
    ]


@pytest.mark.spark
def test_read_of_two_paths_gives_lineage_from_both(
    run: tuple[Path, dict[str, str], list[Event], list[str]],
) -> None:
    """The plan description prints the first path only; lineage names both."""
    _, written, events, _ = run
    event = writing(events, written["two_paths"])
    assert inputs(event) == ["part_00", "part_01"]
    assert lineage(event, written["two_paths"]) == {
        "name": [("part_00", "name", "IDENTITY"), ("part_01", "name", "IDENTITY")],
        "city": [("part_00", "city", "IDENTITY"), ("part_01", "city", "IDENTITY")],
    }


@pytest.mark.spark
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("words", {"word": [("lines", "text", "TRANSFORMATION")]}),
        (
            "positions",
            {
                "id": [("lines", "id", "IDENTITY")],
                "at": [("lines", "text", "TRANSFORMATION")],
                "word": [("lines", "text", "TRANSFORMATION")],
            },
        ),
        (
            "inlined",
            {
                "id": [("lines", "id", "IDENTITY")],
                "k": [("lines", "pairs", "TRANSFORMATION")],
                "v": [("lines", "pairs", "TRANSFORMATION")],
            },
        ),
        (
            "stacked",
            {
                "id": [("lines", "id", "IDENTITY")],
                "k": [("lines", "text", "TRANSFORMATION"), ("lines", "id", "TRANSFORMATION")],
                "v": [("lines", "text", "TRANSFORMATION"), ("lines", "id", "TRANSFORMATION")],
            },
        ),
        (
            "udtf_words",
            {
                "id": [("lines", "id", "IDENTITY")],
                "word": [("lines", "text", "TRANSFORMATION")],
                "size": [("lines", "text", "TRANSFORMATION")],
            },
        ),
    ],
)
def test_generator_outputs_come_from_the_generated_column(
    run: tuple[Path, dict[str, str], list[Event], list[str]],
    query: str,
    expected: dict[str, list[tuple[str, str, str]]],
) -> None:
    """explode of a split, posexplode, inline, stack and a Python UDTF: each generated
    column comes from the columns its generator reads; kept columns pass as they are."""
    _, written, events, warnings = run
    event = writing(events, written[query])
    assert inputs(event) == ["lines"]
    assert lineage(event, written[query]) == expected
    assert not any("unrecognized plan node" in w for w in warnings)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("dir_datasource", [("id", "integer"), ("loud", "string")]),
        ("dir_hive", [("id", "integer"), ("text", "string")]),
    ],
)
def test_insert_overwrite_directory_writes_its_directory_only(
    run: tuple[Path, dict[str, str], list[Event], list[str]],
    query: str,
    fields: list[tuple[str, str]],
) -> None:
    """INSERT OVERWRITE DIRECTORY, data source and Hive forms: the directory is the one
    output (overwritten), with its schema and column lineage; nothing named after the
    command."""
    _, written, events, _ = run
    event = writing(events, written[query])
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", written[query])
    facets = output["facets"]
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert [(f["name"], f.get("type")) for f in facets["schema"]["fields"]] == fields
    assert lineage(event, written[query])["id"] == [("lines", "id", "IDENTITY")]
    assert inputs(event) == ["lines"]
    job_events = [e for e in events if e["job"]["name"] == event["job"]["name"]]
    assert all(o["name"] == written[query] for e in job_events for o in e["outputs"])
