"""Opening the state the config names: PostgreSQL at `state_url`, else SQLite in `state_dir`."""

from __future__ import annotations

import os
import socket

from agent.config.model import AgentConfig
from agent.state.db import StateDB
from agent.state.postgres import PostgresState
from agent.state.store import StateStore


def agent_id() -> str:
    """This agent among those sharing a state database: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def open_state(config: AgentConfig) -> StateStore:
    """The state database of `config`; StateError (its message ready for the operator)."""
    if config.state_url is None:
        return StateDB(config.state_dir)
    return PostgresState(
        config.state_url,
        owner=agent_id(),
        password_file=config.state_password_file,
        lease_seconds=config.state_lease,
    )
