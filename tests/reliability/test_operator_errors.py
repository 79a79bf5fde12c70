"""Operator mistakes, made for real against real agents: out-of-range numbers in the config
(at start, in `config check` and in a SIGHUP), configs `config check` must refuse exactly as
`run` does, a second agent on the same control socket, the `pubkey` scripting path and bad
`job stop --grace` values."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import os
import shutil
import signal
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import pytest
import yaml

from agent.commands.cli import main
from agent.config.model import AgentConfig, Bounds, fields_of
from agent.service.control.client import request
from tests.agentproc import AgentProcess, keygen, metric
from tests.otheruser import NOBODY, as_user
from tests.otheruser import public_dir as other_users_dir
from tests.reliability.harness import (
    PATIENCE,
    ROOT,
    agent,
    assert_healthy,
    cli,
    config_file,
    file_lineage,
    memory_agent,
    read_jsonl,
    settle,
    stop_and_account,
    wait_until,
)

# -- pubkey ------------------------------------------------------------------------------------


def test_pubkey_output_feeds_verify_in_a_shell(workdir: Path) -> None:
    """`verify F --public-key $(lineage-agent pubkey --key K)` works as written in a shell."""
    target = workdir / "events.jsonl"
    config = config_file(workdir, file_lineage(target))
    with memory_agent(config, 12) as process:
        settle(process, "file", 12)
        stop_and_account(process)
    key = workdir / "ed25519.key"
    shown = cli("pubkey", "--key", str(key))
    assert shown.returncode == 0
    public, key_id = shown.stdout.strip(), cli("pubkey", "--key", str(key), "--id").stdout.strip()
    assert shown.stdout == f"{public}\n"
    assert shown.stderr == f"key id: {key_id}\n"
    assert key_id.startswith("sha256:") and "\n" not in key_id
    agent = f"{sys.executable} -m agent"
    script = f'{agent} verify "$1" --public-key $({agent} pubkey --key "$2")'
    result = subprocess.run(
        ["bash", "-c", script, "verify", str(target), str(key)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        cwd=ROOT,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "12 events checked, 12 verified, 0 failed\n",
        "key id: " + key_id + "\n",
    )


# -- job stop --grace --------------------------------------------------------------------------


@pytest.mark.parametrize("grace", ["nan", "inf", "-inf", "1e400", "-5", "3600.5", "soon", ""])
def test_job_stop_grace_out_of_range_is_a_usage_error(tmp_path: Path, grace: str) -> None:
    """`job stop --grace` outside 0..3600 seconds is an argparse error (exit 2), no traceback."""
    result = cli("job", "stop", "app-1", f"--grace={grace}", "--socket", str(tmp_path / "s"))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "lineage-agent job stop: error: argument --grace: expected a duration from 0 to 1h "
        f"(like 30s or 5m), got {grace!r}"
    )
    assert "Traceback" not in result.stderr


def test_job_stop_grace_checked_by_the_agent_too(workdir: Path) -> None:
    """A control request with a grace outside 0..3600 is refused by the running agent."""
    config = config_file(workdir, file_lineage(workdir / "events.jsonl"))
    with memory_agent(config, 3) as process:
        socket = str(workdir / "control.sock")
        for grace, shown in [
            (float("nan"), "nan"),
            (float("inf"), "inf"),
            (-5, "-5"),
            (1e300, "1e+300"),
            ("10", "'10'"),
            (True, "True"),
        ]:
            answer = request(socket, {"command": "job_stop", "app_id": "memory", "grace": grace})
            assert answer == {
                "ok": False,
                "error": f"grace: expected seconds from 0 to 3600, got {shown}",
            }
        answer = request(socket, {"command": "job_stop", "app_id": "memory", "grace": 0})
        assert answer == {"ok": False, "error": "application memory is not running on this node"}
        assert_healthy(process)
        stop_and_account(process)
    for grace in ("0", "3600", "2.5"):
        result = cli("job", "stop", "memory", "--grace", grace, "--socket", socket)
        assert (result.returncode, result.stderr) == (
            1,
            f"lineage-agent: {socket}: no agent is listening (is lineage-agent running?)\n",
        )


# -- numbers in the config ---------------------------------------------------------------------

#: Every number of the config and the range its error message states; a number field added
#: without an entry here fails `test_every_number_has_both_bounds`.
RANGES = {
    "lineage.queue_size": "an integer from 0 to 1000000",
    "lineage.drain_timeout": "a duration from 0s to 1h",
    "lineage.http.timeout": "a duration > 0s and <= 10m",
    "lineage.http.batch_size": "an integer from 1 to 10000",
    "lineage.http.concurrency": "an integer from 1 to 64",
    "lineage.http.late_answer_wait": "a duration from 0s to 1h",
    "lineage.http.auth.token_refresh_buffer": "a duration from 0s to 1h",
    "lineage.http.retry.total": "an integer from 0 to 100",
    "lineage.http.retry.connect": "an integer from 0 to 100",
    "lineage.http.retry.read": "an integer from 0 to 100",
    "lineage.http.retry.status": "an integer from 0 to 100",
    "lineage.http.retry.backoff_factor": "a duration from 0s to 1h",
    "lineage.http.retry.backoff_max": "a duration from 0s to 1h",
    "lineage.http.retry.backoff_jitter": "a duration from 0s to 1h",
    "lineage.spool.max_size_mb": "a number from 1 to 1048576",
    "lineage.file.rotation_size_mb": "a number from 0 to 1048576",
    "liveness.max_requests_per_second": "a number from 0.1 to 1000",
    "spark.poll_interval": "a duration > 0s and <= 1h",
    "spark.stale_after": "a duration > 0s and <= 30d",
    "spark.running_interval": "a duration from 0s to 1d",
    "spark.replay_horizon": "a duration from 0s to 3650d",
    "spark.max_line_bytes": "an integer from 1024 to 1073741824",
    "spark.column_lineage_max_fields": "an integer from 0 to 100000",
    "spark.exec_verdict_wait": "a duration from 0s to 1h",
    "spark.master_ui_port": "an integer from 1 to 65535",
    "spark.store_poll_interval": "a duration > 0s and <= 1h",
    "spark.store_request_timeout": "a duration > 0s and <= 1h",
    "spark.store_horizon": "a duration from 0s to 3650d",
    "state_lease": "a duration from 1s to 1h",
}
HUGE = int("9" * 400)
HUGE_SHOWN = "9" * 77 + "..."


def numbers(cls: type = AgentConfig, prefix: str = "") -> Iterator[tuple[str, Bounds]]:
    """(dotted key, bounds) of every number field of the config schema."""
    for name, hint in fields_of(cls).items():
        key = f"{prefix}{name}"
        if get_origin(hint) in (typing.Union, type(int | None)):
            (hint,) = (a for a in get_args(hint) if a is not type(None))
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from numbers(hint, f"{key}.")
        elif get_origin(hint) is Annotated:
            bounds = [e for e in get_args(hint)[1:] if isinstance(e, Bounds)]
            if bounds:
                yield key, bounds[0]


def numbers_config(directory: Path, **values: Any) -> Path:
    """A file-transport config with an unused http section, `values` (dotted keys) set in it."""
    (directory / "spark-events").mkdir(exist_ok=True)
    config = config_file(
        directory,
        {
            **file_lineage(directory / "events.jsonl"),
            # jwt auth for its numbers: a token from any variable every environment has
            "http": {
                "endpoint": "https://127.0.0.1:9/api/v1/lineage",
                "auth": {
                    "type": "jwt",
                    "token_endpoint": "https://127.0.0.1:9/token",
                    "token_env": "PATH",
                },
            },
        },
        spark={"event_log_dirs": [str(directory / "spark-events")]},
    )
    document = yaml.safe_load(config.read_text())
    for key, value in values.items():
        *parents, leaf = key.split(".")
        node = document
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    staged = config.with_suffix(".new")
    staged.write_text(yaml.safe_dump(document))
    staged.rename(config)  # whole files only: a reload never reads half of one
    return config


def line_of(config: Path, key: str) -> int:
    """The line of the last part of a dotted key (each leaf name occurs once in these files)."""
    leaf = key.rsplit(".", 1)[-1] + ":"
    (line,) = (
        n
        for n, text in enumerate(config.read_text().splitlines(), 1)
        if text.strip().startswith(leaf)
    )
    return line


def refusal(config: Path, key: str, shown: str) -> str:
    return f"{config}:{line_of(config, key)}: {key}: expected {RANGES[key]}, got {shown}"


def above(bounds: Bounds) -> int:
    return int(bounds.high) + 1


def test_every_number_has_both_bounds() -> None:
    """Every number of the config schema has a finite upper bound, stated in RANGES."""
    found = dict(numbers())
    assert sorted(found) == sorted(RANGES)
    assert all(b.high < 2**53 for b in found.values())


def checked(config: Path) -> tuple[int, str, str]:
    """`config check` through the command line's own entry point, in this process: the same
    code as `lineage-agent config check`, without a Python start for each of the hundred
    numbers (the command line itself is run below, once for each outcome)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["config", "check", str(config)])
    return code, out.getvalue(), err.getvalue()


