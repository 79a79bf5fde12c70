"""Pure comparison of two producers' RunEvents for one Spark application: no I/O.

`split(events)` groups events into runs (the application run and its child runs, in the
order they started); `pair(agent, listener)` pairs child runs execution by execution: the
same job name first (in order), then a shared output dataset, then a shared input dataset;
what is left stands alone. `compare_app(shape, agent_events, listener_events)` returns the
paired executions with what agrees and a `Difference` for every aspect that does not:
job names, input and output datasets (namespace, name), symlinks, schema fields, column
lineage (DIRECT and INDIRECT, per output field), terminal states, numbers of events.
Event sizes are measured, never a difference on their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Event = Mapping[str, Any]
TERMINAL = ("COMPLETE", "FAIL", "ABORT")
DatasetKey = tuple[str, str]
SAME_INSTANT = 0.002  # seconds: two runs that started together stand for one execution


@dataclass
class Run:
    """The events of one run id, in the order the producer wrote them."""

    run_id: str
    events: list[Event] = field(default_factory=list)

    @property
    def job(self) -> str:
        return str(self.events[0]["job"]["name"])

    @property
    def job_type(self) -> str:
        facets = self.events[0]["job"].get("facets", {})
        return str(facets.get("jobType", {}).get("jobType", ""))

    @property
    def terminal(self) -> str | None:
        ends = [e["eventType"] for e in self.events if e["eventType"] in TERMINAL]
        return str(ends[-1]) if ends else None

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for event in self.events:
            counts[event["eventType"]] = counts.get(event["eventType"], 0) + 1
        return counts

    def sizes(self) -> list[int]:
        return [size(e) for e in self.events]

    def datasets(self, role: str) -> dict[DatasetKey, dict[str, Any]]:
        """Datasets of a role (`inputs` / `outputs`) over all events; facets merged, later
        events' facets over earlier ones."""
        found: dict[DatasetKey, dict[str, Any]] = {}
        for event in self.events:
            for dataset in event.get(role, []):
                key = (str(dataset["namespace"]), str(dataset["name"]))
                found.setdefault(key, {}).update(dataset.get("facets", {}))
        return found


def size(event: Event) -> int:
    """Bytes of the event as one compact JSON line, without the agent's signature facet
    (the listener signs nothing, so the comparison leaves it out)."""
    facets = {
        k: v for k, v in event["run"].get("facets", {}).items() if not k.endswith("_signature")
    }
    trimmed = {**event, "run": {**event["run"], "facets": facets}}
    return len(json.dumps(trimmed, separators=(",", ":"), ensure_ascii=False).encode())


def split(events: Iterable[Event]) -> tuple[Run | None, list[Run]]:
    """(the application run, the child runs in the order they first appeared)."""
    runs: dict[str, Run] = {}
    for event in events:
        run_id = str(event["run"]["runId"])
        runs.setdefault(run_id, Run(run_id)).events.append(event)
    app = next((r for r in runs.values() if r.job_type == "APPLICATION"), None)
    return app, [r for r in runs.values() if r is not app]


def started(run: Run) -> float:
    """Seconds since the epoch of the run's first event (both producers stamp events with
    the Spark event's own time)."""
    text = str(run.events[0]["eventTime"])
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rank(run: Run, other: Run) -> tuple[bool, bool, float] | None:
    """How well `other` matches `run` (larger is better); None when it cannot be the same
    execution."""
    outputs, inputs = set(run.datasets("outputs")), set(run.datasets("inputs"))
    shared_out = bool(outputs & set(other.datasets("outputs")))
    same_job = run.job == other.job
    reads = (
        other.terminal is not None
        and not outputs
        and not other.datasets("outputs")
        and bool(inputs & set(other.datasets("inputs")))
    )
    gap = abs(started(run) - started(other))
    if not (shared_out or same_job or reads or gap < SAME_INSTANT):
        return None
    return shared_out, same_job, -gap


def pair(agent: Sequence[Run], listener: Sequence[Run]) -> list[tuple[Run | None, Run | None]]:
    """Pairs of (agent run, listener run), execution by execution; `None` where a producer
    has no counterpart. A candidate shares an output dataset, or has the same job name, or
    (both writing nothing) shares an input; among candidates the one sharing outputs, then
    the one with the same name, then the one that started closest in time wins. Agent order
    is kept, unpaired listener runs come last in their order."""
    free = list(listener)
    pairs: list[tuple[Run | None, Run | None]] = []
    for run in agent:
        ranked = [(r, other) for other in free if (r := rank(run, other)) is not None]
        if ranked:
            best = max(ranked, key=lambda item: item[0])[1]
            free.remove(best)
            pairs.append((run, best))
        else:
            pairs.append((run, None))
    return pairs + [(None, run) for run in free]


