"""The memory-source agent (`tests.reliability.memagent`) with a fault injected into reload:
applying a config whose `lineage.namespace` is `fail-on-apply` raises RuntimeError after its
transports were built, where no config the loader accepts can fail:

    python -m tests.reliability.faultagent --config FILE --events N [--rate R]
"""

from __future__ import annotations

import sys

from agent import reconfigure
from agent.config import AgentConfig
from agent.deliveries import Deliveries
from agent.pipeline import Pipeline
from agent.signing import Signer
from agent.transports.base import Transport
from tests.reliability import memagent

TRIGGER = "fail-on-apply"


def install() -> None:
    """Wrap `reconfigure._commit` so that the trigger namespace raises inside it."""
    commit = reconfigure._commit

    def failing(
        new: AgentConfig,
        signer: Signer,
        transports: dict[str, Transport],
        pipeline: Pipeline,
        deliveries: Deliveries,
    ) -> None:
        if new.lineage.namespace == TRIGGER:
            raise RuntimeError("injected fault")
        commit(new, signer, transports, pipeline, deliveries)

    reconfigure._commit = failing


if __name__ == "__main__":
    install()
    sys.exit(memagent.main())
