"""What every benchmark shares: figures with their baseline and target, bounded waits,
process probes (/proc), and the processes benchmarks run beside themselves (the loopback
collector, the real agent, one long-lived PySpark driver).

Rules the figures follow: every figure comes with a baseline measured in the same run and
their ratio (these machines are shared and noisy; absolute numbers move with the neighbours'
load, ratios much less); every loop is bounded in count and in time; every child process is
stopped on the way out, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import selectors
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from tests.agentproc import AgentProcess, stop_process

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_WORK = ROOT / "build" / "bench"
JOBS = Path(__file__).resolve().parent / "jobs"

_T = TypeVar("_T")


# -- figures -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal on a figure: `on` says whether the ratio or the value itself is judged."""

    op: Literal[">=", "<="]
    bound: float
    on: Literal["ratio", "value"] = "ratio"

    def met(self, value: float, ratio: float | None) -> bool | None:
        subject = ratio if self.on == "ratio" else value
        if subject is None or not math.isfinite(subject):
            return None
        return subject >= self.bound if self.op == ">=" else subject <= self.bound

    def as_dict(self) -> dict[str, Any]:
        return {"on": self.on, "op": self.op, "bound": self.bound}


@dataclass
class Figure:
    """One measured number, its baseline from the same run, and `ratio = value / baseline`."""

    name: str
    value: float
    unit: str
    baseline: str | None = None
    baseline_value: float | None = None
    target: Target | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline_value is None or self.baseline_value == 0:
            return None
        return self.value / self.baseline_value

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.target.met(self.value, self.ratio)

    def as_dict(self) -> dict[str, Any]:
        ratio = self.ratio
        return {
            "name": self.name,
            "value": _round(self.value),
            "unit": self.unit,
            "baseline": self.baseline,
            "baseline_value": None if self.baseline_value is None else _round(self.baseline_value),
            "ratio": None if ratio is None else _round(ratio),
            "target": None if self.target is None else self.target.as_dict(),
            "met": self.met,
            "detail": self.detail,
        }


def _round(number: float) -> float:
    """Four significant digits: more would only report the noise."""
    if number == 0 or not math.isfinite(number):
        return number
    return round(number, max(0, 3 - math.floor(math.log10(abs(number)))))


@dataclass
class Result:
    """What one benchmark reports: its figures, how it ran, and notes for the reader."""

    name: str
    command: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    setup: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure

    def figure(self, name: str) -> Figure:
        for figure in self.figures:
            if figure.name == name:
                return figure
        raise KeyError(f"{self.name} has no figure {name!r}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.name,
            "command": self.command,
            "seconds": round(self.seconds, 1),
            "error": self.error,
            "setup": self.setup,
            "figures": [figure.as_dict() for figure in self.figures],
            "notes": self.notes,
        }


def machine() -> dict[str, Any]:
    """Where the figures were taken: they mean little without it."""
    load = os.getloadavg()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m_5m_15m": [round(x, 2) for x in load],
    }


# -- statistics --------------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` (0..1) quantile with linear interpolation (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def spread(values: Sequence[float]) -> float:
    """Interquartile range relative to the median: how noisy repeated runs were."""
    if len(values) < 2:
        return 0.0
    return (percentile(values, 0.75) - percentile(values, 0.25)) / median(values)


# -- waiting -----------------------------------------------------------------------------------


def wait_until(
    predicate: Callable[[], _T | Literal[False] | None],
    timeout: float,
    what: str,
    interval: float = 0.05,
) -> _T:
    """Poll `predicate` until it returns something truthy; TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not reached within {timeout:g} s")
        time.sleep(interval)


# -- process probes ----------------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(f"/proc/{pid}/status has no {key}")


def rss_mib(pid: int) -> float:
    """Resident set size now, in MiB."""
    return _status_kib(pid, "VmRSS") / 1024


def peak_rss_mib(pid: int) -> float:
    """The largest resident set size the process had so far, in MiB."""
    return _status_kib(pid, "VmHWM") / 1024


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / _TICKS


# -- child processes ---------------------------------------------------------------------------


def _read_line(proc: subprocess.Popen[bytes], timeout: float, what: str) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise TimeoutError(f"{what} printed nothing within {timeout:g} s")
    line = proc.stdout.readline().decode().strip()
    if not line:
        raise RuntimeError(f"{what} exited with {proc.wait()} before printing its address")
    return line


class CollectorProcess:
    """`tests/collector.py` in its own process (or a module with the same command line), so
    that its work does not share the benchmark's interpreter."""

    def __init__(self, command: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            list(command), stdout=subprocess.PIPE, cwd=ROOT, env=_child_env()
        )
        try:
            self.url = _read_line(self.proc, 30, "the collector")
        except BaseException:
            stop_process(self.proc)
            raise
        self.base_url = self.url.split("/api/", 1)[0]
        self.port = int(self.base_url.rsplit(":", 1)[1])
        self.summary = ""

    @classmethod
    def standard(cls) -> CollectorProcess:
        return cls([sys.executable, str(ROOT / "tests" / "collector.py"), "--port", "0"])

    def stop(self) -> str:
        """Stop it; its last line ("N events, M connections")."""
        if self.proc.poll() is None:
            stop_process(self.proc)
            assert self.proc.stdout is not None
            self.summary = self.proc.stdout.read().decode().strip()
        return self.summary

    def accepted(self) -> int:
        """Events the stopped collector accepted, from its summary line."""
        return int(self.summary.split()[0]) if self.summary else 0

    def __enter__(self) -> CollectorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


