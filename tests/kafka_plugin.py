"""`kafka_broker` (session fixture): one throwaway KRaft broker (tests/kafka.py) for the session.

Started on first use, stopped after the last test even when tests fail. Registered through
`pytest_plugins` in tests/conftest.py; tests/kafka.py itself stays free of pytest so the
lakehouse log generator can use it under another environment.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka import Kafka, running_kafka


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    with running_kafka(tmp_path_factory.mktemp("kafka")) as kafka:
        yield kafka
