"""Run every shape once with the OpenLineage Spark listener in the driver and the agent
watching the same event logs; collect both outputs per shape.

One PySpark process (`jobs.py`) runs the shapes, one application each; the real daemon
(`python -m agent run`, file transport) follows the event-log directory live from before the
first application until it wrote the terminal event of the last one. A throwaway PostgreSQL
server (tests/pg.py) serves the JDBC shapes when one can run here; they are skipped (and
said so) otherwise.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.agentproc import keygen, stop_process
from tests.bench.harness import agent_process, wait_until
from tests.peer.shapes import Shape
from tests.pg import JDBC_JAR, postgres_skip_reason, start_postgres
from tests.spark_logs import spark_env

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs.py"
SPARK_TIMEOUT = 1200.0
AGENT_CATCH_UP = 180.0

Event = dict[str, Any]


@dataclass(frozen=True)
class Outputs:
    """Per shape: the application's id and error, the listener's events and the agent's."""

    apps: dict[str, dict[str, Any]]  # shape -> {app_id, app_name, error?, seconds}
    listener: dict[str, list[Event]]
    agent: dict[str, list[Event]]
    skipped: dict[str, str]  # shape -> why it did not run
    spark_seconds: float


def listener_jars() -> list[Path]:
    """The listener's jars, fetched (once) by the project's own script."""
    return bundle_jars("openlineage-spark")


def bundle_jars(bundle: str) -> list[Path]:
    """The jars of a `scripts/jars.py` bundle, fetched (once) by that script."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "jars.py"), bundle],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    folder = Path(done.stdout.strip().splitlines()[-1])
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no jars in {folder}")
    return jars


def agent_config(work: Path, events: Path) -> Path:
    """The daemon's config: file transport into `work/lineage.jsonl`, watching `events`."""
    work.mkdir(parents=True, exist_ok=True)
    keygen(work)
    config = {
        "lineage": {
            "transport": "file",
            "file": {"path": str(work / "lineage.jsonl"), "rotation_size_mb": 0},
        },
        "signing": {"key_path": str(work / "ed25519.key")},
        "spark": {
            "event_log_dirs": [str(events)],
            "poll_interval": "200ms",
            "replay_horizon": 0,
        },
        "metrics": {"listen": "127.0.0.1:0"},
        "state_dir": str(work / "state"),
        "control_socket": str(work / "control.sock"),
        "logging": {"level": "info", "format": "json"},
    }
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def read_jsonl(path: Path) -> list[Event]:
    """The complete JSON lines of a file (none when it does not exist)."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]


def app_job(event: Event) -> str:
    """The application job an event belongs to: its own name, or its parent's."""
    parent = event["run"].get("facets", {}).get("parent")
    return str(parent["job"]["name"] if parent else event["job"]["name"])


def is_app_terminal(event: Event) -> bool:
    job_type = event["job"].get("facets", {}).get("jobType", {}).get("jobType")
    return job_type == "APPLICATION" and event["eventType"] in ("COMPLETE", "FAIL", "ABORT")


def normalized(app_name: str) -> str:
    """Both producers name the application job by `spark.app.name` in snake case."""
    return "".join(c if c.isalnum() else "_" for c in app_name.lower())