@contextlib.contextmanager
def agent_process(
    config: Path, module: Sequence[str] = ("agent", "run"), args: Sequence[str] = ()
) -> Iterator[AgentProcess]:
    """The real agent as a child process (`python -m agent run --config FILE` by default),
    started and waited for; killed on the way out if it is still running."""
    log_path = config.parent / f"agent-{time.monotonic_ns()}.log"
    command = [sys.executable, "-m", *module, "--config", str(config), *args]
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=_child_env()
        )
    agent = AgentProcess(proc, log_path)
    try:
        agent.wait_started(timeout=60)
        yield agent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def scrape(agent: AgentProcess) -> dict[str, float]:
    """/metrics of a running agent; empty when it does not answer (stopping, busy)."""
    try:
        return agent.scrape()
    except Exception:
        return {}


def total(samples: Mapping[str, float], name: str) -> float:
    """Sum of every series of a metric family in a scrape."""
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


class LogTail:
    """Counts JSON log events of an agent as its log file grows, reading each byte once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.counts: dict[str, int] = {}
        self.lines: list[dict[str, Any]] = []

    def poll(self, keep: Callable[[dict[str, Any]], bool] = lambda _: False) -> None:
        with self.path.open("rb") as file:
            file.seek(self._offset)
            data = file.read()
        self._offset += len(data)
        *whole, self._partial = (self._partial + data).split(b"\n")
        for raw in whole:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            name = line.get("event", "")
            self.counts[name] = self.counts.get(name, 0) + 1
            if keep(line):
                self.lines.append(line)

    def count(self, event: str) -> int:
        return self.counts.get(event, 0)


# -- the PySpark driver --------------------------------------------------------------------------


class SparkDriver:
    """`jobs/spark_driver.py` in its own process: one JVM for every Spark application of a
    benchmark run. `call` hands it one command and waits (bounded) for the answer."""

    def __init__(self, control: Path, start_timeout: float = 300.0) -> None:
        from tests.spark_logs import spark_env

        self.control = control
        control.mkdir(parents=True, exist_ok=True)
        for stale in control.glob("*"):
            if stale.is_file():
                stale.unlink()
        self._next = 1
        self._output = (control / "driver.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(JOBS / "spark_driver.py"), str(control)],
            cwd=control,
            env=spark_env(),
            stdout=self._output,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(self._ready, start_timeout, "the PySpark driver to start", 0.1)
        except BaseException:
            self.close()
            raise

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the PySpark driver exited {self.proc.returncode}:\n{self.tail()}")
        return (self.control / "ready").exists()

    def tail(self) -> str:
        return (self.control / "driver.log").read_text(errors="replace")[-4000:]

    def call(self, action: str, timeout: float, **params: Any) -> dict[str, Any]:
        """Run one command; its result, or RuntimeError with the driver's traceback."""
        number, self._next = self._next, self._next + 1
        command = self.control / f"cmd-{number}.json"
        temporary = self.control / f".cmd-{number}.tmp"
        temporary.write_text(json.dumps({"action": action, "params": params}))
        os.replace(temporary, command)
        done = self.control / f"done-{number}.json"

        def answered() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the PySpark driver exited {self.proc.returncode} during {action}:\n"
                    f"{self.tail()}"
                )
            return done.exists()

        wait_until(answered, timeout, f"PySpark action {action}", 0.02)
        answer = json.loads(done.read_text())
        if not answer["ok"]:
            raise RuntimeError(f"PySpark action {action} failed:\n{answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(TimeoutError, RuntimeError):
                self.call("quit", 60)
            stop_process(self.proc, 30)
        self._output.close()


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Context:
    """One benchmark run: where files go, whether sizes are the tiny smoke ones, and the
    shared PySpark driver (started on first use, stopped at the end of the run)."""

    work: Path
    smoke: bool = False
    _spark: SparkDriver | None = None

    def directory(self, name: str) -> Path:
        """An empty directory under the work folder (emptied if it existed)."""
        path = self.work / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    @property
    def spark(self) -> SparkDriver:
        if self._spark is None:
            self._spark = SparkDriver(self.directory("spark-driver"))
        return self._spark

    def close(self) -> None:
        if self._spark is not None:
            self._spark.close()
            self._spark = None


def agent_config(
    directory: Path,
    *,
    endpoint: str,
    event_dirs: Sequence[Path] = (),
    lineage: Mapping[str, Any] | None = None,
    spark: Mapping[str, Any] | None = None,
) -> Path:
    """A fresh key and config for a real agent shipping over HTTP to `endpoint`, watching
    `event_dirs`; `lineage` and `spark` add or override keys of those sections."""
    from tests.agentproc import keygen, write_config

    directory.mkdir(parents=True, exist_ok=True)
    keygen(directory)
    section = {"transport": ["http"], "http": {"endpoint": endpoint}, "drain_timeout": "2s"}
    section.update(lineage or {})
    spark_section: dict[str, Any] = dict(spark or {})
    if event_dirs:
        spark_section["event_log_dirs"] = [str(d) for d in event_dirs]
    if not spark_section:  # an in-memory source: the Spark section is not used
        return write_config(directory, section)
    return write_config(directory, section, spark=spark_section)
