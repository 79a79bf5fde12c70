"""`./run demo --keep-running`: the demo runs the real pipeline, names the zstd codec of the
log the agent followed, and leaves the agent running until Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agentproc import ROOT

pytestmark = pytest.mark.spark


def test_demo_keeps_the_agent_running_until_ctrl_c(tmp_path: Path) -> None:
    """With --keep-running the agent answers `status` after the report; SIGINT to the demo
    stops it with exit 0; the followed log is reported as rolling with codec zstd."""
    out = tmp_path / "demo"
    lines: list[str] = []
    # As a context manager: its pipe is closed however the test ends (an unclosed one would
    # warn later, in whichever test the collector happens to run).
    with subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--out", str(out), "--keep-running"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    ) as demo:
        try:
            assert demo.stdout is not None
            for line in demo.stdout:
                lines.append(line)
                if "Ctrl-C stops it." in line:
                    break
            text = "".join(lines)
            assert "Ctrl-C stops it." in text, text
            followed = [line for line in lines if line.startswith("== the agent followed ")]
            assert len(followed) == 1 and followed[0].endswith("(rolling, codec zstd)\n"), text
            status = subprocess.run(
                [sys.executable, "-m", "agent", "status", "--socket", str(out / "control.sock")],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=ROOT,
            )
            assert status.returncode == 0, status.stderr
            assert demo.poll() is None
            demo.send_signal(signal.SIGINT)
            rest, _ = demo.communicate(timeout=120)
            assert demo.returncode == 0, text + rest
            assert "== agent stopped (exit 0)" in rest
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
            # The agent runs in its own session: stop it too if the demo could not.
            for pid in re.findall(r"the agent keeps running \(pid (\d+)", "".join(lines)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGTERM)
