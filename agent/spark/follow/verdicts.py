"""The verdicts of `lineage-agent exec` on the Spark side: where the translator finds them and
how long the end of an application waits for one.

A verdict (how the command that ran an application ended) reaches the daemon over the
control socket and waits in the state database (`StateDB.record_verdict`), so that it applies
whether it comes before the application's log appears, while the log is read, or before a
restart of the agent. An application whose Spark properties name a run of `exec` is held at
ApplicationEnd until its verdict is there, at most `spark.exec_verdict_wait` from the moment
the agent read ApplicationEnd (after a restart the wait starts again: nothing was emitted);
then it ends as Spark logged it and `exec_verdict_missing` says so.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from agent.spark.follow.application import VerdictLookup
from agent.spark.follow.followed import Followed
from agent.spark.translate.facets.verdict import Verdict
from agent.state.store import StateStore

log = structlog.get_logger("agent.spark")


def lookup(state: StateStore) -> VerdictLookup:
    """The translator's way to the verdicts the state database keeps."""

    def verdict(exec_id: str) -> Verdict | None:
        try:
            row = state.verdict(exec_id)
        except state.write_errors:  # locked for a moment: the next pass looks again
            return None
        return None if row is None else Verdict(*row)

    return verdict


def overdue(app: Followed, wait: float) -> list[dict[str, Any]]:
    """End an application that waited `wait` seconds for its verdict without it: the events
    of its end as Spark logged it; nothing while it still may wait."""
    translator = app.log.translator
    if not translator.awaiting_verdict:
        return []
    now = time.monotonic()
    if app.verdict_since is None:
        app.verdict_since = now
    if now - app.verdict_since < wait:
        return []
    log.warning(
        "exec_verdict_missing",
        log=app.log.ref.path,
        app_id=translator.app_id,
        exec_id=translator.exec_id,
        waited_seconds=wait,
        detail="the application ends as its event log says; a verdict that comes later is "
        "not applied",
    )
    return translator.settle(None)
