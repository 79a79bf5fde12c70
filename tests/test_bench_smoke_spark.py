"""The benchmarks that drive PySpark, in their tiny configuration (`python -m tests.bench
--smoke`), checked as tests/test_bench_smoke.py checks the others. A file of its own: its
JVM runs for minutes, beside the other benchmarks' smoke runs instead of after them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_bench_smoke import check, run_bench


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_spark_benchmarks_run_in_tiny_configuration(tmp_path: Path) -> None:
    """The benchmarks that drive PySpark run end to end in one pass sharing one JVM."""
    results = run_bench(["ingest", "latency", "overhead"], tmp_path, timeout=1100)
    for result in results:
        check(result)
    log = next(r for r in results if r["benchmark"] == "ingest")["setup"]["log"]
    assert log["cached"] is False
    assert log["decoded_bytes"] >= 1_500_000
