"""`lineage-agent exec` as a process wrapper, without Spark: statuses as a shell gives them,
signals passed on, stdout and stderr passed through, the Spark properties it hands on."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from agent.commands.exec_wrap import command_env
from tests import waits

EXEC = (sys.executable, "-m", "agent", "exec", "--socket", "/nonexistent/control.sock")
EXEC_NO_RETRY = (*EXEC, "--retry-for", "0", "--")
NOT_TOLD = (
    "lineage-agent: exec: the agent was not told how the command ended (/nonexistent/"
    "control.sock: no agent is listening (is lineage-agent running?))\n"
)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Until `condition()` holds; fails with `what` after `timeout` seconds."""
    waits.wait(condition, timeout, what)


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EXEC_NO_RETRY, *command], capture_output=True, text=True, timeout=60, check=False
    )


def test_status_stdout_and_stderr_pass_through() -> None:
    """The command's status, stdout and stderr are exec's; exec adds one line of its own
    when no agent answers."""
    ran = run("sh", "-c", "echo out; echo err >&2; exit 3")
    assert (ran.returncode, ran.stdout, ran.stderr) == (3, "out\n", "err\n" + NOT_TOLD)


def test_killed_by_a_signal_is_128_plus_n() -> None:
    """A command killed by SIGKILL makes exec exit 137, as a shell says."""
    assert run("sh", "-c", "kill -KILL $$").returncode == 128 + signal.SIGKILL


def test_missing_command_is_127() -> None:
    """A command that does not exist: 127 and a shell's words."""
    ran = run("no-such-command-here")
    assert (ran.returncode, ran.stderr) == (
        127,
        "lineage-agent: exec: no-such-command-here: command not found\n",
    )


def test_signals_sent_to_exec_reach_the_command(tmp_path: Path) -> None:
    """SIGUSR1 and SIGTERM sent to exec (by kill, not a terminal) reach the command once."""
    ready = tmp_path / "ready"
    script = (
        "trap 'echo usr1' USR1; trap 'echo term; exit 42' TERM; "
        f"touch {ready}; while true; do sleep 0.05; done"
    )
    proc = subprocess.Popen(
        [*EXEC_NO_RETRY, "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    wait_for(ready.exists, "the command did not start")
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout.readline() == "usr1\n"  # handled: only then the next one
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=30)
    assert (proc.returncode, stdout) == (42, "term\n")


def test_spark_properties_go_through_spark_submit_opts() -> None:
    """The exec id and the scheduler's runs are appended to SPARK_SUBMIT_OPTS, quoted the
    way Spark's launcher splits it."""
    environ = {
        "SPARK_SUBMIT_OPTS": "-Xmx1g",
        "OPENLINEAGE_PARENT_ID": 'ns/dag "x".task/019a5f3e-1c2d-7e4f-8a9b-0c1d2e3f4a5b',
        "PATH": os.environ["PATH"],
    }
    env = command_env(environ, "0123456789abcdef0123456789abcdef")
    assert env["SPARK_SUBMIT_OPTS"] == (
        '-Xmx1g "-Dspark.lineageAgent.exec=0123456789abcdef0123456789abcdef" '
        '"-Dspark.lineageAgent.parent=ns/dag \\"x\\".task/019a5f3e-1c2d-7e4f-8a9b-0c1d2e3f4a5b"'
    )
    assert env["PATH"] == os.environ["PATH"]


def test_ctrl_c_at_a_terminal_reaches_the_command_once(tmp_path: Path) -> None:
    """Ctrl-C on a real terminal (a pty) signals the whole foreground process group: the
    command gets one SIGINT, handles it and goes on; exec, signalled too, does not end.

    Waits on what the command did, not on time: the terminal turns the character into a
    signal asynchronously, later still on a busy machine. Once the command handled SIGINT,
    a SIGUSR1 sent to exec (forwarded, since no terminal sent it) marks the end: exec takes
    pending signals lowest number first and the shell runs its traps in the same order, so a
    second SIGINT passed on by exec would have been counted before the SIGUSR1's trap runs."""
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    interrupted, marked = tmp_path / "interrupted", tmp_path / "marked"
    script = (
        f"n=0; trap 'n=$((n+1)); touch {interrupted}' INT; trap 'touch {marked}' USR1; "
        f"touch {ready}; while [ ! -e {stop} ]; do sleep 0.05; done; echo count $n; exit 5"
    )
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a session of its own, the pty its controlling terminal
        os.execv(sys.executable, [sys.executable, *EXEC_NO_RETRY[1:], "sh", "-c", script])
    output = b""
    try:
        wait_for(ready.exists, "the command did not start")
        os.write(terminal, b"\x03")  # the terminal's VINTR character
        wait_for(interrupted.exists, "the command got no SIGINT")
        os.kill(pid, signal.SIGUSR1)
        wait_for(marked.exists, "the command got no SIGUSR1")
        stop.touch()
        while True:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # EIO: every process holding the pty's other side is gone
                break
            if not chunk:
                break
            output += chunk
    finally:
        stop.touch()  # also when a wait above failed: the command ends, then exec
        _, status = os.waitpid(pid, 0)
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 5, output
    assert b"count 1\r\n" in output, output


def test_a_signal_after_the_command_ended_keeps_its_status() -> None:
    """While exec still copies what the command left behind on stderr, a SIGTERM or SIGHUP
    to exec changes nothing: it exits with the command's status."""
    proc = subprocess.Popen(
        [*EXEC_NO_RETRY, "sh", "-c", "echo started $$ >&2; (sleep 2) & exit 4"],
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    started, command = proc.stderr.readline().split()
    assert started == b"started"
    # The command has ended once exec reaped it; its background sleep holds stderr open.
    wait_for(lambda: not Path(f"/proc/{int(command)}").exists(), "the command did not end")
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGHUP)
    proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(30) == 4


def test_the_stderr_tail_leaves_out_sparks_progress_bar() -> None:
    """The stderr tail the events carry has no `[Stage N:...]` bars nor the carriage returns
    that drew and cleared them; the lines between them are kept, and the bytes pass through
    to exec's stderr unchanged."""
    bar = "\r[Stage 0:>                                                          (0 + 1) / 1]"
    clear = "\r" + " " * 80 + "\r"
    two = "\r[Stage 1:=====>        (3 + 1) / 8][Stage 2:>      (0 + 1) / 4]"
    written = (
        f"starting{bar}{clear}25/11/27 WARN something{two}{clear}"
        f'{bar}Traceback (most recent call last):\n  File "job.py", line 3\n'
        f"ValueError: boom{bar}{clear}\n"
    )
    program = f"import sys; sys.stderr.write({written!r}); sys.exit(1)"
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agent.commands.exec_wrap import run; import os, sys; "
            f"_, ended = run([sys.executable, '-c', {program!r}], os.environ); "
            "print(repr(ended.stderr_tail))",
        ],
        capture_output=True,
        timeout=60,
    )
    assert ran.stderr == written.encode()
    assert (
        ran.stdout.decode()
        == repr(
            "starting\n"
            "25/11/27 WARN something\n"
            "Traceback (most recent call last):\n"
            '  File "job.py", line 3\n'
            "ValueError: boom"
        )
        + "\n"
    )
