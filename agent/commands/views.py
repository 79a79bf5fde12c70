"""Plain-text tables of the control socket's answers, for people at a terminal.

Every value shown comes from outside (application ids and names from event logs, a
collector's error text, paths) and passes through `printable` on its way out: a control
character in it is shown escaped (`\\x1b`, `\\n`), so no value can move the cursor, clear the
screen, reorder the line (bidi overrides) or start a row of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

#: C0, DEL and C1 controls, the Unicode line and paragraph separators, the bidirectional
#: marks, embeddings, overrides and isolates, and lone surrogates (JSON may carry them, and no
#: terminal encoding can), each with the escape that shows it.
_ESCAPES: Final = {
    code: {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(
        code, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    )
    for code in (
        *range(0x00, 0x20),
        *range(0x7F, 0xA0),
        0x061C,
        0x200E,
        0x200F,
        0x2028,
        0x2029,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        *range(0xD800, 0xE000),
    )
}


def printable(value: object) -> str:
    """`value` as text that a terminal shows as it is: control characters escaped."""
    return str(value).translate(_ESCAPES)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, every cell `printable`; an empty table says so."""
    if not rows:
        return "(none)"
    cells = [[printable(h) for h in headers]] + [
        ["" if c is None else printable(c) for c in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _when(seconds: float | None) -> str:
    if not seconds:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _names(datasets: Sequence[dict[str, Any]]) -> str:
    return ", ".join(f"{d['namespace']}:{d['name']}" for d in datasets) or "-"


def status(answer: dict[str, Any]) -> str:
    parts = [
        printable(
            f"lineage-agent {answer['version']}  state: {answer['state']}  pid {answer['pid']}  "
            f"up {answer['uptime_seconds']:.0f}s  config {answer['config']}"
        ),
        printable(f"events produced: {answer['produced']}"),
        "",
        "transports",
        table(
            [
                "name",
                "queued",
                "capacity",
                "delivered",
                "dropped",
                "drops by reason",
                "unconfirmed",
                "last error",
            ],
            [
                [
                    t["name"],
                    t["depth"],
                    t["capacity"],
                    t["delivered"],
                    t["dropped"],
                    ", ".join(f"{k}={v:g}" for k, v in t["dropped_by_reason"].items()) or "-",
                    t.get("unconfirmed", 0),
                    f"{t['last_error']} at {_when(t['last_error_time'])}"
                    if t["last_error"]
                    else "-",
                ]
                for t in answer["transports"]
            ],
        ),
        "",
        "applications",
    ]
    rows = []
    for app in answer["applications"]:
        summary = app["summary"] or {}
        application = summary.get("application") or {}
        runs = summary.get("runs") or []
        running = sum(1 for r in runs if r["state"] == "RUNNING")
        rows.append(
            [
                app["app_id"],
                summary.get("app_name") or "",
                application.get("state", "-"),
                len(runs),
                running,
                "complete" if app["complete"] else "in progress",
                summary.get("exec_id") or "-",
            ]
        )
    parts.append(table(["app id", "name", "state", "runs", "running", "log", "exec"], rows))
    if "agent_id" in answer:  # state shared by several agents (state_url)
        parts += ["", f"leases (this agent: {answer['agent_id']})"]
        if "leases_error" in answer:
            parts.append(f"  no leases shown: {answer['leases_error']}")
        else:
            parts.append(
                table(
                    ["log", "owner", "token", "expires in"],
                    [
                        [lease["key"], lease["owner"], lease["token"], f"{lease['seconds_left']}s"]
                        for lease in answer["leases"]
                    ],
                )
            )
    return "\n".join(parts)


def describe(answer: dict[str, Any]) -> str:
    summary = answer.get("summary") or {}
    parts = [
        printable(
            f"application {answer['app_id']}"
            + (f" ({summary.get('app_name')})" if summary.get("app_name") else "")
            + ("" if answer["tracked"] else "  [finished; from the state database]")
        )
    ]
    if summary.get("exec_id"):
        waits = "; its end waits for the command's verdict" if summary["awaiting_verdict"] else ""
        parts.append(printable(f"run by lineage-agent exec {summary['exec_id']}{waits}"))
    if answer.get("stop"):
        reason, who = answer["stop"]
        parts.append(printable(f"stop requested by {who}: {reason}"))
    runs = ([summary["application"]] if summary.get("application") else []) + list(
        summary.get("runs") or []
    )
    if runs:
        parts += [
            "",
            "runs",
            table(
                ["run id", "job", "type", "state", "inputs", "outputs", "error"],
                [
                    [
                        r["run_id"],
                        r["job_name"],
                        r["job_type"],
                        r["state"],
                        _names(r["inputs"]),
                        _names(r["outputs"]),
                        (r.get("error") or "")[:60],
                    ]
                    for r in runs
                ],
            ),
        ]
    parts += [
        "",
        "events emitted",
        table(
            ["event time", "type", "run id", "job"],
            [
                [e["event_time"], e["event_type"], e["run_id"], e["job_name"]]
                for e in answer["emitted"]
            ],
        ),
    ]
    parts += [
        "",
        "deliveries",
        table(
            ["time", "type", "run id", "sha256", "transport", "outcome", "reason"],
            [
                [
                    _when(d["time"]),
                    d["event_type"],
                    d["run_id"],
                    d["digest"][:16],
                    d["transport"],
                    d["outcome"],
                    d["reason"] or "",
                ]
                for d in answer["deliveries"]
            ],
        ),
    ]
    health = answer["health"]
    parts += [
        "",
        "lineage errors: none" if health["healthy"] else "lineage errors",
    ]
    if not health["healthy"]:
        parts.append(
            table(
                ["time", "component", "reason", "transport", "type", "run id", "detail"],
                [
                    [
                        _when(e["time"]),
                        e["component"],
                        e["reason"],
                        e["transport"],
                        e["eventType"],
                        e["runId"],
                        e["detail"][:60],
                    ]
                    for e in health["recent"]
                ],
            )
        )
    return "\n".join(parts)
