"""`build/peer/report.json`: per shape what agrees and what differs (each difference with
its class and verdict), and a summary over all shapes. Pure: outputs in, dict out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tests.peer.classify import CLASSES, DEFECTS, classify
from tests.peer.compare import Event, compare_app, evidence


def shape_entry(
    shape: str,
    agent: Sequence[Event],
    listener: Sequence[Event],
    record: Mapping[str, Any],
) -> dict[str, Any]:
    """One shape: the comparison with every difference classified."""
    result = compare_app(shape, agent, listener)
    context = {shape: record}
    differences = []
    for difference in result["differences"]:
        known = classify(difference, context)
        item = difference.as_dict()
        item["class"] = known.id if known else None
        item["verdict"] = known.verdict if known else "unexplained"
        differences.append(item)
    verdicts = Counter(d["verdict"] for d in differences)
    return {
        "app_id": record.get("app_id"),
        "raised": record.get("error"),
        "events": result["events"],
        "bytes": result["bytes"],
        "executions": result["executions"],
        "application": result["application"],
        "differences": differences,
        "verdicts": dict(verdicts),
        "verdict": shape_verdict(differences),
    }


def shape_verdict(differences: Sequence[Mapping[str, Any]]) -> str:
    """One line for the table in docs/peer.md."""

    def classes(verdict: str) -> list[str]:
        return sorted({str(d["class"]) for d in differences if d["verdict"] == verdict})

    parts = []
    if any(d["verdict"] == "unexplained" for d in differences):
        parts.append("UNEXPLAINED differences")
    defects = sorted({str(d["class"]) for d in differences if d["verdict"] in DEFECTS})
    if defects:
        parts.append("agent wrong: " + ", ".join(defects))
    if classes("agent_right"):
        parts.append("agent right: " + ", ".join(classes("agent_right")))
    if not parts:
        return "equivalent (differences by design or both valid)" if differences else "identical"
    return "; ".join(parts)


def build(outputs: Any) -> dict[str, Any]:
    """The report of one side-by-side run (`sidebyside.Outputs`)."""
    shapes = {
        name: shape_entry(name, outputs.agent[name], outputs.listener[name], record)
        for name, record in outputs.apps.items()
    }
    return {"summary": summarize(shapes), "shapes": shapes, "skipped": outputs.skipped}


def summarize(shapes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    executions = paired = datasets = columns = terminal = 0
    apps_terminal = 0
    every: list[Mapping[str, Any]] = []
    for entry in shapes.values():
        for execution in entry["executions"]:
            executions += 1
            agree = execution.get("agree")
            if agree is None:
                continue
            paired += 1
            datasets += bool(agree["inputs"] and agree["outputs"])
            columns += bool(agree["columns"])
            terminal += bool(agree["terminal"])
        apps_terminal += bool(entry["application"].get("agree", {}).get("terminal"))
        every += entry["differences"]
    verdicts = Counter(str(d["verdict"]) for d in every)
    by_class = Counter(str(d["class"]) for d in every if d["class"])
    return {
        "shapes": len(shapes),
        "executions": executions,
        "paired_executions": paired,
        "datasets_agree": datasets,
        "columns_agree": columns,
        "terminal_agree": terminal,
        "applications_terminal_agree": apps_terminal,
        "differences": len(every),
        "unexplained_differences": verdicts.get("unexplained", 0),
        "agent_defects": sum(verdicts.get(v, 0) for v in DEFECTS),
        "by_verdict": dict(verdicts),
        "classes": {
            known.id: {"verdict": known.verdict, "count": by_class.get(known.id, 0)}
            for known in CLASSES
        },
        "events": {
            side: sum(e["events"][side] for e in shapes.values()) for side in ("agent", "listener")
        },
        "bytes": {
            side: sum(e["bytes"][side] for e in shapes.values()) for side in ("agent", "listener")
        },
    }


def defects(report: Mapping[str, Any], outputs: Any = None) -> list[dict[str, Any]]:
    """Every difference where the agent is wrong, with its class's proposed fix and, given
    the raw outputs, the two events' relevant JSON."""
    fixes = {known.id: known.fix for known in CLASSES}
    found = []
    for name, entry in report["shapes"].items():
        for difference in entry["differences"]:
            if difference["verdict"] not in DEFECTS:
                continue
            item = {"shape": name, **difference, "fix": fixes[difference["class"]]}
            if outputs is not None:
                role = difference["role"]
                if difference["aspect"] in ("inputs", "outputs"):
                    role = difference["aspect"]
                where = (difference["dataset"], role)
                item["evidence"] = {
                    "agent": evidence(outputs.agent[name], difference["execution"], *where),
                    "listener": evidence(
                        outputs.listener[name],
                        difference["listener_job"] or difference["execution"],
                        *where,
                    ),
                }
            found.append(item)
    return found


def _side(entry: Mapping[str, Any], side: str) -> str:
    runs = sum(1 for e in entry["executions"] if e[side])
    kib = entry["bytes"][side] / 1024
    plural = "run" if runs == 1 else "runs"
    return f"{runs} {plural}, {entry['events'][side]} events, {kib:,.0f} KiB"


def markdown(report: Mapping[str, Any]) -> str:
    """The per-shape table and class table of docs/peer.md, from a report."""
    lines = ["| shape | agent | listener | verdict |", "|---|---|---|---|"]
    for name, entry in report["shapes"].items():
        agent, listener = _side(entry, "agent"), _side(entry, "listener")
        lines.append(f"| `{name}` | {agent} | {listener} | {entry['verdict']} |")
    for name, why in report.get("skipped", {}).items():
        lines.append(f"| `{name}` | not run | not run | skipped: {why} |")
    lines += ["", "| class | verdict | differences | what |", "|---|---|---|---|"]
    counts = report["summary"]["classes"]
    for known in CLASSES:
        count = counts.get(known.id, {}).get("count", 0)
        lines.append(f"| `{known.id}` | {known.verdict} | {count} | {known.why} |")
    return "\n".join(lines)
