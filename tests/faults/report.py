"""The pure half of the fault runner: what reached Marquez against what the agent made, and the
agent's own accounting, as numbers and as text. Nothing here does I/O.

An event is keyed by (runId, eventType, eventTime): Marquez writes times back in Java's form
(`…:53.16Z` for `…:53.160Z`), so a time is compared as the instant it names. A run's state in
Marquez is the state of the last event Marquez *processed* for it (its `runs` row is upserted
by each event), so a terminal event processed before the run's START leaves the run RUNNING.
Marquez writes an event's raw row (what `GET /api/v1/events/lineage` serves) and updates its
model (runs, jobs, datasets) concurrently and answers 500 if either fails: an event answered
500 may be stored, and a stored event may have left no trace in the run's state.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

#: OpenLineage eventType -> the RunState Marquez shows for a run whose last event it was.
MARQUEZ_STATE: Final[Mapping[str, str]] = {
    "START": "RUNNING",
    "RUNNING": "RUNNING",
    "COMPLETE": "COMPLETED",
    "FAIL": "FAILED",
    "ABORT": "ABORTED",
}
TERMINAL: Final = frozenset({"COMPLETE", "FAIL", "ABORT"})
_TIME: Final = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)?", re.IGNORECASE
)

EventKey = tuple[str, str, str]  # (runId, eventType, instant)


def instant(text: str) -> str:
    """An ISO date-time as one canonical UTC text with nanoseconds, so that the agent's
    `…53.160Z` and Marquez's `…53.16Z` compare equal. Without an offset: UTC."""
    found = _TIME.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"not a date-time: {text!r}")
    whole, fraction, offset = found.groups()
    zone = (offset or "Z").upper().replace("Z", "+00:00")
    moment = datetime.fromisoformat(whole + zone).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + "." + (fraction or "").ljust(9, "0") + "Z"


def event_key(event: Mapping[str, Any]) -> EventKey:
    """(runId, eventType, instant of eventTime) of one RunEvent."""
    return (
        str(event["run"]["runId"]),
        str(event.get("eventType") or ""),
        instant(str(event["eventTime"])),
    )


@dataclass(frozen=True)
class ExpectedRun:
    """One run the logs call for: its job, its events in order, the state it must end in."""

    run_id: str
    job: str
    events: tuple[EventKey, ...]

    @property
    def final_type(self) -> str:
        """The eventType the run ends with (the last terminal one, else the last one)."""
        types = [key[1] for key in self.events]
        terminal = [t for t in types if t in TERMINAL]
        return terminal[-1] if terminal else types[-1]

    @property
    def marquez_state(self) -> str:
        """The RunState Marquez must show once every event of the run was processed in order."""
        return MARQUEZ_STATE.get(self.final_type, "OTHER")


def expected_runs(events: Iterable[Mapping[str, Any]]) -> dict[str, ExpectedRun]:
    """The runs of the agent's events (a replay of the same logs), in first-seen order."""
    jobs: dict[str, str] = {}
    keys: dict[str, list[EventKey]] = {}
    for event in events:
        key = event_key(event)
        job = event.get("job") or {}
        jobs.setdefault(key[0], f"{job.get('namespace', '')}/{job.get('name', '')}")
        keys.setdefault(key[0], []).append(key)
    return {run: ExpectedRun(run, jobs[run], tuple(keys[run])) for run in keys}


@dataclass(frozen=True)
class WrongState:
    """A run Marquez shows in another state than its events say."""

    run_id: str
    job: str
    expected: str  # Marquez RunState
    found: str | None  # None: Marquez does not know the run
    why: str  # "absent" | "terminal missing" | "not ended" | "other"


@dataclass
class Comparison:
    """What one scenario left in Marquez, against what the agent made."""

    runs_expected: int
    runs_in_marquez: int
    events_expected: int
    events_stored: int  # events of the expected runs stored, repeats included
    wrong_state: list[WrongState] = field(default_factory=list)
    missing: list[EventKey] = field(default_factory=list)
    duplicated: dict[EventKey, int] = field(default_factory=dict)  # key -> times stored
    unexpected: list[EventKey] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["missing"] = [list(key) for key in self.missing]
        data["unexpected"] = [list(key) for key in self.unexpected]
        data["duplicated"] = [[*key, n] for key, n in self.duplicated.items()]
        return data


