"""Structured Streaming live: real PySpark 4.1.1 queries translated, and a query the real
daemon watches ended by `lineage-agent job stop`.

The queries run in the lakehouse environment (`scripts/pyenv.py lakehouse`, PySpark 4.1.1
with delta-spark) with the Delta and Kafka connector jars of `scripts/jars.py`, both cached
under `build/`, against the session's throwaway KRaft broker (tests/kafka.py). Two JVMs in
all: one application runs the three finite queries one after the other (tests/sparkjobs/
streaming_live.py `finite`), another the endless one that `job stop` ends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent.spark.translate.listener import wanted
from agent.spark.translate.options import TranslateOptions
from agent.spark.translate.translator import ApplicationTranslator
from tests.agentproc import cli
from tests.independent import public_key, verify
from tests.kafka import Kafka
from tests.olschema import validate_run_event
from tests.spark_scenarios import wait_events
from tests.test_control import spark_agent

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "sparkjobs" / "streaming_live.py"
JOB_TIMEOUT = 420.0  # the finite application, JVM start included, on two busy cores
START_TIMEOUT = 240.0  # the endless query's first events reach the agent's output
BUNDLES = ("delta", "spark-kafka")
Event = dict[str, Any]


def _output(*command: str) -> str:
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, check=True, timeout=1800
    ).stdout.strip()


@pytest.fixture(scope="module")
def lakehouse() -> tuple[str, str]:
    """The lakehouse interpreter and the connector jars (comma-separated for spark.jars),
    prepared by the project's scripts; cached under build/ after the first time."""
    python = _output(str(ROOT / "scripts" / "pyenv.py"), "lakehouse")
    jars = [
        _output(str(ROOT / "scripts" / "jars.py"), "--classpath", b).replace(":", ",")
        for b in BUNDLES
    ]
    return python, ",".join(jars)


