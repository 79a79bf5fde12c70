"""`job stop` of a driver that runs as another user than the agent (real PySpark driver, the
agent as the shipped unit runs it). Alone in its file: the test runs while no other test
runs (`alone`), and the suite hands this file out last (tests/order.py), when the other
workers are finishing short files, not in the middle of a Spark module."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark_scenarios import wait_events
from tests.test_other_user import (
    agent_config,
    control,
    idle_app,
    other_agent,
    outline,
    public_base,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def base() -> Iterator[Path]:
    with public_base() as path:
        yield path


@pytest.mark.alone  # job stop matches the driver among the machine's SparkSubmit JVMs
def test_job_stop_of_another_users_driver(public_agent: Path, base: Path) -> None:
    """Without CAP_KILL `job stop` names the driver it found and says why it cannot signal
    it; the same agent restarted with CAP_KILL (the documented drop-in) stops it, and the
    application's run ends ABORT with the reason."""
    config = agent_config(base)
    out = config.parent / "lineage.jsonl"
    with idle_app(base, "off") as app:
        app_id = app.wait("started")
        with other_agent(public_agent, config) as agent:
            app.wait("first-done")
            wait_events(out, lambda ev: len(ev) == 3)
            refused = control(public_agent, config, "job", "stop", app_id, "--reason", "r")
            assert refused.returncode == 1, refused.stdout + refused.stderr
            match = re.fullmatch(
                r"lineage-agent: cannot signal driver pid (\d+): it belongs to another user "
                r"and the agent \(uid 65534\) lacks CAP_KILL \(see "
                r"docs/operations/commands\.md, 'Stopping a job'\)\n",
                refused.stderr,
            )
            assert match, refused.stderr
            driver = int(match.group(1))
            stat = Path(f"/proc/{driver}/stat").read_text()
            assert int(stat[stat.rfind(")") + 2 :].split()[1]) == app.process.pid  # its JVM
            assert agent.stop() == 0
        assert app.process.poll() is None  # nothing was signalled
        with other_agent(public_agent, config, caps=("kill",)):
            stopped = control(public_agent, config, "job", "stop", app_id, "--reason", "drain")
            assert stopped.returncode == 0, stopped.stderr
            assert stopped.stdout.startswith(f"stopped {app_id} (driver pid {driver}")
            events = wait_events(out, lambda ev: len(ev) == 4)
    assert outline(events)[3] == ("ABORT", "")
    assert "drain" in str(events[3]["run"]["facets"]["errorMessage"]["message"])