def compare(
    expected: Sequence[Mapping[str, Any]],
    stored: Iterable[Mapping[str, Any]],
    states: Mapping[str, str | None],
) -> Comparison:
    """`expected`: the agent's events (replay); `stored`: Marquez's events (any runs: those of
    other runs are ignored); `states`: runId -> RunState Marquez shows, None if it has no such
    run (every expected run should be asked)."""
    runs = expected_runs(expected)
    wanted = Counter(event_key(event) for event in expected)
    got: Counter[EventKey] = Counter()
    for event in stored:
        key = event_key(event)
        if key[0] in runs:
            got[key] += 1
    result = Comparison(
        runs_expected=len(runs),
        runs_in_marquez=sum(1 for run in runs if states.get(run) is not None),
        events_expected=sum(wanted.values()),
        events_stored=sum(got.values()),
    )
    result.missing = [key for key in wanted if got[key] < wanted[key]]
    result.duplicated = {key: n for key, n in got.items() if key in wanted and n > wanted[key]}
    result.unexpected = [key for key in got if key not in wanted]
    for run in runs.values():
        found = states.get(run.run_id)
        if found == run.marquez_state:
            continue
        terminal = [key for key in run.events if key[1] == run.final_type]
        if found is None:
            why = "absent"
        elif any(got[key] == 0 for key in terminal):
            why = "terminal missing"
        elif found in ("RUNNING", "NEW"):
            # The terminal event is stored, the run is not ended: an earlier event was
            # processed after it (order), or its model update failed while its raw event was
            # written (Marquez does the two concurrently and answers 500 if either fails).
            why = "not ended"
        else:
            why = "other"
        result.wrong_state.append(WrongState(run.run_id, run.job, run.marquez_state, found, why))
    return result


# -- the agent's accounting ---------------------------------------------------------------------


@dataclass
class Life:
    """One agent process: how it ended and its numbers for the http transport at its end."""

    ended: str  # "sigterm" | "sigkill" | "running" | "crashed"
    produced: int = 0
    offered: int = 0
    delivered: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> events
    unconfirmed: dict[str, int] = field(default_factory=dict)
    queued: int = 0  # still queued when the life ended (lost unless the agent kept them)
    not_sent: int = 0  # requests that provably never left (attempts, not events)

    @property
    def identity_holds(self) -> bool:
        """produced = delivered + dropped + unconfirmed + queued."""
        resolved = self.delivered + sum(self.dropped.values()) + sum(self.unconfirmed.values())
        return self.produced == resolved + self.queued


def life_from_samples(samples: Mapping[str, float], ended: str, transport: str = "http") -> Life:
    """A Life from one scrape of `/metrics` (`name{k=v,...}` -> value, labels sorted)."""
    life = Life(ended=ended)
    for key, value in samples.items():
        name, _, rest = key.partition("{")
        labels = dict(part.split("=", 1) for part in rest.rstrip("}").split(",") if "=" in part)
        if name == "lineage_events_emitted_total":
            life.produced += int(value)
        if labels.get("transport") != transport:
            continue
        if name == "lineage_events_offered_total":
            life.offered = int(value)
        elif name == "lineage_events_delivered_total":
            life.delivered = int(value)
        elif name == "lineage_queue_depth":
            life.queued = int(value)
        elif name == "lineage_events_dropped_by_reason_total" and value:
            life.dropped[labels.get("reason", "?")] = int(value)
        elif name == "lineage_events_unconfirmed_total" and value:
            life.unconfirmed[labels.get("reason", "?")] = int(value)
        elif name == "lineage_delivery_not_sent_total":
            life.not_sent += int(value)
    return life


def apply_stopped(life: Life, accounting: Mapping[str, Any], transport: str = "http") -> Life:
    """Complete a life's last scrape with the totals of its `agent_stopped` line: drops and
    unconfirmed events of the drain are added under the reason `at_stop`."""
    numbers = accounting.get(transport)
    if not isinstance(numbers, Mapping):
        return life
    dropped = int(numbers.get("dropped", 0)) - sum(life.dropped.values())
    unconfirmed = int(numbers.get("unconfirmed", 0)) - sum(life.unconfirmed.values())
    if dropped > 0:
        life.dropped["at_stop"] = life.dropped.get("at_stop", 0) + dropped
    if unconfirmed > 0:
        life.unconfirmed["at_stop"] = life.unconfirmed.get("at_stop", 0) + unconfirmed
    life.offered = int(numbers.get("offered", life.offered))
    life.delivered = int(numbers.get("delivered", life.delivered))
    life.queued = int(numbers.get("queued", 0))
    life.produced = max(life.produced, life.offered)
    return life


