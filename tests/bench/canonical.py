"""Canonicalization: `agent.delivery.canonical.canonicalize` against the reference `rfc8785.dumps`.

Corpora: the synthetic RunEvents of `agent.testing` (8 and 64 schema columns, about 1.4 KB
and 3.3 KB of canonical JSON) and every event the translator makes of the real sample logs
(1.2 to 3.7 KB, with error facets and stack traces), each also in its signed form (the
shipped event parsed back, signature facet included). Both functions must give identical
bytes for every event; the speed is measured over the same events in alternating rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.bench.harness import Context, Figure, Result, Target, median

Canonicalize = Callable[[Any], bytes]


@dataclass(frozen=True)
class Params:
    events: int = 2000  # per corpus (the real events are repeated up to this count)
    rounds: int = 5


FULL = Params()
SMOKE = Params(events=50, rounds=1)


def corpora(events: int) -> dict[str, list[dict[str, Any]]]:
    import orjson
    from nacl.signing import SigningKey

    from agent.delivery.signing import Signer
    from agent.testing import sample_run_events
    from tests.bench.corpus import translated_events

    real = translated_events()
    signer = Signer(SigningKey.generate())
    signed = [orjson.loads(signer.sign_event(e)) for e in real]
    return {
        "synthetic_8_columns": list(sample_run_events(events)),
        "synthetic_64_columns": list(sample_run_events(events, columns=64)),
        "real_translated": _repeat(real, events),
        "real_translated_signed": _repeat(signed, events),
    }


def _repeat(items: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    return [items[i % len(items)] for i in range(max(count, len(items)))]


def seconds(function: Canonicalize, events: Sequence[Mapping[str, Any]]) -> float:
    began = time.perf_counter()
    for event in events:
        function(event)
    return time.perf_counter() - began


def run(context: Context) -> Result:
    import rfc8785

    from agent.delivery.canonical import canonicalize

    params = SMOKE if context.smoke else FULL
    result = Result("canonical", "python -m tests.bench canonical")
    sets = corpora(params.events)
    result.setup = {
        "corpora": {
            name: {
                "events": len(events),
                "bytes_median": int(median([len(canonicalize(e)) for e in events])),
            }
            for name, events in sets.items()
        },
        "rounds": params.rounds,
        "reference": f"rfc8785 {getattr(rfc8785, '__version__', '')}".strip(),
    }

    checked = differ = 0
    for events in sets.values():
        for event in {id(e): e for e in events}.values():
            checked += 1
            if canonicalize(event) != rfc8785.dumps(event):
                differ += 1
    result.add(
        Figure(
            "identical_bytes",
            (checked - differ) / checked,
            "share of events",
            None,
            None,
            Target(">=", 1.0, on="value"),
            {"events_checked": checked, "events_differing": differ},
        )
    )

    overall_agent = overall_reference = 0.0
    overall_events = 0
    for name, events in sets.items():
        agent_runs, reference_runs = [], []
        for _ in range(params.rounds):
            agent_runs.append(seconds(canonicalize, events))
            reference_runs.append(seconds(rfc8785.dumps, events))
        agent_s, reference_s = median(agent_runs), median(reference_runs)
        overall_agent += agent_s
        overall_reference += reference_s
        overall_events += len(events)
        result.add(
            Figure(
                f"speed_{name}",
                len(events) / agent_s,
                "events/s",
                "rfc8785.dumps",
                len(events) / reference_s,
                Target(">=", 20.0),
                {
                    "agent_us_per_event": round(agent_s / len(events) * 1e6, 2),
                    "reference_us_per_event": round(reference_s / len(events) * 1e6, 2),
                },
            )
        )
    result.add(
        Figure(
            "speed_all_corpora",
            overall_events / overall_agent,
            "events/s",
            "rfc8785.dumps",
            overall_events / overall_reference,
            Target(">=", 20.0),
            {"events": overall_events},
        )
    )
    return result
