"""Fixtures shared by the reliability scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agentproc import keygen


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh directory holding the agent's signing key (`ed25519.key`)."""
    keygen(tmp_path)
    return tmp_path
