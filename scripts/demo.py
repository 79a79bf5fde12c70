"""The main job: the agent watches a real sample PySpark pipeline, then shows the signed events.

    ./run demo [--out DIR] [--keep-running]

1. makes a node key and a config (file transport) under DIR (default: ./demo-out),
2. starts `lineage-agent run` watching DIR/spark-events,
3. runs examples/sample_pipeline.py (CSV -> join -> aggregate -> parquet + catalog table)
   with Spark's event log in that directory (Spark 4 defaults: rolling, zstd),
4. waits for the application's terminal event and says which event log the agent followed
   (layout and codec),
5. prints the runs with their datasets, and verifies every signature,
6. stops the agent (SIGTERM: drain, exit 0); with --keep-running the agent keeps running
   (for `lineage-agent status`, /metrics, another job) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.commands.views import table  # noqa: E402


def sh(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, text=True, capture_output=True, check=True, **kwargs)


def events_of(path: Path) -> list[dict[str, Any]]:
    files = [*sorted(path.parent.glob(path.name + ".*[0-9]")), path]
    return [json.loads(line) for f in files if f.exists() for line in f.read_text().splitlines()]


def followed_logs(agent_log: Path) -> list[str]:
    """`path (layout, codec)` of each log the agent followed, from its JSON log lines; the
    codec of a rolling log found before its first event file comes from `eventlog_codec`."""
    lines = []
    for line in agent_log.read_text(errors="replace").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    codecs = {line["log"]: line["codec"] for line in lines if line["event"] == "eventlog_codec"}
    return [
        f"{line['log']} ({line['layout']}, codec {codecs.get(line['log'], line['codec'])})"
        for line in lines
        if line["event"] == "eventlog_followed"
    ]


def stop(daemon: subprocess.Popen[bytes]) -> int:
    daemon.send_signal(signal.SIGTERM)
    return daemon.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "demo-out")
    parser.add_argument(
        "--keep-running",
        action="store_true",
        help="leave the agent running after the report, until Ctrl-C",
    )
    args = parser.parse_args()
    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    events_dir, state, lineage = out / "spark-events", out / "state", out / "lineage.jsonl"
    events_dir.mkdir(parents=True)
    key = out / "ed25519.key"
    agent = [sys.executable, "-m", "agent"]
    sh(*agent, "keygen", "--out", str(key))
    config = out / "config.yaml"
    config.write_text(
        "lineage:\n"
        "  enabled: true\n"
        "  namespace: demo\n"
        "  transport: file\n"
        f"  file: {{path: {lineage}, rotation_size_mb: 64}}\n"
        f"signing: {{key_path: {key}}}\n"
        f"spark: {{event_log_dirs: [{events_dir}], poll_interval: 500ms}}\n"
        "metrics: {listen: 127.0.0.1:0}\n"
        f"state_dir: {state}\n"
        f"control_socket: {out / 'control.sock'}\n"
        "logging: {level: info, format: json}\n"
    )
    print(
        f"== config {config} passes `lineage-agent config check`:",
        sh(*agent, "config", "check", str(config)).stdout.strip(),
    )
    agent_log = (out / "agent.log").open("w")
    daemon = subprocess.Popen(
        [*agent, "run", "--config", str(config)],
        stdout=agent_log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        # Its own session: Ctrl-C reaches the demo alone, which stops the agent with SIGTERM
        # (drain, exit 0), as systemd would.
        start_new_session=True,
    )
    try:
        time.sleep(1.0)
        print("== running examples/sample_pipeline.py on PySpark (local[2]) ...", flush=True)
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        began = time.monotonic()
        job = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "sample_pipeline.py"),
                "--work",
                str(out / "pipeline"),
                "--event-log-dir",
                str(events_dir),
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=out,
        )
        if job.returncode != 0:
            print(job.stdout[-3000:], job.stderr[-3000:], file=sys.stderr)
            return 1
        print(f"   pipeline finished in {time.monotonic() - began:.1f}s")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            events = events_of(lineage)
            if any(
                e["job"]["name"] == "daily_revenue_pipeline" and e["eventType"] != "START"
                for e in events
            ):
                break
            time.sleep(0.2)
        else:
            print(
                f"the application's terminal event did not arrive in 60s; see {out / 'agent.log'}",
                file=sys.stderr,
            )
            return 1
    except BaseException:
        stop(daemon)
        raise
    finally:
        agent_log.close()
    for followed in followed_logs(out / "agent.log"):
        print(f"== the agent followed {followed}")
    code = 0
    if not args.keep_running:
        code = stop(daemon)
        print(f"== agent stopped (exit {code}); events in {lineage}")
    try:
        verified = report(out, lineage, key, agent)
    except BaseException:
        stop(daemon)
        raise
    if args.keep_running:
        try:  # from before the prompt: a Ctrl-C right after it is answered too
            print(
                f"\n== the agent keeps running (pid {daemon.pid}, log {out / 'agent.log'}); try\n"
                f"   {sys.executable} -m agent status --socket {out / 'control.sock'}\n"
                "   Ctrl-C stops it.",
                flush=True,
            )
            daemon.wait()
        except KeyboardInterrupt:
            pass
        code = stop(daemon) if daemon.poll() is None else daemon.returncode
        print(f"\n== agent stopped (exit {code}); events in {lineage}")
    return 0 if code == 0 and verified else 1


def report(out: Path, lineage: Path, key: Path, agent: list[str]) -> bool:
    """Print the runs with their datasets and verify every signature; True when all verify."""

    events = events_of(lineage)
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        run = runs.setdefault(
            event["run"]["runId"],
            {"job": event["job"]["name"], "types": [], "in": set(), "out": set()},
        )
        run["types"].append(event["eventType"])
        run["in"].update(f"{d['namespace']}:{d['name']}" for d in event.get("inputs", []))
        run["out"].update(f"{d['namespace']}:{d['name']}" for d in event.get("outputs", []))

    def short(names: set[str]) -> str:
        return ", ".join(sorted(n.replace(f"{out}/pipeline/", "") for n in names)) or "-"

    print(f"\n(dataset paths relative to {out}/pipeline)")
    print(
        table(
            ["job", "events", "inputs", "outputs"],
            [
                [
                    r["job"].removeprefix("daily_revenue_pipeline."),
                    " -> ".join(r["types"]),
                    short(r["in"]),
                    short(r["out"]),
                ]
                for r in runs.values()
            ],
        )
    )
    first = events[0]["run"]["facets"]["lineageAgent_signature"]
    print(
        f"\n== every event carries run.facets.lineageAgent_signature "
        f"({first['algorithm']}, {first['canonicalization']}, keyId {first['keyId']})"
    )
    public = sh(*agent, "pubkey", "--key", str(key)).stdout.split()[0]
    verified = subprocess.run(
        [*agent, "verify", str(lineage), "--public-key", public], text=True, capture_output=True
    )
    print(f"$ lineage-agent verify {lineage.name} --public-key {public}")
    print(verified.stdout.strip())
    return verified.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