# -- aspects -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One aspect on which the two producers disagree, with both sides' values."""

    shape: str
    execution: str  # the agent's job name (the listener's when the agent has none)
    aspect: str
    agent: Any
    listener: Any
    dataset: str = ""  # namespace/name when the aspect is about one dataset
    role: str = ""  # inputs / outputs, with `dataset`
    listener_job: str = ""  # the paired listener run's job name

    def as_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "execution": self.execution,
            "aspect": self.aspect,
            "dataset": self.dataset,
            "role": self.role,
            "listener_job": self.listener_job,
            "agent": self.agent,
            "listener": self.listener,
        }


def fields(schema: Mapping[str, Any] | None, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted name, type) of every field, nested ones included, in order."""
    out: list[tuple[str, str]] = []
    for item in (schema or {}).get("fields", []):
        name = prefix + str(item["name"])
        out.append((name, str(item.get("type", "")).lower()))
        out += fields(item, name + ".")
    return out


Edge = tuple[str, str, str, str, str, str]  # out field, ns, name, in field, type, subtype


def edges(facet: Mapping[str, Any] | None) -> set[Edge]:
    """Column lineage as edges; dataset-wide (INDIRECT) inputs under the output field `*`."""
    found: set[Edge] = set()
    if not facet:
        return found
    for out_field, spec in facet.get("fields", {}).items():
        for item in spec.get("inputFields", []):
            for tr in item.get("transformations") or [{"type": "", "subtype": ""}]:
                found.add(
                    (
                        out_field,
                        item["namespace"],
                        item["name"],
                        item["field"],
                        tr.get("type", ""),
                        tr.get("subtype", ""),
                    )
                )
    for item in facet.get("dataset", []):
        for tr in item.get("transformations") or [{"type": "", "subtype": ""}]:
            found.add(
                (
                    "*",
                    item["namespace"],
                    item["name"],
                    item["field"],
                    tr.get("type", ""),
                    tr.get("subtype", ""),
                )
            )
    return found


def symlinks(facets: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    ids = facets.get("symlinks", {}).get("identifiers", [])
    return sorted((str(i["namespace"]), str(i["name"]), str(i.get("type", ""))) for i in ids)


def key_text(key: DatasetKey) -> str:
    return f"{key[0]}:{key[1]}" if key[0] != "file" else key[1]


def sample(items: Iterable[Any], limit: int = 8) -> list[Any]:
    return sorted(items, key=repr)[:limit]


def column_view(edges_: set[Edge]) -> dict[str, set[Edge]]:
    direct = {e for e in edges_ if e[4] == "DIRECT"}
    indirect = {e for e in edges_ if e[4] != "DIRECT"}
    return {"DIRECT": direct, "INDIRECT": indirect}


def compare_runs(shape: str, agent: Run, listener: Run) -> tuple[dict[str, Any], list[Difference]]:
    """What agrees and what differs between two runs of the same execution."""
    name = agent.job
    diffs: list[Difference] = []
    agree: dict[str, Any] = {}

    def differ(aspect: str, a: Any, b: Any, dataset: str = "", role: str = "") -> None:
        diffs.append(Difference(shape, name, aspect, a, b, dataset, role, listener.job))

    agree["job_name"] = agent.job == listener.job
    if not agree["job_name"]:
        differ("job_name", agent.job, listener.job)
    for role in ("inputs", "outputs"):
        mine, theirs = set(agent.datasets(role)), set(listener.datasets(role))
        agree[role] = mine == theirs
        if mine != theirs:
            differ(
                role,
                sorted(key_text(k) for k in mine - theirs),
                sorted(key_text(k) for k in theirs - mine),
            )
    columns_agree = True
    for role in ("inputs", "outputs"):
        mine_ds, theirs_ds = agent.datasets(role), listener.datasets(role)
        for key in sorted(set(mine_ds) & set(theirs_ds)):
            a, b = mine_ds[key], theirs_ds[key]
            where = key_text(key)
            if symlinks(a) != symlinks(b):
                differ("symlinks", symlinks(a), symlinks(b), where, role)
            fa, fb = fields(a.get("schema")), fields(b.get("schema"))
            if fa != fb:
                names_a, names_b = {n for n, _ in fa}, {n for n, _ in fb}
                aspect = "schema_types" if names_a == names_b else "schema_fields"
                only_a, only_b = sample(set(fa) - set(fb), 50), sample(set(fb) - set(fa), 50)
                differ(aspect, only_a, only_b, where, role)
            if role != "outputs":
                continue
            ea, eb = edges(a.get("columnLineage")), edges(b.get("columnLineage"))
            for kind, (va, vb) in zip(
                ("DIRECT", "INDIRECT"),
                zip(column_view(ea).values(), column_view(eb).values(), strict=True),
                strict=True,
            ):
                if va == vb:
                    continue
                columns_agree = False
                differ(
                    f"columns_{kind.lower()}",
                    {"only_agent": len(va - vb), "sample": sample(va - vb)},
                    {"only_listener": len(vb - va), "sample": sample(vb - va)},
                    where,
                    role,
                )
    agree["columns"] = columns_agree
    agree["terminal"] = agent.terminal == listener.terminal
    if not agree["terminal"]:
        differ("terminal", agent.terminal, listener.terminal)
    ca, cb = agent.counts(), listener.counts()
    agree["events"] = ca == cb
    if ca != cb:
        differ("event_count", ca, cb)
    return agree, diffs


def measures(run: Run | None) -> dict[str, Any]:
    if run is None:
        return {}
    return {
        "job": run.job,
        "terminal": run.terminal,
        "events": run.counts(),
        "bytes": sum(run.sizes()),
        "inputs": sorted(map(key_text, run.datasets("inputs"))),
        "outputs": sorted(map(key_text, run.datasets("outputs"))),
    }


def ended(run: Run) -> float:
    text = str(run.events[-1]["eventTime"])
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def nested_in(run: Run, others: Sequence[Run]) -> str | None:
    """The job of the run among `others` that this one ran inside of: it started while
    that one ran and touched only datasets that one touched (CTAS and the insert it runs)."""
    touched = set(run.datasets("inputs")) | set(run.datasets("outputs"))
    if not touched:
        return None
    for other in others:
        outer = set(other.datasets("inputs")) | set(other.datasets("outputs"))
        span = started(other) - SAME_INSTANT <= started(run) <= ended(other) + SAME_INSTANT
        if span and touched <= outer:
            return other.job
    return None


def compare_app(
    shape: str, agent_events: Sequence[Event], listener_events: Sequence[Event]
) -> dict[str, Any]:
    """Per application: every execution paired and compared, the application runs compared."""
    agent_app, agent_runs = split(agent_events)
    listener_app, listener_runs = split(listener_events)
    executions: list[dict[str, Any]] = []
    differences: list[Difference] = []
    for a, b in pair(agent_runs, listener_runs):
        entry: dict[str, Any] = {"agent": measures(a), "listener": measures(b)}
        if a is not None and b is not None:
            entry["agree"], diffs = compare_runs(shape, a, b)
            differences += diffs
        elif a is not None:
            differences.append(Difference(shape, a.job, "run_only_agent", measures(a), None))
        elif b is not None:
            inside = nested_in(b, agent_runs)
            listener = measures(b) | {"nested_in": inside}
            differences.append(Difference(shape, b.job, "run_only_listener", None, listener))
        executions.append(entry)
    application: dict[str, Any] = {"agent": measures(agent_app), "listener": measures(listener_app)}
    if agent_app is None or listener_app is None:
        differences.append(
            Difference(
                shape,
                "(application)",
                "application_missing",
                measures(agent_app),
                measures(listener_app),
            )
        )
    else:
        app_name = agent_app.job
        application["agree"] = {
            "job_name": agent_app.job == listener_app.job,
            "terminal": agent_app.terminal == listener_app.terminal,
            "events": agent_app.counts() == listener_app.counts(),
        }
        checks = (
            ("app_job_name", agent_app.job, listener_app.job),
            ("app_terminal", agent_app.terminal, listener_app.terminal),
            ("app_event_count", agent_app.counts(), listener_app.counts()),
        )
        for aspect, mine, theirs in checks:
            if mine != theirs:
                differences.append(Difference(shape, app_name, aspect, mine, theirs))
    return {
        "executions": executions,
        "application": application,
        "differences": differences,
        "bytes": {
            "agent": sum(size(e) for e in agent_events),
            "listener": sum(size(e) for e in listener_events),
        },
        "events": {"agent": len(agent_events), "listener": len(listener_events)},
    }


def evidence(events: Sequence[Event], job: str, dataset: str, role: str, limit: int = 4000) -> Any:
    """The relevant JSON of one producer's events for a difference: the dataset as the last
    event of job `job` carries it (column lineage cut to a few fields), or the run's event
    types and job name when the difference is about the run. Cut at `limit` characters."""
    mine = [e for e in events if e["job"]["name"] == job]
    if not mine:
        return None
    if not dataset and role:  # which datasets: the names the run's last event carries
        return [{"namespace": d["namespace"], "name": d["name"]} for d in mine[-1].get(role, [])]
    if not dataset:
        return [{"eventType": e["eventType"], "job": e["job"]["name"]} for e in mine]
    found: Any = None
    for event in mine:
        for item in event.get(role, []):
            if key_text((str(item["namespace"]), str(item["name"]))) == dataset:
                found = item
    if found is None:
        return None
    facets = {
        key: {k: v for k, v in facet.items() if k not in ("_producer", "_schemaURL")}
        for key, facet in found.get("facets", {}).items()
        if isinstance(facet, dict)
    }
    lineage = facets.get("columnLineage")
    if lineage:
        kept = dict(list(lineage.get("fields", {}).items())[:3])
        facets["columnLineage"] = {**lineage, "fields": kept, "_cut_to_fields": len(kept)}
    text = json.dumps({**found, "facets": facets})
    return json.loads(text) if len(text) <= limit else text[:limit] + "..."
