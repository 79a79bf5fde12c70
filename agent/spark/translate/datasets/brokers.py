"""The Kafka bootstrap servers of an application's reads, learned in log order. Pure.

A Kafka read's plan (`KafkaRelation(strategy=Subscribe[…])`), a streaming source's
description (`KafkaV2[Subscribe[…]]`) and the SQL configuration an execution logs never name
the servers. What names them, the first that does:

1. the agent's setting `spark.kafka_bootstrap` (`TranslateOptions.kafka_bootstrap`);
2. Spark's `spark.kafka.clusters.<id>.auth.bootstrap.servers` when the application configures
   exactly one cluster (several: which one a read uses is not in the log);
3. the `kafka.bootstrap.servers` option of the application's Kafka writes logged so far, when
   they all name the same first server (the one a dataset is named after).

The translator feeds what it reads in log order, so a read logged before the first write that
names the servers stays `kafka://unknown`; a run keeps the servers known at its START
(`Lifecycle`), so its START and terminal events name the same datasets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from agent.spark.plan.datasets import DatasetRef
from agent.spark.translate.naming import from_kafka
from agent.spark.translate.values import properties

#: Spark's per-cluster Kafka configuration (delegation tokens): `<prefix><id><suffix>`.
CLUSTER_PREFIX: Final = "spark.kafka.clusters."
CLUSTER_SUFFIX: Final = ".auth.bootstrap.servers"
_MAX_SEEN: Final = 8  # distinct first servers remembered; more is as ambiguous as two


class KafkaServers:
    """What names the servers of one application's Kafka reads; see the module docstring."""

    def __init__(self, configured: str | None) -> None:
        self._configured = configured
        self._clusters: dict[str, str] = {}  # cluster id -> its bootstrap servers
        self._written: dict[str, str] = {}  # first server (as named) -> the servers written

    @property
    def servers(self) -> str | None:
        """The servers a read is named after now; None when nothing, or nothing unambiguous,
        names them."""
        if self._configured:
            return self._configured
        if len(self._clusters) == 1:
            return next(iter(self._clusters.values()))
        if len(self._clusters) > 1:
            return None
        return next(iter(self._written.values())) if len(self._written) == 1 else None

    @property
    def unknown_reason(self) -> str:
        """Why `servers` is None, for a warning."""
        if len(self._clusters) > 1:
            clusters = ", ".join(sorted(self._clusters))
            return f"the application configures several Kafka clusters ({clusters})"
        if len(self._written) > 1:
            return "the application's Kafka writes name different servers"
        return "neither the event log nor spark.kafka_bootstrap names them"

    def environment(self, section: object) -> None:
        """Take in the `Spark Properties` section of an EnvironmentUpdate event."""
        for key, value in properties(section, (), (CLUSTER_PREFIX,)):
            cluster = key.removeprefix(CLUSTER_PREFIX).removesuffix(CLUSTER_SUFFIX)
            if key.endswith(CLUSTER_SUFFIX) and cluster and "." not in cluster and value.strip():
                self._clusters.setdefault(cluster, value.strip())

    def written(self, refs: Iterable[DatasetRef]) -> None:
        """Take in the servers of the Kafka writes among a plan's datasets."""
        for ref in refs:
            if ref.role != "output" or ref.kafka is None or not ref.kafka[0]:
                continue
            first = from_kafka(ref.kafka[0], "").namespace
            if first in self._written or len(self._written) < _MAX_SEEN:
                self._written.setdefault(first, ref.kafka[0])