def test_numbers_out_of_range_refused_by_check_and_run(workdir: Path) -> None:
    """Numbers past their bounds: `config check` and `run` refuse them alike; the maxima pass."""
    for key, bounds in numbers():
        for value, shown in ((HUGE, HUGE_SHOWN), (above(bounds), str(above(bounds)))):
            config = numbers_config(workdir, **{key: value})
            expected = (78, "", f"lineage-agent: {refusal(config, key, shown)}\n")
            assert checked(config) == expected
    result = cli("config", "check", str(config))
    assert (result.returncode, result.stdout, result.stderr) == expected
    highest = {key: int(b.high) if float(b.high).is_integer() else b.high for key, b in numbers()}
    config = numbers_config(workdir, **highest)
    assert checked(config) == (0, "ok\n", "")
    assert cli("config", "check", str(config)).stdout == "ok\n"
    config = numbers_config(workdir, **{"lineage.queue_size": HUGE})
    with agent(config, wait=False) as process:
        assert process.proc.wait(PATIENCE) == 78
    assert process.raw_output() == (
        f"lineage-agent: {refusal(config, 'lineage.queue_size', HUGE_SHOWN)}\n"
    )


def reload_failures(process: AgentProcess) -> list[str]:
    return [str(line["error"]) for line in process.logs() if line.get("event") == "reload_failed"]


