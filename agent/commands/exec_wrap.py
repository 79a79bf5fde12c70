"""`lineage-agent exec -- COMMAND...`: run a Spark program and tell the agent how it ended.

PySpark writes `ExitCode: 0` into the event log even when the Python program died, so only
the process that ran the program knows how it ended. `exec` runs the command as its child and
reports the end to the agent over the control socket (`exec_end`, the peer's uid as who asked).

Which applications: every run of `exec` has an id (32 hex digits). The command gets it in
`SPARK_SUBMIT_OPTS` (appended to the caller's) as `-Dspark.lineageAgent.exec=ID`: Spark's
launcher passes that variable to the driver JVM of `spark-submit`, of `pyspark` and of a
`python job.py` that builds a SparkSession, and Spark takes `spark.*` system properties as
Spark properties, so the id is in the environment event of every application the command
starts, at whatever depth of child processes. The scheduler's run comes the same way:
`OPENLINEAGE_PARENT_ID` / `OPENLINEAGE_ROOT_PARENT_ID` (`namespace/job/runId`, what Airflow's
OpenLineage macros `lineage_parent_id` / `lineage_root_parent_id` give a task) become
`spark.lineageAgent.parent` / `spark.lineageAgent.rootParent`.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to `exec` are passed to the
command. The ones a terminal sends to its whole foreground process group (Ctrl-C, Ctrl-\\)
reached the command already and are not sent twice. stdin and stdout are the command's own;
stderr passes through a pipe and is copied as it comes, the last lines kept for the verdict.

`exec` exits with the command's status, 128 + N when signal N killed it, like a shell. The
agent never changes that, nor holds the command up: the report is made after the command
ended, with a short timeout; when no agent answers (stopped, restarting), a detached process
of the same user retries it for `--retry-for` seconds so that the verdict still reaches an
agent that comes back in time (it is kept in memory there, nowhere on disk).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent.errors import ControlError
from agent.service.control.client import request
from agent.spark.translate.execprops import EXEC, PARENT, ROOT_PARENT

FORWARDED: Final = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
TAIL_LINES: Final = 20  # lines of the command's stderr the verdict carries
TAIL_BYTES: Final = 4096  # and at most this many bytes of them
STDERR_LINGER: Final = 5.0  # seconds stderr is still copied after the command ended
REPORT_TIMEOUT: Final = 5.0  # seconds the agent has to answer the report
RETRY_EVERY: Final = 2.0  # seconds between the background retries
#: Refusals of an agent that may keep the report a moment later (`busy`: the control socket
#: was at its connection limit with every connection in a request).
_TRANSIENT: Final = ("no state database is open", "the state database refused", "busy: ")
_SI_KERNEL: Final = 0x80  # si_code of a signal the kernel sent (a terminal's, to the group)


@dataclass(frozen=True, slots=True)
class Ended:
    """How the command ended."""

    status: int  # the exit status a shell would show: 128 + N when signal N killed it
    signal: str | None
    stderr_tail: str


def command_env(environ: Mapping[str, str], exec_id: str) -> dict[str, str]:
    """The command's environment: `environ` with the Spark properties that tie its
    applications to this run of `exec` appended to `SPARK_SUBMIT_OPTS`."""
    props = {EXEC: exec_id}
    for variable, key in (
        ("OPENLINEAGE_PARENT_ID", PARENT),
        ("OPENLINEAGE_ROOT_PARENT_ID", ROOT_PARENT),
    ):
        if environ.get(variable):
            props[key] = environ[variable]
    options = " ".join(_java_option(key, value) for key, value in props.items())
    env = dict(environ)
    env["SPARK_SUBMIT_OPTS"] = f"{environ.get('SPARK_SUBMIT_OPTS', '')} {options}".strip()
    return env


def _java_option(key: str, value: str) -> str:
    """`-Dkey=value` quoted the way Spark's launcher splits SPARK_SUBMIT_OPTS."""
    text = f"-D{key}={value}".replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def run(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, Ended]:
    """Run the command to its end (a new exec id; signals passed on, stderr copied); raises
    FileNotFoundError / PermissionError when it cannot be started."""
    exec_id = uuid.uuid4().hex
    waited = {*FORWARDED, signal.SIGCHLD}
    # An inherited SIG_IGN for SIGCHLD would reap the child before its status is read.
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Blocked before the child exists, so no signal is missed; the child gets an empty mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        read_end, write_end = os.pipe()
        try:
            pid = os.posix_spawnp(
                argv[0],
                list(argv),
                command_env(environ, exec_id),
                file_actions=[(os.POSIX_SPAWN_DUP2, write_end, 2)],
                setsigmask=(),
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),  # Python ignores both
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        tail = _Tail()
        copier = threading.Thread(target=_copy, args=(read_end, tail), daemon=True)
        copier.start()
        status = _wait(pid, waited)
        # What the command left behind (PySpark's JVM) still writes its last lines; a process
        # that keeps stderr open for good (a daemon it started) is not waited for.
        copier.join(timeout=STDERR_LINGER)
    finally:
        # What came after the child ended has nobody to reach, and must not end exec itself
        # (a SIGHUP of a closing terminal would replace the command's status): consumed.
        while signal.sigtimedwait(waited, 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, waited)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return exec_id, Ended(128 - code, signal.Signals(-code).name, tail.text())
    return exec_id, Ended(code, None, tail.text())


