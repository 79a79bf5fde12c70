"""Shared parts of the reliability suite: agent processes, a tallying collector, exact
accounting, and checks on what arrived (schema-valid, signature verified).

Every scenario ends with the same three questions, answered here:
* is the agent still healthy (`/healthz` says ok, the process runs)?
* is the accounting exact (per transport: produced = delivered + dropped + unconfirmed +
  queued, in the metrics while it runs and in the `agent_stopped` line when it exits)?
* is every event that arrived schema-valid and signed by the agent's key?
"""

from __future__ import annotations

import asyncio
import collections
import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent.errors import DROP_REASONS, UNCONFIRMED_REASONS
from tests import waits
from tests.agentproc import AgentProcess, accounting
from tests.agentproc import cli as agent_cli
from tests.collector import Behaviour, Collector, Reply, Request, Slow
from tests.independent import public_key, verify
from tests.olschema import validate_run_event

ROOT = Path(__file__).resolve().parents[2]
#: How long a scenario may wait for something that should happen; generous, because other
#: Spark work shares the two cores in CI. Never a statement about speed.
PATIENCE = 90.0


# -- agent processes ------------------------------------------------------------------------


NOT_SENT = "lineage_delivery_not_sent_total"  # attempts that never left
#: Without retries (`retry: {total: 0}`) an answer "not stored" drops at once; without the
#: late-answer wait a hung collector leaves a request unconfirmed at its timeout.
AT_ONCE = {"retry": {"total": 0}, "late_answer_wait": 0}


def config_file(
    directory: Path,
    lineage: Mapping[str, Any],
    *,
    spark: Mapping[str, Any] | None = None,
    **sections: Any,
) -> Path:
    """A config for a test agent: its own key, state, socket, loopback metrics on port 0."""
    config: dict[str, Any] = {
        "lineage": {"enabled": True, **lineage},
        "signing": {"key_path": str(directory / "ed25519.key")},
        "metrics": {"listen": "127.0.0.1:0"},
        "state_dir": str(directory / "state"),
        "control_socket": str(directory / "control.sock"),
        "logging": {"level": "info", "format": "json"},
    }
    if spark is not None:
        config["spark"] = {"poll_interval": "200ms", "replay_horizon": 0, **spark}
    config.update(sections)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def http_lineage(url: str, **http: Any) -> dict[str, Any]:
    return {"transport": "http", "http": {"endpoint": url, **http}}


def file_lineage(path: Path, **file: Any) -> dict[str, Any]:
    return {"transport": "file", "file": {"path": str(path), **file}}


@contextmanager
def agent(
    config: Path,
    *command: str,
    env: Mapping[str, str] | None = None,
    wait: bool = True,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[AgentProcess]:
    """Run an agent child process: `lineage-agent run` when `command` is empty, else
    `python -m <command...> --config FILE` (e.g. the memory-source runner)."""
    log_path = config.parent / f"agent-{time.monotonic_ns()}.log"
    if command:
        argv = [sys.executable, "-m", *command, "--config", str(config)]
    else:
        argv = [sys.executable, "-m", "agent", "run", "--config", str(config)]
    inherited = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**inherited, **(env or {})},
            cwd=ROOT,
            preexec_fn=preexec_fn,
        )
    process = AgentProcess(proc, log_path)
    try:
        if wait:
            process.wait_started(timeout=PATIENCE)
        yield process
    except BaseException:
        process.print_tail()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def memory_agent(
    config: Path, events: int, rate: float = 0.0, **kwargs: Any
) -> AbstractContextManager[AgentProcess]:
    """The real daemon on the in-memory source (`tests.reliability.memagent`)."""
    return agent(
        config,
        "tests.reliability.memagent",
        "--events",
        str(events),
        "--rate",
        str(rate),
        **kwargs,
    )


def cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`lineage-agent ARGS...` as a child process, given PATIENCE to end."""
    return agent_cli(*args, env=env, timeout=PATIENCE)


def healthz(process: AgentProcess) -> dict[str, Any]:
    assert process.metrics_url is not None
    url = process.metrics_url.removesuffix("/metrics") + "/healthz"
    body: dict[str, Any] = httpx.get(url, timeout=10).json()
    return body


def assert_healthy(process: AgentProcess) -> dict[str, Any]:
    """The process runs and /healthz says ok; returns the health body."""
    assert process.proc.poll() is None, process.raw_output()[-4000:]
    body = healthz(process)
    assert body["status"] == "ok", body
    return body


def wait_until(what: str, check: Callable[[], bool], timeout: float = PATIENCE) -> None:
    waits.wait(check, timeout, what)


def settle(
    process: AgentProcess, transport: str, produced: float | None = None
) -> dict[str, float]:
    """Scrape until every event offered to `transport` so far is resolved (nothing queued,
    delivered + dropped + unconfirmed = offered) and at least `produced` events were made.
    Returns that scrape, in which the accounting identity holds exactly."""
    deadline = time.monotonic() + PATIENCE
    settled: tuple[float, ...] | None = None
    while True:
        samples = process.scrape()
        made, delivered, dropped, unconfirmed, queued = accounting(samples, transport)
        offered = offered_to(samples, transport)
        resolved = delivered + dropped + unconfirmed
        if queued == 0 and resolved == offered and made >= (produced or 0):
            # A scrape is not atomic (an event is counted as produced a moment before it is
            # offered): the same numbers twice in a row mean nothing is moving.
            if settled == (made, offered, delivered, dropped, unconfirmed):
                return samples
            settled = (made, offered, delivered, dropped, unconfirmed)
        else:
            settled = None
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{transport}: produced {made}, offered {offered}, delivered {delivered}, "
                f"dropped {dropped}, unconfirmed {unconfirmed}, queued {queued} after "
                f"{PATIENCE:g}s\n{process.raw_output()[-3000:]}"
            )
        if process.proc.poll() is not None:
            raise AssertionError(f"agent exited {process.proc.poll()}:\n{process.raw_output()}")
        time.sleep(0.1)


def offered_to(samples: Mapping[str, float], transport: str) -> float:
    return samples.get(f"lineage_events_offered_total{{transport={transport}}}", 0.0)


def drops(samples: Mapping[str, float], transport: str) -> dict[str, float]:
    """Dropped events of `transport` by reason (non-zero only)."""
    found = by_reason(samples, "lineage_events_dropped_by_reason_total", transport)
    assert set(found) <= set(DROP_REASONS), found
    return found


def unconfirmed(samples: Mapping[str, float], transport: str) -> dict[str, float]:
    """Unconfirmed events of `transport` by reason (non-zero only)."""
    found = by_reason(samples, "lineage_events_unconfirmed_total", transport)
    assert set(found) <= set(UNCONFIRMED_REASONS), found
    return found


def by_reason(samples: Mapping[str, float], name: str, transport: str) -> dict[str, float]:
    """A reason-labelled counter's non-zero series of one transport."""
    found: dict[str, float] = {}
    for key, value in samples.items():
        match = re.fullmatch(re.escape(name) + r"\{(.*)\}", key)
        if match and value:
            labels = dict(part.split("=", 1) for part in match[1].split(","))
            if labels["transport"] == transport:
                found[labels["reason"]] = value
    return found


def stop_and_account(process: AgentProcess, timeout: float = 60) -> dict[str, dict[str, int]]:
    """SIGTERM, expect exit 0, return the exact `accounting` of the `agent_stopped` line after
    checking offered = delivered + dropped + unconfirmed + queued (and queued = 0) for every
    transport."""
    code = process.stop(timeout)
    assert code == 0, process.raw_output()[-4000:]
    line = process.wait_log("agent_stopped", timeout=5)
    result: dict[str, dict[str, int]] = line["accounting"]
    for name, numbers in result.items():
        assert numbers["queued"] == 0, (name, numbers)
        resolved = numbers["delivered"] + numbers["dropped"] + numbers["unconfirmed"]
        assert numbers["offered"] == resolved, (name, numbers)
    return result


def produced(samples: Mapping[str, float]) -> float:
    return sum(v for k, v in samples.items() if k.startswith("lineage_events_emitted_total{"))


# -- what arrived ------------------------------------------------------------------------------

STREAM_START = datetime(2026, 1, 1, tzinfo=UTC)  # where `sample_run_events` starts its clock