def test_sighup_with_out_of_range_numbers_keeps_the_agent_running(workdir: Path) -> None:
    """SIGHUP with any number out of range is reload_failed; the old config keeps shipping."""
    events = 3000
    config = numbers_config(workdir)
    with memory_agent(config, events, 200.0) as process:
        expected = []
        for key, _bounds in numbers():
            numbers_config(workdir, **{key: HUGE})
            expected.append(refusal(config, key, HUGE_SHOWN))
            process.signal(signal.SIGHUP)
            wait_until(
                f"reload of {key} refused", lambda: len(reload_failures(process)) == len(expected)
            )
            assert_healthy(process)
        assert reload_failures(process) == expected
        numbers_config(workdir, **{"lineage.queue_size": 7})
        process.signal(signal.SIGHUP)
        process.wait_log("reload_ok", timeout=PATIENCE)
        samples = settle(process, "file", events)
        assert metric(samples, "lineage_config_reloads_total", result="error") == len(expected)
        assert metric(samples, "lineage_queue_capacity", transport="file") == 7
        assert_healthy(process)
        accounting = stop_and_account(process)
    assert accounting["file"]["delivered"] == len(read_jsonl(workdir / "events.jsonl"))


def lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_unexpected_error_while_applying_a_reload_keeps_the_old_config(workdir: Path) -> None:
    """Any exception while a reload is applied is reload_failed; nothing built for it leaks."""
    events, old, new = 4000, workdir / "events.jsonl", workdir / "other" / "events.jsonl"
    config = config_file(workdir, file_lineage(old))
    document = yaml.safe_load(config.read_text())

    def write(lineage: dict[str, Any]) -> None:
        staged = config.with_suffix(".new")
        staged.write_text(yaml.safe_dump({**document, "lineage": {"enabled": True, **lineage}}))
        staged.rename(config)

    faulty = ("tests.reliability.faultagent", "--events", str(events), "--rate", "200")
    with agent(config, *faulty) as process:
        write({**file_lineage(new), "namespace": "fail-on-apply"})
        process.signal(signal.SIGHUP)
        failed = process.wait_log("reload_failed", timeout=PATIENCE)
        assert failed["error"] == "internal error: RuntimeError('injected fault')"
        assert failed["detail"] == "keeping the running configuration"
        assert lock_is_free(Path(f"{new}.lock"))  # the transport built for it was closed
        before = len(read_jsonl(old))
        wait_until("the old config still ships", lambda: len(read_jsonl(old)) > before + 50)
        assert_healthy(process)
        write(file_lineage(new))
        process.signal(signal.SIGHUP)
        process.wait_log("reload_ok", timeout=PATIENCE)
        wait_until("the new file is written", lambda: new.exists() and len(read_jsonl(new)) > 0)
        samples = settle(process, "file", events)
        assert metric(samples, "lineage_config_reloads_total", result="error") == 1
        accounting = stop_and_account(process)
    assert accounting["file"]["delivered"] == len(read_jsonl(old)) + len(read_jsonl(new))


