"""The memory-source agent (`tests.reliability.memagent`) with a fault injected into reload:
applying a config whose `lineage.namespace` is `fail-on-apply` raises RuntimeError after its
transports were built, where no config the loader accepts can fail:

    python -m tests.reliability.faultagent --config FILE --events N [--rate R]
"""

from __future__ import annotations

import sys

from agent.config.model import AgentConfig
from agent.delivery.deliveries import Deliveries
from agent.delivery.pipeline import Pipeline
from agent.delivery.signing import Signer
from agent.delivery.transports.base import Transport
from agent.service import reload
from tests.reliability import memagent

TRIGGER = "fail-on-apply"


def install() -> None:
    """Wrap `reload._commit` so that the trigger namespace raises inside it."""
    commit = reload._commit

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

    reload._commit = failing


if __name__ == "__main__":
    install()
    sys.exit(memagent.main())
