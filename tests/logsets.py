"""A generator's set of checked-in event logs (`tests/data/eventlogs/<set>/`, one application
a shape), replayed through `ApplicationLog` as the daemon and `replay` read them: what the
tests of the Spark 3.5 and Spark 4.3 sets share."""

from __future__ import annotations

import functools
import json
import tempfile
from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.spark.translate.options import TranslateOptions
from tests.applog import machine_places, read_through, staged, unpacked
from tests.olschema import validate_run_event

TERMINAL = frozenset({"COMPLETE", "FAIL", "ABORT"})
#: Operators that only the plan description prints (a save's query is a logical plan).
DESCRIBED_ONLY = ("LogicalRelation", "Project", "Filter", "Relation")
Event = dict[str, Any]
Names = list[tuple[str, str]]
Edges = set[tuple[str, str, str]]


@functools.cache
def replayed(log: Path) -> tuple[list[Event], list[str]]:
    """The events and warnings of one checked-in log, replayed once per test process."""
    with tempfile.TemporaryDirectory(prefix="replayed-") as scratch:
        ref = staged(Path(scratch) / "logs", unpacked(log))
        return read_through(ref, TranslateOptions(namespace="spark"))


def spark_log(log: Path) -> list[Event]:
    """The SparkListener events of one log, in log order."""
    return [json.loads(line) for line in unpacked(log).splitlines()]


def node_names(plan: Any) -> Iterator[str]:
    """Every node name of a `sparkPlanInfo` tree, stripped."""
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            name = node.get("nodeName")
            if isinstance(name, str) and name.strip():
                yield name.strip()
            stack.extend(node.get("children") or [])


def named_after_a_node(name: str, nodes: Collection[str]) -> bool:
    """Whether a dataset name is a command's or plan node's text (one of `nodes`, alone or
    followed by its arguments, or any `Execute <command>`) rather than a place."""
    return name.startswith("Execute ") or any(name == n or name.startswith(n + " ") for n in nodes)


def names(datasets: list[Event]) -> Names:
    return [(d["namespace"], d["name"]) for d in datasets]


def lineage(event: Event, output: int = 0) -> dict[str, Edges]:
    """Output field -> {(input dataset name, field, subtype)}; `*` holds the dataset level."""
    facet = event["outputs"][output]["facets"]["columnLineage"]

    def edges(fields: list[Event]) -> Edges:
        return {(i["name"], i["field"], t["subtype"]) for i in fields for t in i["transformations"]}

    found = {name: edges(f["inputFields"]) for name, f in facet["fields"].items()}
    found["*"] = edges(facet.get("dataset", []))
    return found


def runs_of(events: list[Event]) -> dict[str, list[str]]:
    """Run id -> the types of its events, in order; every event validated on the way."""
    by_run: dict[str, list[str]] = defaultdict(list)
    for event in events:
        validate_run_event(event)
        by_run[event["run"]["runId"]].append(event["eventType"])
    return by_run


def assert_runs_end_once(events: list[Event]) -> dict[str, list[str]]:
    """Every event validates; each run has one START first and one terminal event last.
    Returns `runs_of(events)`."""
    by_run = runs_of(events)
    for types in by_run.values():
        assert types[0] == "START" and types[-1] in TERMINAL, types
        assert set(types[1:-1]) <= {"RUNNING"}, types
    return by_run


@dataclass(frozen=True)
class LogSet:
    """The logs of one folder; shape S is the application `<prefix>_S`, its paths under
    `placeholder` (what the generator made of the job's directory)."""

    folder: Path
    prefix: str
    placeholder: str

    def log(self, shape: str) -> Path:
        return self.folder / f"{shape}.jsonl.zst"

    def events(self, shape: str) -> list[Event]:
        return replayed(self.log(shape))[0]

    def warnings(self, shape: str) -> list[str]:
        return replayed(self.log(shape))[1]

    def spark_events(self, shape: str) -> list[Event]:
        return spark_log(self.log(shape))

    def statements(self, shape: str, state: str = "COMPLETE") -> list[tuple[str, Names, Names]]:
        """Each statement run's terminal event: job (without the application), inputs,
        outputs; of the runs that ended `state` (`*`: all)."""
        return [
            (e["job"]["name"].split(".", 1)[1], names(e["inputs"]), names(e["outputs"]))
            for e in self.events(shape)
            if e["eventType"] in TERMINAL and "." in e["job"]["name"]
            if state in ("*", e["eventType"])
        ]

    def terminal(self, shape: str, job: str) -> Event:
        """The one terminal event of the job `<prefix>_<shape>.<job>`."""
        full = f"{self.prefix}_{shape}.{job}"
        (found,) = [
            e for e in self.events(shape) if e["eventType"] in TERMINAL and e["job"]["name"] == full
        ]
        return found

    def assert_whole_and_scrubbed(self, shape: str, version: str) -> None:
        """The log is one application of Spark `version`, named by its shape, naming no place
        of this machine, its properties' paths under the placeholder."""
        log = self.spark_events(shape)
        assert log[0] == {"Event": "SparkListenerLogStart", "Spark Version": version}
        apps = [e["App Name"] for e in log if e["Event"] == "SparkListenerApplicationStart"]
        assert apps == [f"{self.prefix}_{shape}"]
        body = unpacked(self.log(shape)).decode()
        for machine in machine_places():
            assert machine not in body
        p = self.placeholder
        for event in log:
            for path in event.get("Spark Properties", {}).values():
                assert "/" not in path or path.startswith((p, "file:" + p, "jdbc:", "org."))
