"""Shared fixtures: real Spark event logs generated once per session."""

pytest_plugins = ("tests.spark_logs",)