def _wait(pid: int, waited: set[signal.Signals]) -> int:
    """Pass signals on until the child ends; its wait status."""
    while True:
        info = signal.sigwaitinfo(waited)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status
            continue
        if info.si_code == _SI_KERNEL:
            continue  # the terminal signalled the whole process group: the child has it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, info.si_signo)


class _Tail:
    """The last bytes of a stream, bounded."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            del self._data[: -TAIL_BYTES * 2]

    def text(self) -> str:
        """The last lines as a terminal would have left them, without Spark's console
        progress bar (`[Stage 0:>   (0 + 1) / 1]`, redrawn and cleared with carriage
        returns), which would otherwise fill the error message the events carry."""
        with self._lock:
            data = bytes(self._data).decode("utf-8", "replace")
        shown = [line for line in map(_as_shown, data.split("\n")) if line is not None]
        lines = "\n".join(shown).rstrip().splitlines()
        return "\n".join(lines[-TAIL_LINES:])[-TAIL_BYTES:]


def _as_shown(line: str) -> str | None:
    """One line without progress bars: what carriage returns separated on it, one line each
    (a terminal shows only the last, but a log line may share it with a bar); None when only
    bars and blanks were on it."""
    parts = line.split("\r")
    kept = [rest for part in parts if (rest := _after_bars(part.rstrip())).strip()]
    if kept:
        return "\n".join(kept)
    return None if len(parts) > 1 or line.strip() else line.rstrip()


def _after_bars(text: str) -> str:
    """`text` without the progress bars it starts with (`[Stage N:...]`, one per running
    stage; a log line may follow the last one directly). A scan, not a regular expression:
    the text is the command's."""
    if not text.lstrip().startswith("[Stage "):
        return text  # indentation kept: a traceback's
    text = text.lstrip()
    for _ in range(len(text) + 1):  # bounded: each pass removes one bracketed stage
        end = text.find("]")
        if not text.startswith("[Stage ") or end < 0:
            break
        text = text[end + 1 :].lstrip()
    return text


def _copy(source: int, tail: _Tail) -> None:
    """Copy the child's stderr to ours as it comes; when ours is gone, keep draining."""
    writable = True
    try:
        while chunk := os.read(source, 65536):
            tail.add(chunk)
            view = memoryview(chunk)
            while writable and view:
                try:
                    view = view[os.write(2, view) :]
                except OSError:
                    writable = False
    finally:
        os.close(source)


def report(socket_path: str, exec_id: str, ended: Ended) -> tuple[str, bool] | None:
    """Tell the agent how the command ended; None when it took the report, else the reason
    and whether trying again may help (no agent answered, or it could not keep it yet)."""
    payload: dict[str, Any] = {
        "command": "exec_end",
        "exec_id": exec_id,
        "status": ended.status,
        "signal": ended.signal,
        "stderr_tail": ended.stderr_tail,
    }
    try:
        answer = request(socket_path, payload, REPORT_TIMEOUT)
    except ControlError as error:
        return str(error), "no agent is listening" in str(error)
    except (OSError, ValueError) as error:  # a timeout, a reset, a cut-off answer
        return str(error) or type(error).__name__, True
    if answer.get("ok"):
        return None
    refusal = str(answer.get("error"))
    return refusal, refusal.startswith(_TRANSIENT)


def report_later(socket_path: str, exec_id: str, ended: Ended, retry_for: float) -> int:
    """Retry the report from a detached child process for `retry_for` seconds; its pid. The
    caller goes on at once."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing of the caller's terminal or streams is kept
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        deadline = time.monotonic() + retry_for
        while time.monotonic() < deadline:
            time.sleep(RETRY_EVERY)
            problem = report(socket_path, exec_id, ended)
            if problem is None or not problem[1]:
                os._exit(0 if problem is None else 1)
    finally:
        os._exit(1)