def event_index(event: Mapping[str, Any]) -> int:
    """The position of a `sample_run_events` event in its stream: event i is stamped
    2*i + (i % 2) milliseconds after the stream's start."""
    stamp = datetime.fromisoformat(str(event["eventTime"]).replace("Z", "+00:00"))
    return int((stamp - STREAM_START).total_seconds() * 1000) // 2


def check_events(events: Iterable[dict[str, Any]], key_path: Path) -> int:
    """Every event is schema-valid and verified with `cryptography` + `rfc8785`; the count."""
    key: Ed25519PublicKey = public_key(key_path)
    count = 0
    for event in events:
        validate_run_event(event)
        verify(event, key)
        count += 1
    return count


def jsonl_files(path: Path) -> list[Path]:
    """The file transport's output: rotated files (oldest first), then the current one."""
    rotated = [
        p
        for p in path.parent.glob(path.name + ".*")
        if p.name.removeprefix(path.name + ".").isdigit()
    ]
    ordered = sorted(rotated, key=lambda p: int(p.name.rsplit(".", 1)[1]))
    return [*ordered, *([path] if path.exists() else [])]


def read_jsonl(*files: Path) -> list[dict[str, Any]]:
    """Every line of the files as JSON; a torn or non-JSON line fails the test."""
    events = []
    for file in files:
        for number, line in enumerate(file.read_bytes().split(b"\n"), 1):
            if line:
                try:
                    events.append(json.loads(line))
                except ValueError as error:
                    raise AssertionError(f"{file}:{number}: not a JSON line: {error}") from None
    return events


