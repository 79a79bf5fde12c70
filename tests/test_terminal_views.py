"""What `status`, `describe`, `replay` and `verify` print for people: values from event logs
and collectors reach the terminal with their control characters escaped, never raw."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.commands.views import printable, table
from tests.agentproc import AgentProcess, keygen
from tests.samples import sample_bytes
from tests.spark_scenarios import daemon_config, spark_daemon

ROOT = Path(__file__).resolve().parents[1]
#: Clears the screen, then starts a line of its own that looks like a row of the table.
HOSTILE_ID = "app-\x1b[2J\nforged-row  FAILED  9  9  complete"
#: A right-to-left override and a C1 control sequence introducer in the application's name.
HOSTILE_NAME = "exp\u202eevil\x9b31m"
SAMPLE_ID = b"local-1795495169157"


def hostile_log(*, running: bool = False) -> bytes:
    """The real `success` sample with the hostile application id and name in its events;
    `running`: without its ApplicationEnd, as Spark's log of a running application."""
    text = sample_bytes("success")
    if running:
        text = b"".join(
            line for line in text.splitlines(keepends=True) if b"ApplicationEnd" not in line
        )
    text = text.replace(SAMPLE_ID, json.dumps(HOSTILE_ID)[1:-1].encode())
    return text.replace(b'"exp-success"', json.dumps(HOSTILE_NAME).encode())


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    """`lineage-agent ARGS` as an operator runs it; its output as the raw bytes it wrote."""
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, cwd=ROOT, timeout=120
    )


@contextmanager
def log_agent(work: Path, events: Path) -> Iterator[tuple[AgentProcess, Path]]:
    """`lineage-agent run` following `events`, file transport; yields it and its config."""
    config = daemon_config(work, events)
    with spark_daemon(config) as agent:
        yield agent, config


def raw_controls(output: bytes) -> list[str]:
    """Every character of `output` a terminal would act on rather than show (newlines
    between lines aside): C0, DEL, C1, line separators and bidi controls."""
    text = output.decode("utf-8")
    return sorted(
        {
            f"U+{ord(c):04X}"
            for c in text
            if (ord(c) < 0x20 and c != "\n")
            or 0x7F <= ord(c) < 0xA0
            or c in "\u061c\u200e\u200f\u2028\u2029"
            or 0x202A <= ord(c) <= 0x202E
            or 0x2066 <= ord(c) <= 0x2069
        }
    )


def wait_followed(config: Path, seconds: float = 60) -> dict[str, Any]:
    """The `status --json` answer once the agent follows the application with its runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = json.loads(cli("status", "--config", str(config), "--json").stdout)
        if any(
            a["app_id"] == HOSTILE_ID and (a["summary"] or {}).get("runs")
            for a in answer["applications"]
        ):
            return dict(answer)
        time.sleep(0.2)
    raise AssertionError(f"the log was not read within {seconds}s: {answer['applications']}")


def test_status_and_describe_escape_a_hostile_application_id(tmp_path: Path) -> None:
    """An application id with ESC[2J and a newline, and a name with a bidi override and a C1
    control, read from a real event log by the real agent: `status` and `describe` print no
    raw control character, show them escaped, and the id stays on its one table row."""
    events, work = tmp_path / "events", tmp_path / "agent"
    events.mkdir()
    work.mkdir()
    with log_agent(work, events) as (agent, config):
        (events / "local-1795495169157.inprogress").write_bytes(hostile_log(running=True))
        wait_followed(config)

        status = cli("status", "--config", str(config))
        assert status.returncode == 0, status.stderr
        assert raw_controls(status.stdout) == []
        lines = status.stdout.decode().splitlines()
        rows = lines[lines.index("applications") + 3 :]
        assert len(rows) == 1, rows
        assert rows[0].startswith(
            "app-\\x1b[2J\\nforged-row  FAILED  9  9  complete  exp\\u202eevil\\x9b31m  RUNNING  "
        )
        assert rows[0].endswith("  in progress  -")

        described = cli("describe", HOSTILE_ID, "--config", str(config))
        assert described.returncode == 0, described.stderr
        assert raw_controls(described.stdout) == []
        text = described.stdout.decode()
        first, *_ = text.splitlines()
        assert first == (
            "application app-\\x1b[2J\\nforged-row  FAILED  9  9  complete (exp\\u202eevil\\x9b31m)"
        )
        answer = json.loads(cli("describe", HOSTILE_ID, "--config", str(config), "--json").stdout)
        lines = text.splitlines()
        runs = lines[lines.index("runs") + 3 : lines.index("events emitted") - 1]
        assert len(runs) == 1 + len(answer["summary"]["runs"])
        emitted = lines[lines.index("events emitted") + 3 : lines.index("deliveries") - 1]
        assert len(emitted) == len(answer["emitted"]) > 0

        unknown = cli("describe", "app-\x1b]0;pwned\x07", "--config", str(config))
        assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
            1,
            b"",
            b"lineage-agent: unknown application app-\\x1b]0;pwned\\x07: this agent has not "
            b"seen it\n",
        )
        assert agent.stop() == 0


def test_replay_summary_escapes_a_hostile_application_id(tmp_path: Path) -> None:
    """`replay` of the same log prints its table and notes without a raw control character
    and with one row for its one application."""
    log = tmp_path / "local-1795495169157"
    log.write_bytes(hostile_log())
    keygen(tmp_path)
    result = cli(
        "replay",
        str(log),
        "--key",
        str(tmp_path / "ed25519.key"),
        "--output-dir",
        str(tmp_path / "out"),
    )
    assert result.returncode == 0, result.stderr
    assert raw_controls(result.stdout) == []
    lines = result.stdout.decode().splitlines()
    assert lines[2].startswith("app-\\x1b[2J\\nforged-row  FAILED  9  9  complete  exp\\u202e")
    assert lines[3] == ""


def test_printable_escapes_every_control_visibly() -> None:
    """C0, DEL, C1, line separators, bidi controls and lone surrogates come out as escapes;
    printable text (non-ASCII letters included) stays as it is."""
    assert printable("a\x00b\tc\nd\re\x1bf\x7fg\x85h\x9bi") == (
        "a\\x00b\\tc\\nd\\re\\x1bf\\x7fg\\x85h\\x9bi"
    )
    assert printable("\u202aL\u202bR\u202c\u202dl\u202er\u2066\u2067\u2068\u2069\u200e\u200f") == (
        "\\u202aL\\u202bR\\u202c\\u202dl\\u202er\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f"
    )
    assert printable("\u061c\u2028\u2029\udc80") == "\\u061c\\u2028\\u2029\\udc80"
    assert printable("Zürich 東京 ✓") == "Zürich 東京 ✓"
    assert printable(None) == "None"


def test_table_cells_cannot_add_a_row() -> None:
    """A cell with a newline stays in its row, padded as it is shown."""
    assert table(["id", "state"], [["a\nb", "ok"], ["c", None]]) == (
        "id    state\n----  -----\na\\nb  ok\nc"
    )