def spark_job(
    python: str, jars: str, mode: str, events: Path, work: Path, *extra: str
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
    with (work / f"{mode}.log").open("wb") as log:
        return subprocess.Popen(
            [python, str(JOB), mode, str(events), str(work), jars, *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
        )


def query_events(events: list[Event], name: str) -> list[Event]:
    return [e for e in events if e["job"]["name"].endswith(f".streaming_query.{name}")]


def names(datasets: list[Event]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


@pytest.fixture(scope="module")
def finite(
    lakehouse: tuple[str, str], kafka_broker: Kafka, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Event], list[str], Path, str]]:
    """The finite application's event log translated: (events, warnings, work dir, broker)."""
    python, jars = lakehouse
    work = tmp_path_factory.mktemp("streaming-finite")
    events_dir = work / "events"
    events_dir.mkdir()
    kafka_broker.create_topic("stream-live-orders", partitions=2)
    kafka_broker.create_topic("stream-live-clicks", partitions=1)
    kafka_broker.produce("stream-live-orders", [json.dumps({"n": n}) for n in range(5)])
    job = spark_job(python, jars, "finite", events_dir, work, kafka_broker.bootstrap)
    try:
        job.wait(JOB_TIMEOUT)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(60)
    assert job.returncode == 0, (work / "finite.log").read_text(errors="replace")[-4000:]
    (log,) = events_dir.iterdir()
    translator = ApplicationTranslator(
        TranslateOptions(namespace="spark", kafka_bootstrap=kafka_broker.bootstrap)
    )
    out: list[Event] = []
    for line in log.read_bytes().splitlines():
        if line and wanted(line):
            out += translator.feed(orjson.loads(line))
    yield out, translator.warnings, work, kafka_broker.bootstrap


def test_live_queries_are_one_run_each_and_valid(
    finite: tuple[list[Event], list[str], Path, str],
) -> None:
    """Three queries in one application: the application run and one STREAMING_QUERY run per
    query, no run per micro-batch, every event valid."""
    events, warnings, _, _ = finite
    for event in events:
        validate_run_event(event)
    kinds = {e["job"]["facets"]["jobType"]["jobType"] for e in events}
    assert kinds == {"APPLICATION", "STREAMING_QUERY"}
    runs = {e["job"]["name"]: e["eventType"] for e in events if e["eventType"] != "START"}
    app = "streaming_live_finite"
    assert runs == {
        app: "COMPLETE",  # a query's failure is its run's, not the application's (runs.md)
        **{
            f"{app}.streaming_query.{name}": "COMPLETE"
            for name in ("file_to_parquet", "to_delta", "from_delta", "to_kafka", "orders_to_delta")
        },
        f"{app}.streaming_query.bad_cast": "FAIL",
    }
    (warning,) = [w for w in warnings if w.startswith("streaming query")]
    assert re.fullmatch(
        r"streaming query to_kafka: sink 'org\.apache\.spark\.sql\.kafka010\.KafkaSourceProvider"
        r"\$KafkaTable@[0-9a-f]+': the event log does not show a Kafka sink's topic",
        warning,
    )


def test_live_file_to_parquet_available_now(
    finite: tuple[list[Event], list[str], Path, str],
) -> None:
    """File source -> parquet sink with availableNow: the directories, the schema, two
    batches of one matching row each."""
    events, _, work, _ = finite
    start, end = query_events(events, "file_to_parquet")
    assert (start["eventType"], end["eventType"]) == ("START", "COMPLETE")
    assert names(end["inputs"]) == [("file", str(work / "data" / "incoming"))]
    assert names(end["outputs"]) == [("file", str(work / "data" / "clicks_parquet"))]
    schema = end["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [("id", "long"), ("kind", "string")]
    facet = end["run"]["facets"]["lineageAgent_stream"]
    # numInputRows counts what the JSON reader returns: the pushed filter's clicks only
    assert (facet["batches"], facet["inputRows"], facet["batchId"]) == (2, 2, 1)


def test_live_delta_sink_and_source(finite: tuple[list[Event], list[str], Path, str]) -> None:
    """Files -> a Delta path sink, then that table as a streaming source -> parquet: the
    table's location on both sides, never its `_delta_log`, with the schema."""
    events, _, work, _ = finite
    table = ("file", str(work / "data" / "clicks_delta"))
    to_delta = query_events(events, "to_delta")[-1]
    assert names(to_delta["inputs"]) == [("file", str(work / "data" / "incoming"))]
    assert names(to_delta["outputs"]) == [table]
    sink = to_delta["run"]["facets"]["lineageAgent_stream"]["sink"]
    assert sink == f"DeltaSink[{work / 'data' / 'clicks_delta'}]"  # the path as the job gave it
    schema = to_delta["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [("id", "long"), ("kind", "string")]
    from_delta = query_events(events, "from_delta")[-1]
    assert names(from_delta["inputs"]) == [table]
    assert names(from_delta["outputs"]) == [("file", str(work / "data" / "from_delta"))]
    assert from_delta["run"]["facets"]["lineageAgent_stream"]["sources"][0]["description"] == (
        f"DeltaSource[file:{work / 'data' / 'clicks_delta'}]"
    )


def test_live_kafka_sink_counts_rows_but_hides_its_topic(
    finite: tuple[list[Event], list[str], Path, str],
) -> None:
    """A Kafka sink: the log names no topic (no output dataset, a warning says why) but
    counts the rows it wrote."""
    events, _, _, _ = finite
    end = query_events(events, "to_kafka")[-1]
    assert end["outputs"] == []
    assert end["run"]["facets"]["lineageAgent_stream"]["outputRows"] == 2


def test_live_kafka_to_delta_foreach_batch(
    finite: tuple[list[Event], list[str], Path, str],
) -> None:
    """Kafka -> foreachBatch into a Delta path table: the topic on the configured servers,
    the table the batch function writes, five records in two batches."""
    events, _, work, bootstrap = finite
    _, end = query_events(events, "orders_to_delta")
    assert end["eventType"] == "COMPLETE"
    assert (f"kafka://{bootstrap}", "stream-live-orders") in names(end["inputs"])
    assert ("file", str(work / "data" / "orders_delta")) in names(end["outputs"])
    facet = end["run"]["facets"]["lineageAgent_stream"]
    assert (facet["batches"], facet["inputRows"]) == (2, 5)
    assert facet["sink"] == "ForeachBatchSink"


def test_live_failing_query_fails_with_the_error(
    finite: tuple[list[Event], list[str], Path, str],
) -> None:
    """The query whose second batch fails ends FAIL with the exception and its error class."""
    events, _, _, _ = finite
    end = query_events(events, "bad_cast")[-1]
    assert end["eventType"] == "FAIL"
    assert "[CAST_INVALID_INPUT]" in end["run"]["facets"]["errorMessage"]["message"]
    assert end["run"]["facets"]["lineageAgent_stream"]["errorClass"] == "CAST_INVALID_INPUT"


def test_job_stop_ends_a_live_query_abort(lakehouse: tuple[str, str], tmp_path: Path) -> None:
    """The real daemon follows an endless query (RUNNING from its progress events at the
    running interval, the run in `describe`); `job stop` ends the query run ABORT with the
    reason, signed, valid."""
    python, jars = lakehouse
    events_dir, work = tmp_path / "events", tmp_path / "job"
    events_dir.mkdir()
    work.mkdir()
    agent_dir = tmp_path / "agent"
    with spark_agent(agent_dir, events_dir, spark={"running_interval": "1s"}) as (
        agent,
        config,
        out,
    ):
        job = spark_job(python, jars, "endless", events_dir, work)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not (work / "started").exists():
                assert job.poll() is None, (work / "endless.log").read_text()[-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.2)
            app_id = (work / "started").read_text()
            wait_events(
                out,
                lambda ev: any(
                    e["eventType"] == "RUNNING" for e in query_events(ev, "ticks_forever")
                ),
                START_TIMEOUT,
            )
            described = cli("describe", app_id, "--config", str(config), "--json", check=True)
            runs = json.loads(described.stdout)["summary"]["runs"]
            assert [(r["job_type"], r["state"]) for r in runs] == [("STREAMING_QUERY", "RUNNING")]
            stopped = cli(
                "job", "stop", app_id, "--reason", "rolling restart", "--config", str(config)
            )
            assert stopped.returncode == 0, stopped.stderr
            events = wait_events(
                out, lambda ev: sum(e["eventType"] == "ABORT" for e in ev) >= 2, 120
            )
        finally:
            if job.poll() is None:
                job.kill()
            job.wait(60)
        assert agent.stop() == 0
    query = query_events(events, "ticks_forever")
    assert query[0]["eventType"] == "START" and query[-1]["eventType"] == "ABORT"
    running = [
        e["run"]["facets"]["lineageAgent_stream"] for e in query if e["eventType"] == "RUNNING"
    ]
    assert running and all("batchId" in f for f in running)
    message = query[-1]["run"]["facets"]["errorMessage"]["message"]
    assert message.startswith(f"stopped by uid {os.getuid()} ") and message.endswith(
        ": rolling restart"
    )
    assert names(query[-1]["outputs"]) == [("file", str(work / "data" / "ticks"))]
    key = public_key(agent_dir / "ed25519.key")
    for event in events:
        validate_run_event(event)
        verify(event, key)