def run_shapes(events: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Event types per run id, in arrival order."""
    runs: dict[str, list[str]] = collections.defaultdict(list)
    for event in events:
        runs[event["run"]["runId"]].append(event["eventType"])
    return dict(runs)


def assert_runs_whole(events: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each run: exactly one START first and exactly one terminal event last."""
    runs = run_shapes(events)
    for run_id, types in runs.items():
        assert types[0] == "START" and types.count("START") == 1, (run_id, types)
        assert types[-1] in ("COMPLETE", "FAIL", "ABORT"), (run_id, types)
        assert sum(t in ("COMPLETE", "FAIL", "ABORT") for t in types) == 1, (run_id, types)
    return runs


# -- the collector, with a tally of its answers ------------------------------------------------


class TallyCollector(Collector):
    """A `tests.collector.Collector` that also counts how it answered: by status code, or by
    behaviour name ("hang", "reset", "close_mid_response").

    Behaviour changes run on the collector's own loop, so the behaviour an answer uses and the
    one it is tallied under are always the same. With `sample` > 0 the bodies of every
    `sample`-th 2xx request are kept (for long runs that do not record every event).
    """

    def __init__(self, behaviour: Behaviour = 201, *, sample: int = 0, **kwargs: Any) -> None:
        super().__init__(behaviour, **kwargs)
        self.answers: collections.Counter[int | str] = collections.Counter()
        self.sampled: list[bytes] = []
        self._sample = sample
        self._seen = 0

    def set_behaviour(self, behaviour: Behaviour) -> None:
        loop = self._loop
        if loop is None:
            super().set_behaviour(behaviour)
            return
        done = threading.Event()

        def switch() -> None:
            super(TallyCollector, self).set_behaviour(behaviour)
            done.set()

        loop.call_soon_threadsafe(switch)
        if not done.wait(10):
            raise TimeoutError("collector loop did not take the new behaviour")

    def tally(self, *keys: int | str) -> int:
        with self._changed:
            return sum(self.answers[key] for key in keys)

    async def _reply(
        self,
        behaviour: Behaviour,
        request: Request,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
    ) -> bool:
        # the concrete behaviour the base class answers with (a timeline's phase included)
        key: int | str
        if isinstance(behaviour, Slow | Reply):
            key = behaviour.status
        else:
            assert isinstance(behaviour, int | str), behaviour
            key = behaviour
        with self._changed:
            self.answers[key] += 1
            if self._sample and isinstance(key, int) and 200 <= key < 300:
                self._seen += 1
                if self._seen % self._sample == 0:
                    self.sampled.append(request.content)
        return await super()._reply(behaviour, request, writer, keep_alive)


def restart_on_same_port(old: Collector, **kwargs: Any) -> TallyCollector:
    """Stop `old` (every connection closes) and start a fresh collector on its port."""
    port = old.port
    old.stop()
    deadline = time.monotonic() + 30
    while True:
        try:
            return TallyCollector(port=port, **kwargs).start()
        except RuntimeError:  # the port lingers a moment after close
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# -- processes seen from outside ---------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def kill(process: AgentProcess) -> None:
    """SIGKILL: no drain, no goodbye."""
    process.proc.send_signal(signal.SIGKILL)
    process.proc.wait(30)


def public(key_path: Path) -> Ed25519PublicKey:
    return public_key(key_path)


# -- file systems that fail for real -----------------------------------------------------------


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


def can_mount() -> str | None:
    """None when this process may mount a tmpfs (root with CAP_SYS_ADMIN), else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    probe = Path(tempfile.mkdtemp(prefix="lineage-mount-probe-"))
    try:
        result = _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe))
        if result.returncode != 0:
            return f"cannot mount a tmpfs here: {result.stderr.strip()}"
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=30, check=False)
        return None
    finally:
        probe.rmdir()


@contextmanager
def tmpfs(path: Path, size: str, *options: str) -> Iterator[Path]:
    """A real, size-limited tmpfs mounted at `path` (created if missing) for the block."""
    path.mkdir(parents=True, exist_ok=True)
    result = _mount("-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(path))
    assert result.returncode == 0, result.stderr
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], capture_output=True, timeout=30)
        if done.returncode != 0:  # still busy: detach now, the kernel frees it later
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill(directory: Path) -> Path:
    """Write a file into `directory` until its file system is full; returns that file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"\0" * 4096
    try:
        while True:
            os.write(fd, block)
    except OSError as error:
        assert error.errno == errno.ENOSPC, error
    finally:
        os.close(fd)
    return filler


# -- the Spark source's events, computed without an agent process -----------------------------


def unsigned(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event without its signature facet: what the translator made."""
    plain = json.loads(json.dumps(event))
    plain["run"]["facets"].pop("lineageAgent_signature", None)
    return dict(plain)


def reference_events(*directories: Path, **spark: Any) -> list[dict[str, Any]]:
    """The events the Spark source makes from the complete logs in `directories`, in order,
    computed in this process on a fresh state database (the translator is pure, so an agent
    reading the same logs must make exactly these)."""
    return source_events(*directories, **spark)[0]


def source_events(
    *directories: Path, **spark: Any
) -> tuple[list[dict[str, Any]], list[MutableMapping[str, Any]]]:
    """Run the Spark source in this process until every log in `directories` was read to its
    end; return (events in order, the log entries it wrote)."""
    from prometheus_client import CollectorRegistry
    from structlog.testing import capture_logs

    from agent.config.model import SparkConfig
    from agent.spark.follow.source import SparkSource
    from agent.state.db import StateDB
    from agent.telemetry.metrics import Metrics

    async def run(state_dir: Path) -> list[dict[str, Any]]:
        config = SparkConfig(
            event_log_dirs=tuple(str(d) for d in directories),
            poll_interval=0.05,
            replay_horizon=0,
            **spark,
        )
        source = SparkSource(
            config, "spark", StateDB(state_dir), Metrics(CollectorRegistry()), use_inotify=False
        )
        emitted: list[dict[str, Any]] = []
        stop = asyncio.Event()
        task = asyncio.create_task(
            source.run(lambda _ex, ev, _fence=None: emitted.append(dict(ev)), stop)
        )
        try:
            async with asyncio.timeout(PATIENCE):
                while source._first_scan or source.apps:
                    if task.done():
                        break
                    await asyncio.sleep(0.01)
        finally:
            stop.set()
            await task
            source.state.close()
        return [json.loads(json.dumps(event)) for event in emitted]

    with (
        tempfile.TemporaryDirectory(prefix="lineage-reference-") as state_dir,
        capture_logs() as entries,
    ):
        events = asyncio.run(run(Path(state_dir)))
    return events, entries


def wait_produced(process: AgentProcess, count: int) -> int:
    """Block until the agent produced at least `count` events; return how many it has."""
    seen = [0]

    def reached() -> bool:
        seen[0] = int(produced(process.scrape()))
        return seen[0] >= count

    wait_until(f"{count} events produced", reached)
    return seen[0]