@dataclass
class Accounting:
    """The sum over an agent's lives in one scenario."""

    lives: list[Life]

    def total(self) -> Life:
        whole = Life(ended=self.lives[-1].ended if self.lives else "none")
        for life in self.lives:
            whole.produced += life.produced
            whole.offered += life.offered
            whole.delivered += life.delivered
            whole.queued += life.queued
            whole.not_sent += life.not_sent
            for reason, n in life.dropped.items():
                whole.dropped[reason] = whole.dropped.get(reason, 0) + n
            for reason, n in life.unconfirmed.items():
                whole.unconfirmed[reason] = whole.unconfirmed.get(reason, 0) + n
        return whole

    def to_json(self) -> dict[str, Any]:
        total = self.total()
        return {
            "lives": [asdict(life) | {"identity": life.identity_holds} for life in self.lives],
            "total": asdict(total) | {"identity": all(life.identity_holds for life in self.lives)},
        }


# -- text ----------------------------------------------------------------------------------------


def _reasons(counts: Mapping[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{r} {n}" for r, n in sorted(counts.items())) + ")"


def render(name: str, comparison: Comparison, accounting: Accounting, notes: Sequence[str]) -> str:
    """The report of one scenario, for people."""
    c = comparison
    total = accounting.total()
    wrong = Counter(w.why for w in c.wrong_state)
    lines = [
        f"== {name}",
        f"  runs: expected {c.runs_expected}, in Marquez {c.runs_in_marquez}, "
        f"wrong final state {len(c.wrong_state)}"
        + (
            " (" + ", ".join(f"{why} {n}" for why, n in sorted(wrong.items())) + ")"
            if wrong
            else ""
        ),
        f"  events: expected {c.events_expected}, stored {c.events_stored}, "
        f"missing {len(c.missing)}, stored twice or more {len(c.duplicated)}, "
        f"unexpected {len(c.unexpected)}; stored beyond those delivered "
        f"{max(0, c.events_stored - total.delivered)}",
        f"  agent: produced {total.produced}, delivered {total.delivered}, "
        f"dropped {_reasons(total.dropped)}, unconfirmed {_reasons(total.unconfirmed)}, "
        f"queued at exit {total.queued}; requests not sent {total.not_sent}; "
        f"lives {len(accounting.lives)} ("
        + ", ".join(
            f"{life.ended}: {life.produced}={life.delivered}+{sum(life.dropped.values())}"
            f"+{sum(life.unconfirmed.values())}+{life.queued}"
            + ("" if life.identity_holds else " IDENTITY BROKEN")
            for life in accounting.lives
        )
        + ")",
    ]
    for w in c.wrong_state:
        lines.append(
            f"  wrong state: {w.job} run {w.run_id}: {w.found} (want {w.expected}; {w.why})"
        )
    for run_id, event_type, when in c.missing:
        lines.append(f"  missing: {event_type} of run {run_id} at {when}")
    for (run_id, event_type, when), n in c.duplicated.items():
        lines.append(f"  stored {n}x: {event_type} of run {run_id} at {when}")
    lines.extend(f"  note: {note}" for note in notes)
    return "\n".join(lines)


def summary_table(rows: Sequence[tuple[str, Comparison, Accounting]]) -> str:
    """One line per scenario."""
    head = (
        f"{'scenario':<20} {'runs':>5} {'in MQ':>5} {'wrong':>5} {'events':>6} {'missing':>7} "
        f"{'dup':>4} | {'made':>5} {'deliv':>5} {'drop':>5} {'unconf':>6} {'queued':>6}"
    )
    out = [head, "-" * len(head)]
    for name, c, a in rows:
        t = a.total()
        out.append(
            f"{name:<20} {c.runs_expected:>5} {c.runs_in_marquez:>5} {len(c.wrong_state):>5} "
            f"{c.events_expected:>6} {len(c.missing):>7} {len(c.duplicated):>4} | "
            f"{t.produced:>5} {t.delivered:>5} {sum(t.dropped.values()):>5} "
            f"{sum(t.unconfirmed.values()):>6} {t.queued:>6}"
        )
    return "\n".join(out)
