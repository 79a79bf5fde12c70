"""Shared fixtures: real Spark event logs generated once per session, a Kafka broker.

The run itself, whoever started it: SIGINT is the terminal's Ctrl-C for every process the
tests start (the demo, `lineage-agent exec`, shells). A shell without job control starts its
background commands (`./run test &`, some CI runners) with SIGINT ignored, children inherit
that, and a shell cannot trap a signal ignored at its start: tests of Ctrl-C would see
nothing arrive. So the session takes Python's own handler back, as an interactive start
would have it, and its children start with the default disposition.

The JVMs of Spark that the tests start take the options of tests/jvm.py (C1 alone, a
class-data archive of Spark's classes): a small PySpark program costs 30 s of CPU with the
JVM's defaults, 17 s with C1 alone and 9.5 s with the archive too.
"""

from __future__ import annotations

import signal

import pytest

from tests import jvm

pytest_plugins = (
    "tests.alone",
    "tests.order",
    "tests.spark_logs",
    "tests.kafka_plugin",
    "tests.otheruser",
    "tests.pg_plugin",
)


def pytest_configure(config: pytest.Config) -> None:
    jvm.configure()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
