"""The memory-source agent (`tests.reliability.memagent`) with a fault injected into reload:
applying a config whose `lineage.namespace` is `fail-on-apply` raises RuntimeError after its
transports were built, where no config the loader accepts can fail:

    python -m tests.reliability.faultagent --config FILE --events N [--rate R]
"""

from __future__ import annotations

import sys

from agent import daemon
from agent.config import AgentConfig
from agent.signing import Signer
from agent.transports.base import Transport
from tests.reliability import memagent

TRIGGER = "fail-on-apply"


def install() -> None:
    """Wrap `Daemon._commit` so that the trigger namespace raises inside it."""
    commit = daemon.Daemon._commit

    def failing(
        self: daemon.Daemon,
        new: AgentConfig,
        signer: Signer,
        transports: dict[str, Transport],
    ) -> None:
        if new.lineage.namespace == TRIGGER:
            raise RuntimeError("injected fault")
        commit(self, new, signer, transports)

    daemon.Daemon._commit = failing  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(memagent.main())
