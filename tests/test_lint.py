"""The code stays linted, formatted and strictly typed: CI fails on the first regression."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "agent", "tests", "scripts", "examples"],
        ["ruff", "format", "--check", "agent", "tests", "scripts", "examples"],
        ["mypy", "agent", "tests"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_is_clean(command: list[str]) -> None:
    """ruff (lint and format) and mypy --strict report nothing."""
    result = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
