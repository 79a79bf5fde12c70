"""Shared fixtures: real Spark event logs generated once per session, a Kafka broker."""

pytest_plugins = ("tests.spark_logs", "tests.kafka_plugin", "tests.otheruser", "tests.pg_plugin")