# -- the control socket ------------------------------------------------------------------------


def inode(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return (info.st_dev, info.st_ino)


def pid_on(path: Path) -> int:
    """The pid the agent answering on the control socket at `path` reports."""
    answer = request(str(path), {"command": "status"}, timeout=30)
    assert answer["ok"], answer
    return int(answer["pid"])


def test_second_agent_on_the_same_control_socket_refuses(workdir: Path) -> None:
    """A second agent on a live agent's control socket refuses to start and leaves it alone."""
    shared = workdir / "run" / "control.sock"
    first_dir, second_dir = workdir / "first", workdir / "second"
    for directory in (first_dir, second_dir):
        directory.mkdir()
        (directory / "ed25519.key").hardlink_to(workdir / "ed25519.key")
    first = config_file(
        first_dir, file_lineage(first_dir / "events.jsonl"), control_socket=str(shared)
    )
    second = config_file(
        second_dir, file_lineage(second_dir / "events.jsonl"), control_socket=str(shared)
    )
    with memory_agent(first, 500, 50.0) as process:
        bound = inode(shared)
        with memory_agent(second, 10, wait=False) as intruder:
            assert intruder.proc.wait(PATIENCE) == 78
        message = (
            f"control_socket: another lineage-agent (pid {process.proc.pid}) is listening on "
            f"{shared}; give each agent its own control_socket, or stop the other one first"
        )
        assert intruder.wait_log("start_refused")["error"] == message
        assert intruder.raw_output().splitlines()[-1] == f"lineage-agent: {message}"
        assert "Traceback" not in intruder.raw_output()
        assert not (second_dir / "events.jsonl").exists()  # it opened nothing
        assert inode(shared) == bound
        assert pid_on(shared) == process.proc.pid
        process.signal(signal.SIGHUP)
        process.wait_log("reload_ok", timeout=PATIENCE)
        assert pid_on(shared) == process.proc.pid
        assert_healthy(process)
        stop_and_account(process)
    assert not shared.exists()  # its own socket is removed at stop


def listener(path: Path) -> Any:
    """A socket listening at `path` that never answers (another program's)."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(8)
    return sock


def test_control_socket_of_another_process_is_never_removed(workdir: Path) -> None:
    """Stale sockets are replaced, removed ones rebound at SIGHUP, foreign ones never removed."""
    import socket

    path = workdir / "run" / "control.sock"
    path.parent.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))  # bound, never listening: what a killed agent leaves
    config = config_file(workdir, file_lineage(workdir / "events.jsonl"), control_socket=str(path))
    with memory_agent(config, 500, 50.0) as process:
        assert pid_on(path) == process.proc.pid
        path.unlink()  # an operator's mistake: the agent is unreachable until a reload
        process.signal(signal.SIGHUP)
        process.wait_log("control_socket_restored", timeout=PATIENCE, path=str(path))
        assert pid_on(path) == process.proc.pid
        path.unlink()
        with listener(path) as foreign:
            bound = inode(path)
            process.signal(signal.SIGHUP)
            refused = process.wait_log("control_socket_unavailable", timeout=PATIENCE)
            assert refused["error"] == (
                f"control_socket: another process is listening on {path}; give each agent "
                "its own control_socket, or stop the other one first"
            )
            process.wait_log("reload_ok", timeout=PATIENCE)
            assert_healthy(process)
            stop_and_account(process)
            assert inode(path) == bound  # neither the reload nor the stop removed it
            assert foreign.fileno() >= 0


# -- config check and run: one set of start-up checks --------------------------------------


def ssl_refusal(ca_file: Path) -> str:
    """What the ssl module says of a CA bundle it cannot load."""
    import ssl

    try:
        ssl.create_default_context().load_verify_locations(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        return str(exc)
    raise AssertionError(f"{ca_file} loads")


def http_with(**http: Any) -> dict[str, Any]:
    return {"transport": "http", "http": {"endpoint": "http://127.0.0.1:9/api/v1/lineage", **http}}


def start_refusals(workdir: Path) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], str]]:
    """(case, lineage, sections, message) of configs the loader accepts and `run` refuses."""
    key = workdir / "ed25519.key"
    yield (
        "credentials in the endpoint",
        http_with(endpoint="http://user:secret@127.0.0.1:9/api/v1/lineage"),
        {},
        "lineage.http.endpoint: credentials in the URL are not supported; use lineage.http.auth",
    )
    yield (
        "credentials in the batch endpoint",
        http_with(batch_endpoint="http://user@127.0.0.1:9/api/v1/lineage/batch", batch_size=10),
        {},
        "lineage.http.batch_endpoint: credentials in the URL are not supported; use "
        "lineage.http.auth",
    )
    yield (
        "missing ca_file",
        http_with(ca_file=str(workdir / "missing-ca.pem")),
        {},
        f"lineage.http.ca_file: cannot load CA bundle {workdir / 'missing-ca.pem'}: "
        f"{ssl_refusal(workdir / 'missing-ca.pem')}",
    )
    garbage = workdir / "garbage-ca.pem"
    garbage.write_text("not a certificate\n")
    yield (
        "ca_file that is not PEM",
        http_with(ca_file=str(garbage)),
        {},
        f"lineage.http.ca_file: cannot load CA bundle {garbage}: {ssl_refusal(garbage)}",
    )
    yield (
        "empty token variable",
        {
            **http_with(endpoint="https://127.0.0.1:9/api/v1/lineage"),
            "http": {
                "endpoint": "https://127.0.0.1:9/api/v1/lineage",
                "auth": {"type": "bearer", "token_env": "OL_EMPTY_TOKEN"},
            },
        },
        {},
        "lineage.http.auth.token_env: environment variable OL_EMPTY_TOKEN is empty",
    )
    # A missing key is made at the first start; one that cannot be made is refused.
    blocked = workdir / "key-blocker"
    blocked.write_text("a file where the key's directory should be\n")
    yield (
        "missing key file that cannot be made",
        file_lineage(workdir / "events.jsonl"),
        {"signing": {"key_path": str(blocked / "ed25519.key")}},
        f"signing.key_path: {blocked / 'ed25519.key'}: cannot create private key file: "
        "Not a directory",
    )
    malformed = workdir / "malformed.key"
    malformed.write_text("this is no key\n")
    malformed.chmod(0o600)
    yield (
        "malformed key file",
        file_lineage(workdir / "events.jsonl"),
        {"signing": {"key_path": str(malformed)}},
        f"signing.key_path: {malformed}: private key is not valid base64 (expected the base64 "
        "of 32 bytes on one line)",
    )
    open_key = workdir / "open.key"
    open_key.write_bytes(key.read_bytes())
    open_key.chmod(0o644)
    yield (
        "key readable by others",
        file_lineage(workdir / "events.jsonl"),
        {"signing": {"key_path": str(open_key)}},
        f"signing.key_path: {open_key}: private key is accessible by group or others "
        f"(mode 0644); run chmod 600 {open_key}",
    )
    blocker = workdir / "not-a-directory"
    blocker.write_text("a file where the events directory should be\n")
    yield (
        "events directory is a file",
        file_lineage(blocker / "events.jsonl"),
        {},
        f"cannot create directory {blocker}: Not a directory",
    )
    link = workdir / "link.jsonl"
    link.symlink_to(workdir / "elsewhere.jsonl")
    yield (
        "events file is a symbolic link",
        file_lineage(link),
        {},
        f"refusing to write {link}: it is a symbolic link",
    )
    yield (
        "state directory is a file",
        file_lineage(workdir / "events.jsonl"),
        {"state_dir": str(blocker)},
        f"{blocker}: cannot create state directory: File exists",
    )
    yield (
        "state directory below a file",
        file_lineage(workdir / "events.jsonl"),
        {"state_dir": str(blocker / "state")},
        f"{blocker / 'state'}: cannot create state directory: Not a directory",
    )
    (workdir / "a-directory.jsonl").mkdir()
    yield (
        "events file is a directory",
        file_lineage(workdir / "a-directory.jsonl"),
        {},
        f"refusing to write {workdir / 'a-directory.jsonl'}: not a regular file",
    )


def test_config_check_refuses_every_config_run_refuses(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each config `run` refuses before opening anything, `config check` refuses alike (in
    this process for each config, the last one through the command line too)."""
    monkeypatch.setenv("OL_EMPTY_TOKEN", "")
    for case, lineage, sections, message in list(start_refusals(workdir)):
        config = config_file(workdir, lineage, **sections)
        code, stdout, stderr = checked(config)
        # config check places the message in the file and may add a hint; run says it alone
        first, *hints = stderr.splitlines()
        assert (code, stdout) == (78, ""), case
        assert first.startswith(f"lineage-agent: {config}"), case
        assert first.endswith(f": {message}"), case
        assert all(line.startswith("lineage-agent: hint: ") for line in hints), case
        with memory_agent(config, 5, env={"OL_EMPTY_TOKEN": ""}, wait=False) as process:
            assert process.proc.wait(PATIENCE) == 78, case
        assert process.wait_log("start_refused")["error"] == message, case
        assert "Traceback" not in process.raw_output(), case
        assert not (workdir / "control.sock").exists(), case
    result = cli("config", "check", str(config))
    assert (result.returncode, result.stdout, result.stderr) == (78, "", stderr)


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory other users can reach (pytest's own are root's alone)."""
    if os.geteuid() != 0:
        pytest.skip("checking as another user needs root")
    path = other_users_dir("lineage-check-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_config_check_notes_what_only_the_service_can_tell(
    public_dir: Path, public_agent: Path
) -> None:
    """What only the service's user or environment can tell is a note of `config check`."""
    tmp_path = public_dir
    key = keygen(tmp_path)  # 0600, root's: not readable by nobody
    events = tmp_path / "events"
    events.mkdir(mode=0o755)
    lineage = {
        "transport": ["http", "file"],
        "http": {
            "endpoint": "https://127.0.0.1:9/api/v1/lineage",
            "auth": {"type": "bearer", "token_env": "OL_NOT_SET"},
        },
        "file": {"path": str(events / "events.jsonl")},
    }
    spark_events = tmp_path / "spark-events"
    spark_events.mkdir(mode=0o755)
    config = config_file(tmp_path, lineage, spark={"event_log_dirs": [str(spark_events)]})
    config.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if k != "OL_NOT_SET"}
    endpoint_note = (
        "note: lineage.http.endpoint: https://127.0.0.1:9/api/v1/lineage: no connection from "
        "here (Connection refused); the agent keeps events queued until the collector answers\n"
    )
    token_note = (
        "note: lineage.http.auth.token_env: environment variable OL_NOT_SET is not set here; "
        "the service refuses to start unless its environment sets it\n"
    )
    result = cli("config", "check", str(config), env=env)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "ok\n" + endpoint_note + token_note,
        "",
    )
    nobody = subprocess.run(
        [*as_user(), str(public_agent), "-m", "agent", "config", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        cwd=public_dir,
        env=env,
    )
    assert (nobody.returncode, nobody.stderr) == (0, "")
    assert nobody.stdout == (
        "ok\n"
        f"note: signing.key_path: {key}: not readable by uid {NOBODY} (nobody); check again as "
        "the service's user to check the key\n"
        + endpoint_note
        + token_note
        + f"note: lineage.file.path: cannot open {events / 'events.jsonl'}: Permission denied\n"
        f"note: state_dir: {tmp_path / 'state'}: cannot create state directory: "
        "Permission denied\n"
    )
    with memory_agent(config, 5, env=env, wait=False) as process:
        assert process.proc.wait(PATIENCE) == 78
    assert process.wait_log("start_refused")["error"] == (
        "lineage.http.auth.token_env: environment variable OL_NOT_SET is not set"
    )