def lake_python() -> str:
    """The interpreter of the lakehouse environment (PySpark 4.1.1), built once under build/."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pyenv.py"), "lakehouse"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def run_jobs(python: str, plan: dict[str, Any], work: Path, env: dict[str, str], tag: str) -> None:
    """One jobs.py process: the plan's shapes, one application each."""
    plan_file = work / f"plan-{tag}.json"
    plan_file.write_text(json.dumps(plan, indent=2))
    with (work / f"spark-{tag}.log").open("wb") as log:
        proc = subprocess.Popen(
            [python, str(JOBS), str(plan_file)],
            cwd=work,
            env={**env, "PYSPARK_PYTHON": python},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            code = proc.wait(SPARK_TIMEOUT)
        finally:
            stop_process(proc)
    if code != 0:
        tail = (work / f"spark-{tag}.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"jobs.py ({tag}) exited {code}:\n{tail}")


def run(shapes: Sequence[Shape], work: Path) -> Outputs:
    out, agent_dir = work / "spark", work / "agent"
    (out / "events").mkdir(parents=True)
    skipped: dict[str, str] = {}
    runnable = list(shapes)
    server = None
    if any("postgres" in s.needs for s in shapes):
        reason = postgres_skip_reason()
        if reason is None:
            try:
                server = start_postgres()
            except RuntimeError as error:
                reason = f"PostgreSQL did not start: {error}"
        if reason is not None:
            skipped |= {s.name: reason for s in shapes if "postgres" in s.needs}
            runnable = [s for s in shapes if s.name not in skipped]
    jars = [str(p) for p in listener_jars()]
    if server is not None:
        jars.append(str(JDBC_JAR))
    groups: dict[str | None, list[Shape]] = defaultdict(list)  # PySpark version -> shapes
    for shape in runnable:
        groups[shape.pyspark].append(shape)
    began = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            env = spark_env()
            if any("kafka" in s.needs for s in runnable):
                from tests.kafka import running_kafka

                kafka = stack.enter_context(running_kafka(work))
                kafka.create_topic("orders", partitions=2)  # stream_kafka_delta's source
                kafka.produce("orders", [json.dumps({"n": n}) for n in range(7)])
                if any(s.name == "stream_kafka_window" for s in runnable):
                    from tests.data.make_lakehouse_logs import METER_READINGS

                    kafka.create_topic("meter-readings", partitions=1)
                    kafka.produce("meter-readings", METER_READINGS)
                env["LAKEHOUSE_KAFKA"] = kafka.bootstrap
            agent = stack.enter_context(agent_process(agent_config(agent_dir, out / "events")))
            for version, group in groups.items():  # the project's PySpark first (the inputs)
                python = sys.executable if version is None else lake_python()
                bundles = sorted({b for s in group for b in s.packages})
                plan = {
                    "out": str(out),
                    "jars": jars + [str(p) for b in bundles for p in bundle_jars(b)],
                    "inputs": version is None,
                    "postgres": None
                    if server is None
                    else {"url": server.jdbc_url, "user": server.user, "password": server.password},
                    "shapes": [
                        {"name": s.name, "job": s.job, "conf": s.conf, "hive": "hive" in s.needs}
                        for s in group
                    ],
                }
                run_jobs(python, plan, work, env, version or "project")
            spark_seconds = time.monotonic() - began
            manifest = json.loads((out / "manifest.json").read_text())["apps"]
            expected = {normalized(m["app_name"]) for m in manifest.values()}
            lineage = agent_dir / "lineage.jsonl"

            def caught_up() -> bool:
                ended = {app_job(e) for e in read_jsonl(lineage) if is_app_terminal(e)}
                return expected <= ended

            wait_until(caught_up, AGENT_CATCH_UP, "the agent's terminal event of every app", 0.2)
            agent.stop()
    finally:
        if server is not None:
            server.stop()
    by_app: dict[str, list[Event]] = defaultdict(list)
    for event in read_jsonl(agent_dir / "lineage.jsonl"):
        by_app[app_job(event)].append(event)
    return Outputs(
        apps=manifest,
        listener={s: read_jsonl(out / "listener" / f"{s}.jsonl") for s in manifest},
        agent={s: by_app.get(normalized(m["app_name"]), []) for s, m in manifest.items()},
        skipped=skipped,
        spark_seconds=round(spark_seconds, 1),
    )


def replay_agent(outputs: Outputs, work: Path) -> Outputs:
    """The agent side again, from the kept event logs, by the current code (`lineage-agent
    replay`, the daemon's config): a change to the agent is judged in seconds, without Spark.

    The tables on disk are as the last statement left them, so committed versions read from
    them may differ from the live run's; names, schemas, lineage and states do not.
    """
    out = work / "replayed"
    if out.exists():
        for old in out.glob("*.jsonl"):
            old.unlink()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "agent",
            "replay",
            "--config",
            str(work / "agent" / "config.yaml"),
            "--output-dir",
            str(out),
            str(work / "spark" / "events"),
        ],
        capture_output=True,
        timeout=600,
        check=False,  # exit 1 says a run failed: several shapes fail on purpose
    )
    by_app: dict[str, list[Event]] = defaultdict(list)
    for path in sorted(out.glob("*.jsonl")):
        for event in read_jsonl(path):
            by_app[app_job(event)].append(event)
    agent = {s: by_app.get(normalized(m["app_name"]), []) for s, m in outputs.apps.items()}
    return Outputs(outputs.apps, outputs.listener, agent, outputs.skipped, outputs.spark_seconds)


def save(outputs: Outputs, path: Path) -> None:
    """Keep both producers' raw events: the report cites them, a rerun compares them."""
    path.write_text(json.dumps(outputs.__dict__))


def load(path: Path) -> Outputs:
    return Outputs(**json.loads(path.read_text()))
