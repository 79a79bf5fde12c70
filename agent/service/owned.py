"""Files the agent owns and keeps open: noticing when a path no longer names the file the agent
opened (the state database, the events file and its lock), one log line per change, and what
/healthz reports while it lasts.

The state database and the lock stay wrong until a restart. The events file heals itself: the
next batch opens a new file at the path, and the problem is resolved then."""

from __future__ import annotations

import structlog

from agent.delivery.pipeline import Pipeline
from agent.delivery.transports.file import FileTransport
from agent.state.store import StateStore

log = structlog.get_logger("agent.daemon")

#: What a `file_changed_under_agent` line advises.
FILE_HELP = (
    "the agent keeps using the file it opened, which that path no longer names; restart the "
    "agent (see docs/operations/files.md, 'Files the agent owns')"
)
#: ... and for the events file, which the next write replaces.
EVENTS_FILE_HELP = (
    "events already written are in the file that path named; the next batch starts a new "
    "file at the path"
)


class OwnedFiles:
    """The owned files removed or replaced under the agent, as last checked."""

    def __init__(self) -> None:
        self.problems: dict[str, str] = {}  # path -> "removed" / "replaced"

    def described(self) -> list[str]:
        return [f"{path} {change}" for path, change in sorted(self.problems.items())]

    def check(self, state_db: StateStore | None, pipeline: Pipeline | None) -> None:
        """Notice the state database, an events file or its lock removed or replaced under
        the running agent: one log line per change, and /healthz is not ok while it lasts."""
        found: dict[str, str] = {}
        healing: set[str] = set()  # events files: the next write opens a new one
        if state_db is not None:
            change = state_db.file_change()
            if change is not None:
                found[str(state_db.path)] = change
        for delivery in pipeline.deliveries.values() if pipeline else ():
            transport = delivery.transport
            if not isinstance(transport, FileTransport):
                continue
            if change := transport.lock_change():
                found[f"{transport.path}.lock"] = change
            if change := transport.file_change():
                found[transport.path] = change
                healing.add(transport.path)
        for path, change in found.items():
            if self.problems.get(path) != change:
                detail = EVENTS_FILE_HELP if path in healing else FILE_HELP
                log.error("file_changed_under_agent", path=path, change=change, detail=detail)
        for path in self.problems.keys() - found.keys():
            log.info("file_change_resolved", path=path)
        self.problems = found
