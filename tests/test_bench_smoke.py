"""The benchmark harness in its tiny configuration, so that it cannot rot unnoticed: every
benchmark runs end to end through `python -m tests.bench --smoke` and reports its figures.
Speed is never asserted (a smoke run's figures mean nothing); the pure helpers the figures
rest on are checked exactly."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench.harness import Figure, Target, percentile, spread
from tests.bench.latency import match
from tests.bench.overhead import order

ROOT = Path(__file__).resolve().parents[1]

FIGURES = {
    "shipping_kafka": [
        "kafka_one_record_per_event",
        "client_rate_confluent_vs_aiokafka",
        "client_p50_latency_confluent_vs_aiokafka",
        "client_p99_latency_confluent_vs_aiokafka",
        "client_cpu_confluent_vs_aiokafka",
    ],
    "shipping": [
        "one_event_per_post",
        "batch_per_post",
        "one_event_per_post_expect_on_every_request",
        "collector_headroom_one_event_per_post",
        "collector_headroom_batch",
        "signed_path_per_event_batch_end_to_end",
        "signed_path_per_event_in_process",
    ],
    "canonical": [
        "identical_bytes",
        "speed_synthetic_8_columns",
        "speed_synthetic_64_columns",
        "speed_real_translated",
        "speed_real_translated_signed",
        "speed_all_corpora",
    ],
    "ingest": [
        "end_to_end_seconds",
        "end_to_end_vs_orjson_floor",
        "end_to_end_vs_decompression_alone",
    ],
    "latency": ["p50_ms", "p99_ms"],
    "overhead": [
        "wall_time_with_agent",
        "agent_cpu_per_round",
        "wall_time_bound_from_agent_cpu",
    ],
    "memory": [
        "overflow_rss_mib",
        "overflow_rss_growth",
        "overflow_drops_counted",
        "idle_cpu_percent_of_a_core",
        "idle_rss_mib",
    ],
    "scale": [
        "startup_horizon_excluding_s",
        "rss_horizon_excluding_mib",
        "replay_horizon_including_s",
        "rss_horizon_including_peak_mib",
    ],
    "state": ["claims_per_second", "failover_seconds"],
    "stores": [
        "first_scan_listing_seconds",
        "first_scan_listing_rss_growth_mib",
        "first_scan_requests",
        "steady_requests_per_minute",
        "rss_mib",
        "listing_seconds",
        "listing_requests",
        "listing_rss_growth_mib",
    ],
    "stores_endless": ["endless_listing_rss_growth_mib", "endless_rolling_listing_rss_growth_mib"],
    "spool": [
        "submit_to_delivery_cpu_per_event_with_spool",
        "submit_to_delivery_cpu_per_event_with_fsync",
    ],
}


def run_bench(names: list[str], work: Path, timeout: float) -> list[dict[str, Any]]:
    """Run `python -m tests.bench NAMES --smoke`; the results of its report, checked against
    the JSON lines it printed."""
    command = [sys.executable, "-m", "tests.bench", *names, "--smoke", "--work", str(work)]
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    report = json.loads((work / "report.json").read_text())
    assert report["smoke"] is True
    printed = [json.loads(line) for line in proc.stdout.splitlines()]
    assert printed == report["benchmarks"]
    results: list[dict[str, Any]] = report["benchmarks"]
    return results


def check(result: dict[str, Any]) -> None:
    """A result that ran, with its expected figures, each a finite number with a coherent
    baseline, ratio and verdict."""
    name = result["benchmark"]
    assert result["error"] is None
    assert result["command"] == f"python -m tests.bench {name} --smoke"
    assert [f["name"] for f in result["figures"]] == FIGURES[name]
    for figure in result["figures"]:
        assert math.isfinite(figure["value"]), figure
        assert figure["value"] >= 0, figure
        if figure["baseline"] is not None:
            # An idle baseline can measure 0 in a tiny window; a ratio is then not defined.
            assert figure["baseline_value"] >= 0, figure
            if figure["baseline_value"] > 0:
                assert figure["ratio"] == pytest.approx(
                    figure["value"] / figure["baseline_value"], rel=2e-3
                )
        assert figure["met"] in (True, False, None)
        assert (figure["met"] is None) == (figure["target"] is None)


@pytest.mark.parametrize(
    "name",
    [
        "shipping",
        "shipping_kafka",
        "canonical",
        "memory",
        "scale",
        "state",
        "stores",
        "stores_endless",
        "spool",
    ],
)
def test_benchmark_runs_in_tiny_configuration(name: str, tmp_path: Path) -> None:
    """A benchmark without Spark runs end to end and reports every figure it promises."""
    [result] = run_bench([name], tmp_path, timeout=300)
    check(result)


def test_benchmark_names_are_checked(tmp_path: Path) -> None:
    """An unknown benchmark name is refused with the list of known ones."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench", "speed", "--work", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "python -m tests.bench: error: unknown benchmark 'speed'; choose from shipping, "
        "shipping_kafka, canonical, ingest, latency, overhead, memory, scale, state, stores, "
        "stores_endless, spool"
    )


def test_figure_ratio_and_targets() -> None:
    """A figure's ratio is value over baseline, and its target judges the ratio or the value."""
    faster = Figure("f", 300.0, "events/s", "peer", 100.0, Target(">=", 3.0))
    assert faster.ratio == 3.0
    assert faster.met is True
    slower = Figure("s", 2.0, "s", "floor", 1.0, Target("<=", 1.0))
    assert slower.met is False
    absolute = Figure("a", 80.0, "MiB", "idle", 40.0, Target("<=", 100.0, on="value"))
    assert absolute.met is True
    assert Figure("n", 1.0, "x", "zero", 0.0, Target(">=", 1.0)).met is None
    assert absolute.as_dict()["ratio"] == 2.0


def test_percentile_and_spread() -> None:
    """Quantiles interpolate linearly between ranks; spread is the IQR over the median."""
    values = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert percentile(values, 0.5) == 30.0
    assert percentile(values, 0.99) == pytest.approx(49.6)
    assert percentile([7.0], 0.99) == 7.0
    assert spread(values) == pytest.approx(20.0 / 30.0)
    with pytest.raises(ValueError, match=r"^percentile of no values$"):
        percentile([], 0.5)


def test_overhead_rounds_alternate_abba() -> None:
    """Overhead rounds come in ABBA order, as many with the agent as without."""
    assert order(3) == [True, False, False, True, True, False]


def test_latency_matches_terminal_events_by_spark_time() -> None:
    """Each SQLExecutionEnd pairs with the terminal SQL event whose eventTime is its time;
    an execution without one is counted as missing."""
    seen = [(1, 1_700_000_000_250, 1_700_000_000.260), (2, 1_700_000_001_000, 1_700_000_001.004)]
    arrivals = [
        {
            "jobType": "SQL_JOB",
            "eventType": "START",
            "eventTime": "2023-11-14T22:13:20.100Z",
            "t": 1_700_000_000.110,
        },
        {
            "jobType": "SQL_JOB",
            "eventType": "COMPLETE",
            "eventTime": "2023-11-14T22:13:20.250Z",
            "t": 1_700_000_000.300,
        },
        {
            "jobType": "APPLICATION",
            "eventType": "COMPLETE",
            "eventTime": "2023-11-14T22:13:21.000Z",
            "t": 1_700_000_001.500,
        },
    ]
    pairs, missing = match(seen, arrivals)
    assert missing == 1
    [(latency, floor)] = pairs
    assert latency == pytest.approx(0.050)
    assert floor == pytest.approx(0.010)
