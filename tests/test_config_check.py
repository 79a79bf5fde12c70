"""`lineage-agent config check`: every problem in one run with file:line and a hint, notes
for what only the node can tell, `--syntax-only` for CI, the same default path as `run`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.commands.arguments import DEFAULT_CONFIG
from agent.commands.cli import build_parser
from tests.agentproc import ROOT

EXAMPLES = sorted(p.name for p in (ROOT / "config").glob("*.yaml"))
# What a fresh CI machine has: no HOME, no OPENLINEAGE_* variables, no token.
FRESH_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def check(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "agent", "config", "check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**(env if env is not None else os.environ), "PYTHONPATH": str(ROOT)},
    )
    return done.returncode, done.stdout, done.stderr


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_every_error_of_the_file_in_one_run(tmp_path: Path) -> None:
    """Four bad keys in different sections: all four, in file order, each with file:line."""
    config = write(
        tmp_path / "bad.yaml",
        """\
        lineage:
          queue_size: many
          drain_timeout: forever
          file:
            rotaton_size_mb: 1
        spark: {poll_interval: 0s}
        """,
    )
    assert check(str(config)) == (
        78,
        "",
        f"lineage-agent: {config}:2: lineage.queue_size: expected an integer from 0 to "
        "1000000, got 'many'\n"
        f"lineage-agent: {config}:3: lineage.drain_timeout: expected a duration like 5s or "
        "500ms, got 'forever'\n"
        f"lineage-agent: {config}:5: lineage.file.rotaton_size_mb: unknown key (did you mean "
        "'rotation_size_mb'?)\n"
        f"lineage-agent: {config}:6: spark.poll_interval: expected a duration > 0s and <= 1h, "
        "got '0s'\n",
    )


def test_start_checks_name_file_line_and_hint(tmp_path: Path) -> None:
    """Problems found after the file parsed (key path and state directory below a regular
    file) are all told, at the line of their key, each with its hint."""
    blocker = tmp_path / "plain-file"
    blocker.write_text("x\n")
    config = write(
        tmp_path / "c.yaml",
        f"""\
        lineage: {{transport: file, file: {{path: {tmp_path}/events.jsonl}}}}
        spark: {{event_log_dirs: [{tmp_path}]}}
        signing:
          key_path: {blocker}/ed25519.key
        state_dir: {blocker}/state
        """,
    )
    assert check(str(config)) == (
        78,
        "",
        f"lineage-agent: {config}:4: signing.key_path: {blocker}/ed25519.key: cannot create "
        "private key file: Not a directory\n"
        "lineage-agent: hint: leave the path free and the agent makes the key at its first "
        "start, or make one now with `lineage-agent keygen --out PATH` as the service's user\n"
        f"lineage-agent: {config}:5: state_dir: {blocker}/state: cannot create state "
        "directory: Not a directory\n"
        "lineage-agent: hint: /var/lib/lineage-agent is the unit's StateDirectory=, the one "
        "place the shipped unit lets the agent write\n",
    )


@pytest.fixture
def listening() -> object:
    """A loopback socket that accepts connections (the collector's port)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_notes_for_what_only_the_node_can_tell(tmp_path: Path, listening: socket.socket) -> None:
    """A missing event-log directory and an endpoint that refuses connections are notes
    after `ok`; an existing directory and a listening endpoint give none."""
    port = listening.getsockname()[1]
    missing = tmp_path / "no-spark-events"
    dead = f"http://127.0.0.1:{closed_port()}/api/v1/lineage"
    config = write(
        tmp_path / "c.yaml",
        f"""\
        lineage:
          transport: http
          http: {{endpoint: "{dead}", batch_endpoint: "http://127.0.0.1:{port}/b"}}
        spark: {{event_log_dirs: [{missing}, {tmp_path}]}}
        signing: {{key_path: {tmp_path}/key}}
        state_dir: {tmp_path}/state
        """,
    )
    code, out, err = check(str(config))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "ok"
    assert out.splitlines()[2:] == [
        f"note: lineage.http.endpoint: {dead}: no connection from here (Connection refused); "
        "the agent keeps events queued until the collector answers",
        f"note: spark.event_log_dirs[0]: {missing}: no such directory here; the agent waits "
        "for it to appear (check spark.eventLog.dir of the cluster)",
    ]


def test_unreachable_endpoint_note_hides_url_credentials(tmp_path: Path) -> None:
    """The note of an endpoint with no connection shows its URL without user info or query
    values, either of which may be a credential."""
    port = closed_port()
    config = write(
        tmp_path / "c.yaml",
        f"""\
        lineage:
          transport: http
          http: {{endpoint: "http://127.0.0.1:{port}/api/v1/lineage?api_key=k3y-s3cret"}}
        spark: {{event_log_dirs: [{tmp_path}]}}
        signing: {{key_path: {tmp_path}/key}}
        state_dir: {tmp_path}/state
        """,
    )
    code, out, err = check(str(config))
    assert (code, err) == (0, "")
    assert "k3y-s3cret" not in out
    assert (
        f"note: lineage.http.endpoint: http://127.0.0.1:{port}/api/v1/lineage?api_key=***: "
        "no connection from here"
    ) in out


def test_syntax_only_reads_the_file_alone(tmp_path: Path) -> None:
    """--syntax-only passes a file whose key cannot be made, whose token is not set and whose
    directories are missing, prints only `ok`; a bad key is still an error with its line."""
    blocker = tmp_path / "plain-file"
    blocker.write_text("x\n")
    text = f"""\
        lineage:
          transport: http
          http:
            endpoint: https://lineage.example.com/api/v1/lineage
            auth: {{type: bearer, token_env: SOME_TOKEN}}
            ca_file: /nonexistent/ca.pem
        spark: {{event_log_dirs: [/nonexistent/spark-events]}}
        signing: {{key_path: {blocker}/ed25519.key}}
        state_dir: {blocker}/state
        """
    config = write(tmp_path / "c.yaml", text)
    assert check("--syntax-only", str(config), env=FRESH_ENV) == (0, "ok\n", "")
    assert check(str(config), env=FRESH_ENV)[0] == 78
    write(tmp_path / "c.yaml", text.replace("transport: http", "transport: htp"))
    assert check("--syntax-only", str(config), env=FRESH_ENV) == (
        78,
        "",
        f"lineage-agent: {config}:2: lineage.transport: expected one of 'http', 'file', 'kafka', "
        "'console', got 'htp'\n",
    )


@pytest.mark.parametrize("name", EXAMPLES)
def test_shipped_examples_pass_syntax_only_on_a_fresh_machine(name: str, tmp_path: Path) -> None:
    """Every config/*.yaml passes `config check --syntax-only` with an empty environment, from
    an unrelated directory, with nothing of the agent installed: `ok`, and where the
    settings written in the OpenLineage client's shape came from (and where the agent does
    otherwise than the client)."""
    code, out, err = check(
        "--syntax-only", str(ROOT / "config" / name), cwd=tmp_path, env=FRESH_ENV
    )
    assert (code, err) == (0, "")
    assert out.startswith("ok\n")
    assert all(line.startswith(("from: ", "differs: ")) for line in out.splitlines()[1:]), out


def test_relative_paths_are_told_where_they_resolve(tmp_path: Path) -> None:
    """A relative path resolves against the config file's folder, and config check (also
    --syntax-only) says so, with the absolute path it became."""
    config = write(
        tmp_path / "c.yaml",
        """\
        lineage: {transport: file, file: {path: out/events.jsonl}}
        spark: {event_log_dirs: [/var/log/spark-events]}
        """,
    )
    assert check("--syntax-only", str(config)) == (
        0,
        f"ok\nnote: lineage.file.path: 'out/events.jsonl' is relative: taken from the config "
        f"file's folder {tmp_path}, so it is {tmp_path}/out/events.jsonl; the shipped unit "
        "keeps /etc read-only, so give what the agent writes as an absolute path\n",
        "",
    )


def test_config_check_defaults_to_the_path_run_and_status_use() -> None:
    """With no FILE, config check reads /etc/lineage-agent/config.yaml, as run and status do."""
    parser = build_parser()
    assert parser.parse_args(["config", "check"]).file == DEFAULT_CONFIG
    assert parser.parse_args(["run"]).config == DEFAULT_CONFIG
    assert parser.parse_args(["status"]).config == DEFAULT_CONFIG
    if not os.path.exists(DEFAULT_CONFIG):
        assert check() == (
            78,
            "",
            f"lineage-agent: {DEFAULT_CONFIG}: cannot read: No such file or directory\n",
        )


def test_run_names_every_error_too(tmp_path: Path) -> None:
    """`run` refuses a file with two bad keys with both, each on its own line, exit 78."""
    config = write(tmp_path / "bad.yaml", "lineage:\n  queue_size: many\n  enabeld: true\n")
    done = subprocess.run(
        [sys.executable, "-m", "agent", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        78,
        "",
        f"lineage-agent: {config}:2: lineage.queue_size: expected an integer from 0 to "
        "1000000, got 'many'\n"
        f"lineage-agent: {config}:3: lineage.enabeld: unknown key (did you mean 'enabled'?)\n",
    )
