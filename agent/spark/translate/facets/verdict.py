"""What `lineage-agent exec` tells about an application: the command that ran it and how that
command ended (the verdict), and the scheduler run that launched it. Pure.

`lineage-agent exec` ties the applications a command starts to the command with Spark
properties it passes through the environment (`SPARK_SUBMIT_OPTS`, so they appear in the
event log's Spark properties): `spark.lineageAgent.exec`, the id of that one execution of
the command, and `spark.lineageAgent.parent` / `spark.lineageAgent.rootParent`, the scheduler's
`OPENLINEAGE_PARENT_ID` / `OPENLINEAGE_ROOT_PARENT_ID` (`namespace/job/runId`), used for the
`parent` facet when no `spark.openlineage.parent*` property is set.

The application's terminal state with a verdict, the first rule that applies:

1. ABORT     after `job stop` (the translator applies it, whatever the verdict);
2. FAIL      the command exited non-zero or was killed by a signal: the exit status and the
             last lines of its stderr in `errorMessage`, even when Spark logged exit code 0;
3. otherwise the rules of `model.application_end`, except that a failed last job or execution
             no longer makes the application FAIL: the program exited 0, so it dealt with it.

A log that ends without ApplicationEnd (the driver was lost) ends the application FAIL as
before; the verdict, when there is one, says in `errorMessage` how the command ended
(`lost_driver`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agent.spark.translate.execprops import EXEC, PARENT, ROOT_PARENT
from agent.spark.translate.facets.events import RunRef
from agent.spark.translate.model import Failure, application_end
from agent.spark.translate.values import as_uuid

PROPERTIES: Final = frozenset({EXEC, PARENT, ROOT_PARENT})
#: How the child runs still open at ApplicationEnd end (ABORT).
CANCELLED_AT_END: Final = Failure(
    "shutdown",
    "the application ended before this run finished: Spark cancels running jobs "
    "because SparkContext was shut down",
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the command that ran the application ended, as `lineage-agent exec` saw it."""

    status: int  # its exit status; 128 + N when signal N killed it, as a shell says
    signal: str | None  # the signal's name when one killed it
    stderr_tail: str  # the last lines it wrote to stderr
    requested_by: str  # who reported it (the control socket's peer)


@dataclass(frozen=True, slots=True)
class AppEnd:
    """What ApplicationEnd said, kept while the application's end waits for a verdict."""

    time_ms: int
    exit_code: int | None
    in_flight: bool
    last: Failure | None


def application_state(end: AppEnd, verdict: Verdict | None) -> tuple[str, Failure | None]:
    """The application's terminal state and failure (see the module docstring)."""
    last = end.last
    if verdict is None:
        return application_end(end.exit_code, end.in_flight, last)
    if verdict.status != 0:
        return "FAIL", _failed(verdict, last)
    if last is not None and last.outcome == "failed":
        last = None
    return application_end(end.exit_code, end.in_flight, last)


def _failed(verdict: Verdict, last: Failure | None) -> Failure:
    if verdict.signal:
        how = f"was killed by {verdict.signal} (exit status {verdict.status})"
    else:
        how = f"exited with status {verdict.status}"
    message = f"the command run by lineage-agent exec {how}"
    if verdict.stderr_tail:
        message = f"{message}; the last lines of its stderr:\n{verdict.stderr_tail}"
    stack = last.stack if last is not None and last.outcome == "failed" else None
    return Failure("failed", message, stack)


def lost_driver(message: str, verdict: Verdict) -> Failure:
    """The failure of an application whose log ended without ApplicationEnd, with what its
    command's verdict adds: how it exited, and its stderr's last lines."""
    told = _failed(verdict, None).message
    return Failure("failed", f"{message}; {told}")


def scheduler_run(value: str | None) -> RunRef | None:
    """A run given as `namespace/job/runId` (Airflow's `lineage_parent_id` macro); None
    unless it has three non-empty parts and a UUID."""
    parts = value.split("/") if value else []
    if len(parts) != 3:
        return None
    namespace, name, run_id = parts[0], parts[1], as_uuid(parts[2])
    return RunRef(namespace, name, run_id) if namespace and name and run_id else None
