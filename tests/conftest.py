"""Shared fixtures: real Spark event logs generated once per session, a Kafka broker.

The run itself, whoever started it: SIGINT is the terminal's Ctrl-C for every process the
tests start (the demo, `lineage-agent exec`, shells). A shell without job control starts its
background commands (`./run test &`, some CI runners) with SIGINT ignored, children inherit
that, and a shell cannot trap a signal ignored at its start: tests of Ctrl-C would see
nothing arrive. So the session takes Python's own handler back, as an interactive start
would have it, and its children start with the default disposition.

The JVMs of Spark that the tests start (its launcher, drivers, a standalone master and
worker) compile with C1 alone, as tests/kafka.py's broker does: they live seconds to minutes
on small data, where C2's compilations cost more CPU than they save (a small PySpark program:
30 s of CPU with both compilers, 16 s with C1). What the programs do is the same.
"""

from __future__ import annotations

import os
import signal

import pytest

pytest_plugins = (
    "tests.alone",
    "tests.order",
    "tests.spark_logs",
    "tests.kafka_plugin",
    "tests.otheruser",
    "tests.pg_plugin",
)


#: Appended to what Spark's scripts add to the java command lines they build.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
SPARK_JVM_OPTIONS = ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS", "SPARK_DAEMON_JAVA_OPTS")


def pytest_configure(config: pytest.Config) -> None:
    for name in SPARK_JVM_OPTIONS:  # xdist's workers inherit the controller's
        options = os.environ.get(name, "")
        if JVM_OPTIONS not in options.split():
            os.environ[name] = f"{options} {JVM_OPTIONS}".strip()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
