"""The order in which the suite's files are handed to the workers: the longest first, the
`alone` test's file last.

`./run test` spreads whole files over the workers (`--dist loadfile`) and hands each the next
file when it is nearly done with its own, in collection order (`--no-loadscope-reorder`:
pytest-xdist would otherwise put the files with the most tests first, and the Spark files,
a few tests behind minutes of setup each, would come last and leave one worker running them
while the others idle). Longest first lets the short files fill in at the end, so the workers
finish together. The `alone` test's file comes last, when the other workers are in short
files: it waits for their tests to end, and they for it.

The ranking is measured (`./run test --durations=0`, each file's setup and calls summed) and
kept by hand: a new file that takes minutes belongs in `LONGEST`. Registered through
`pytest_plugins` in tests/conftest.py.
"""

from __future__ import annotations

from typing import Final

import pytest

#: Files taking most of a minute or more in the suite, longest first (four workers).
LONGEST: Final = (
    "tests/test_exec.py",
    "tests/test_lakehouse_live.py",
    "tests/reliability/test_collector_faults.py",
    "tests/test_bench_smoke.py",
    "tests/reliability/test_pipeline_faults.py",
    "tests/reliability/test_operator_errors.py",
    "tests/test_bench_smoke_spark.py",
    "tests/test_streaming_live.py",
    "tests/reliability/test_stop_faults.py",
    "tests/test_columns.py",
    "tests/test_ops.py",
    "tests/test_steps.py",
    "tests/test_other_user.py",
    "tests/reliability/test_agent_faults.py",
    "tests/test_ha_outage.py",
    "tests/test_spark_scenarios.py",
    "tests/test_objstore.py",
    "tests/test_standalone_liveness.py",
    "tests/test_reader.py",
    "tests/test_install_extras.py",
    "tests/test_agent_kafka.py",
    "tests/test_lakehouse_live_catalogs.py",
    "tests/test_spark_restart.py",
    "tests/reliability/test_eventlog_faults.py",
    "tests/test_control.py",
    "tests/reliability/test_run_order.py",
    "tests/reliability/test_collector_retry.py",
    "tests/test_replay.py",
    "tests/test_demo.py",
    "tests/test_cluster_manager.py",
    "tests/test_ha.py",
    "tests/test_listener_conf.py",
    "tests/test_identity.py",
    "tests/test_translate.py",
    "tests/test_codecs.py",
)
#: Files handed out after every other.
LAST: Final = ("tests/test_other_user_stop.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: n for n, path in enumerate(LONGEST)}
    rank.update({path: len(LONGEST) + 1 + n for n, path in enumerate(LAST)})
    middle = len(LONGEST)
    # A stable sort: the tests of a file, and the files of the middle, keep their order.
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], middle))
