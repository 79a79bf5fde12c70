"""The exit codes of `lineage-agent`, picked by the commands alone, and the one way a command
tells a problem (on stderr, prefixed with the program's name).

Exit codes: 0 ok, 1 a check failed (verify, replay) or the agent's source died (run: systemd
restarts it), 2 usage, 78 (EX_CONFIG) configuration or start-up refusal, so that systemd's
RestartPreventExitStatus=78 stops a restart loop, 130 interrupted. `exec` exits with its
command's status (128 + N when signal N killed it), 126 / 127 when the command cannot be run
or is not found, as a shell does.
"""

from __future__ import annotations

import sys

EX_OK = 0
EX_FAILED = 1
EX_USAGE = 2
EX_NOT_EXECUTABLE = 126  # `exec`: the command was found but cannot be run, as a shell says
EX_NOT_FOUND = 127  # `exec`: no such command
EX_CONFIG = 78
EX_INTERRUPTED = 130


def say(message: str) -> None:
    """One problem on stderr, as `lineage-agent: message`."""
    print(f"lineage-agent: {message}", file=sys.stderr)
