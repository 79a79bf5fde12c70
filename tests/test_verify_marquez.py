"""`lineage-agent verify --marquez`: events the real agent shipped, read back from a server
that stores and re-serializes them as Marquez does (tests/marquez.py), still verify."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nacl.signing import SigningKey

from agent.commands import marquez
from agent.commands.cli import main
from agent.commands.marquez import BEFORE, read_events, verify_marquez
from agent.commands.replay import replay
from agent.delivery.signing import Signer, key_id, load_signing_key, load_verify_key
from agent.delivery.verify import Problem, verify_event
from agent.errors import ReadBackError, SignatureError
from tests.agentproc import keygen
from tests.applog import unpacked
from tests.collector import Collector, closed_port
from tests.identity import fixture_logs
from tests.independent import public_key, stripped, verify
from tests.marquez import MarquezLike, marquez_form
from tests.olschema import validate_run_event

EVENTLOGS = Path(__file__).resolve().parent / "data" / "eventlogs"
#: Logs whose events hold what Marquez models: parents, SQL, schemas, symlinks, column
#: lineage, statistics, a failure, a stream's floats, times ending in zero.
LOGS = (
    "success",
    "sql_failure",
    "lakehouse/delta_catalog",
    "lakehouse/stream_kafka_delta",
    "jdbc/jdbc_postgres",
)
TIMEOUT = 120


@dataclass(frozen=True)
class Key:
    path: Path
    text: str  # as `lineage-agent pubkey` prints it


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Key:
    return _key(tmp_path_factory.mktemp("key"))


@pytest.fixture(scope="module")
def other_key(tmp_path_factory: pytest.TempPathFactory) -> Key:
    return _key(tmp_path_factory.mktemp("other"))


def _key(directory: Path) -> Key:
    path = keygen(directory)
    printed = subprocess.run(
        [sys.executable, "-m", "agent", "pubkey", "--key", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return Key(path, printed.stdout.strip())


@pytest.fixture
def server() -> Iterator[MarquezLike]:
    with MarquezLike() as running:
        yield running


def staged(directory: Path, logs: list[Path]) -> list[Path]:
    """Checked-in logs, decompressed under names Spark could give them."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, log in enumerate(logs):
        path = directory / f"local-{index + 1:04d}"
        path.write_bytes(unpacked(log))
        paths.append(path)
    return paths


def ship(
    server: MarquezLike, directory: Path, key: Key, names: tuple[str, ...], namespace: str
) -> int:
    """`lineage-agent replay --send` of the logs `names` to the server; the events sent."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "lineage": {"transport": "http", "http": {"endpoint": server.url}},
                "signing": {"key_path": str(key.path)},
            }
        )
    )
    logs = staged(directory / "logs", [EVENTLOGS / f"{name}.jsonl.zst" for name in names])
    options = ["--config", str(config), "--send", "--json", "--namespace", namespace]
    done = subprocess.run(
        [sys.executable, "-m", "agent", "replay", *map(str, logs), *options],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: some of the runs failed
    (delivery,) = json.loads(done.stdout)["deliveries"]
    assert delivery["delivered"] == delivery["offered"] > 0
    sent: int = delivery["delivered"]
    return sent


def verify_command(*args: str) -> subprocess.CompletedProcess[str]:
    """`lineage-agent verify ARGS` as a child process."""
    return subprocess.run(
        [sys.executable, "-m", "agent", "verify", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def label(event: dict[str, Any]) -> str:
    """How `verify --marquez` names an event."""
    job = event["job"]
    return f"run {event['run']['runId']} {event['eventType']} job {job['namespace']}/{job['name']}"


def post(server: MarquezLike, event: dict[str, Any]) -> None:
    """POST one event as a producer would."""
    assert httpx.post(server.url, content=orjson.dumps(event)).status_code == 201


# -- what the agent ships survives Marquez -------------------------------------------------


def test_shipped_events_verify_when_read_back(
    server: MarquezLike, tmp_path: Path, key: Key
) -> None:
    """Every event `replay --send` shipped comes back from Marquez's API with nulls and
    Java-written times, and every one verifies, by the agent and by `cryptography`."""
    sent = ship(server, tmp_path, key, LOGS, "spark")
    assert len(server.stored) == sent
    independent = public_key(key.path)
    for event in server.stored:
        validate_run_event(event)
        served = marquez_form(event)
        assert served != event  # Marquez added null members ...
        assert stripped(served) == event  # ... and changed nothing else
        verify(stripped(served), independent)
    result = verify_command("--marquez", server.url, "--public-key", key.text)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{sent} events checked, {sent} verified, 0 failed\n"
    assert {q["sortDirection"] for q in server.queries} == {"asc"}


def test_events_in_marquez_form_verify_and_a_change_still_fails(tmp_path: Path) -> None:
    """Every checked-in log's signed events, with null members added and times re-written as
    Marquez writes them, verify; the same with one value changed do not."""
    signing = SigningKey(bytes(range(32)))
    out = tmp_path / "out"
    out.mkdir()
    logs = staged(tmp_path / "logs", fixture_logs())
    replay(logs, namespace="spark", signer=Signer(signing), output_dir=out)
    events = [
        json.loads(line)
        for path in sorted(out.iterdir())
        for line in path.read_bytes().splitlines()
    ]
    assert len(events) > 200
    for event in events:
        served = marquez_form(event)
        assert verify_event(json.dumps(served), signing.verify_key).event == served
        served["job"]["name"] += "_"
        with pytest.raises(SignatureError) as caught:
            verify_event(served, signing.verify_key)
        assert caught.value.reason == "signature does not verify"


def test_a_time_with_a_trailing_zero_would_not_survive() -> None:
    """Why the time form matters: an event signed with `.160Z` is written back `.16Z` by
    Marquez, and its signature no longer holds."""
    signing = SigningKey(bytes(range(32)))
    event = json.loads(
        Signer(signing).sign_event(
            {
                "eventTime": "2026-11-24T04:39:45.160Z",
                "eventType": "START",
                "producer": "https://example.com/producer",
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                "run": {"runId": "01939d2e-0000-7000-8000-000000000000"},
                "job": {"namespace": "spark", "name": "old_form"},
            }
        )
    )
    served = marquez_form(event)
    assert served["eventTime"] == "2026-11-24T04:39:45.16Z"
    with pytest.raises(SignatureError):
        verify_event(served, signing.verify_key)
    public = Ed25519PublicKey.from_public_bytes(bytes(signing.verify_key))
    verify(event, public)
    with pytest.raises(InvalidSignature):
        verify(stripped(served), public)


# -- what fails is listed ------------------------------------------------------------------


def test_tampered_unsigned_and_foreign_events_are_listed(
    server: MarquezLike, tmp_path: Path, key: Key, other_key: Key
) -> None:
    """A value the server changed, an event without a signature and one signed by an
    untrusted key are each listed by run, event type and job; exit 1."""
    sent = ship(server, tmp_path, key, ("success",), "spark")
    tampered = server.stored[2]
    tampered["run"]["facets"]["lineageAgent_run"]["recordsOut"] += 1
    unsigned = copy.deepcopy(server.stored[0])
    del unsigned["run"]["facets"]["lineageAgent_signature"]
    unsigned["run"]["runId"] = str(uuid.UUID(int=1, version=4))
    post(server, unsigned)
    foreign = copy.deepcopy(server.stored[1])
    foreign["run"]["runId"] = str(uuid.UUID(int=2, version=4))
    post(server, json.loads(Signer(load_signing_key(other_key.path)).sign_event(foreign)))
    result = verify_command("--marquez", server.base_url, "--public-key", key.text)
    assert (result.returncode, result.stderr) == (1, "")
    *problems, summary = result.stdout.splitlines()
    other_id = key_id(load_verify_key(other_key.text))
    assert sorted(problems) == sorted(
        [
            f"{label(tampered)}: signature does not verify",
            f"{label(unsigned)}: no lineageAgent_signature facet",
            f"{label(foreign)}: unknown keyId {other_id}",
        ]
    )
    assert summary == f"{sent + 2} events checked, {sent - 1} verified, 3 failed"
    trusting_both = verify_command(
        "--marquez", server.url, "--public-key", key.text, "--public-key", other_key.text
    )
    assert trusting_both.returncode == 1
    assert trusting_both.stdout.splitlines()[-1] == (
        f"{sent + 2} events checked, {sent} verified, 2 failed"
    )


def test_namespace_limits_the_audit(server: MarquezLike, tmp_path: Path, key: Key) -> None:
    """`--namespace` checks only the events of that job namespace."""
    first = ship(server, tmp_path / "a", key, ("success",), "audited")
    second = ship(server, tmp_path / "b", key, ("sql_failure",), "other")
    changed = server.stored[-1]
    changed["eventType"] = "COMPLETE" if changed["eventType"] != "COMPLETE" else "FAIL"
    audited = verify_command(
        "--marquez", server.url, "--namespace", "audited", "--public-key", key.text
    )
    assert (audited.returncode, audited.stdout) == (
        0,
        f"{first} events checked, {first} verified, 0 failed\n",
    )
    other = verify_command(
        "--marquez", server.url, "--namespace", "other", "--public-key", key.text
    )
    assert other.returncode == 1
    assert other.stdout == (
        f"{label(changed)}: signature does not verify\n"
        f"{second} events checked, {second - 1} verified, 1 failed\n"
    )
    everything = verify_command("--marquez", server.url, "--public-key", key.text)
    assert everything.stdout.splitlines()[-1] == (
        f"{first + second} events checked, {first + second - 1} verified, 1 failed"
    )


# -- paging ----------------------------------------------------------------------------------


def same_time_events(server: MarquezLike, signer: Signer, count: int, time: str) -> None:
    """POST `count` signed START events of new runs, all at `time`."""
    for index in range(count):
        event = {
            "eventTime": time,
            "eventType": "START",
            "producer": "https://example.com/producer",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": str(uuid.UUID(int=len(server.stored) + 1, version=4))},
            "job": {"namespace": "spark", "name": f"job_{index}"},
        }
        post(server, json.loads(signer.sign_event(event)))


def run_ids(events: Any) -> Counter[str]:
    """How many times each run id is among `events`."""
    return Counter(event["run"]["runId"] for event in events)


def test_pages_through_events_that_share_a_time(server: MarquezLike) -> None:
    """Events sharing one time, more than a page of them, are each read once, though the
    server gives equal times in a new order on every request (offset paging would not)."""
    signer = Signer(SigningKey(bytes(range(32))))
    same_time_events(server, signer, 3, "2026-01-01T00:00:00Z")
    same_time_events(server, signer, 23, "2026-01-01T00:00:01.5Z")
    same_time_events(server, signer, 5, "2026-01-01T00:00:02Z")
    expected = run_ids(server.stored)
    assert run_ids(read_events(server.base_url, page_size=4)) == expected
    queries = list(server.queries)
    assert {(q["sortDirection"], q["before"], q["offset"]) for q in queries} == {
        ("asc", BEFORE, "0")
    }
    assert {q["limit"] for q in queries} == {"4", "8", "16", "32"}
    assert queries[0]["after"] == "1970-01-01T00:00:00.000000Z"
    assert "2026-01-01T00:00:01.500000Z" in {q["after"] for q in queries}
    report = verify_marquez(server.base_url, signer.verify_key, page_size=4)
    assert (report.checked, report.verified) == (31, 31)
    by_offset: list[Any] = []
    for offset in range(0, 31, 4):
        answer = httpx.get(
            server.base_url + "/api/v1/events/lineage",
            params={"sortDirection": "asc", "limit": 4, "offset": offset, "before": BEFORE},
        )
        by_offset += answer.json()["events"]
    assert len(by_offset) == 31 and run_ids(by_offset) != expected


def test_more_events_at_one_time_than_the_largest_page(
    server: MarquezLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When more events share one time than the largest page holds, the reading stops and
    says so, instead of skipping some."""
    monkeypatch.setattr(marquez, "MAX_PAGE", 8)
    same_time_events(server, Signer(SigningKey(bytes(range(32)))), 9, "2026-01-01T00:00:00.25Z")
    with pytest.raises(ReadBackError) as caught:
        list(read_events(server.base_url, page_size=2))
    assert str(caught.value) == (
        f"Marquez at {server.base_url} holds more than 8 events at "
        "2026-01-01T00:00:00.250000Z; they cannot be paged through"
    )


# -- errors ----------------------------------------------------------------------------------


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`lineage-agent verify ARGS` in this process: exit status, stdout, stderr."""
    code = main(["verify", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_marquez_that_refuses_connections(capsys: pytest.CaptureFixture[str], key: Key) -> None:
    """Nothing listening: one line naming Marquez's address and the system's reason; exit 1."""
    port = closed_port()
    code, out, err = run_main(
        capsys, "--marquez", f"http://127.0.0.1:{port}", "--public-key", key.text
    )
    assert (code, out) == (1, "")
    assert (
        err
        == f"lineage-agent: cannot reach Marquez at http://127.0.0.1:{port}: Connection refused\n"
    )


@pytest.mark.parametrize(
    ("answer", "path", "message"),
    [
        (
            (500, b"boom"),
            "",
            "answered 500 Internal Server Error to GET /api/v1/events/lineage",
        ),
        (None, "/not-marquez", "answered 404 Not Found to GET /api/v1/events/lineage"),
        (
            (200, b"<html>Marquez</html>"),
            "",
            "answered GET /api/v1/events/lineage with text that is not valid JSON: "
            "Expecting value: line 1 column 1 (char 0)",
        ),
        (
            (200, b'{"lineage": []}'),
            "",
            'answered GET /api/v1/events/lineage with JSON that has no "events" list',
        ),
        (
            (200, b'{"events": [{"eventType": "START"}], "totalCount": 1}'),
            "",
            "sent an event without a date-time eventTime: run ? START job ?/?",
        ),
    ],
    ids=["500", "404", "not-json", "no-events", "no-event-time"],
)
def test_answers_that_are_not_marquezs(
    capsys: pytest.CaptureFixture[str],
    server: MarquezLike,
    key: Key,
    answer: tuple[int, bytes] | None,
    path: str,
    message: str,
) -> None:
    """An error status, a body that is not JSON or not Marquez's shape: one line, exit 1,
    and no password from the URL in it."""
    server.answer_with = answer
    address = server.base_url.replace("http://", "http://auditor:s3cret@") + path
    code, out, err = run_main(capsys, "--marquez", address, "--public-key", key.text)
    assert (code, out) == (1, "")
    assert err == f"lineage-agent: Marquez at {server.base_url}{path} {message}\n"
    assert "s3cret" not in err


def test_marquez_that_does_not_answer() -> None:
    """A server that takes the request and never answers: a timeout, said in one line."""
    with Collector("hang") as hanging, pytest.raises(ReadBackError) as caught:
        verify_marquez(hanging.base_url, SigningKey(bytes(32)).verify_key, timeout=0.5)
    assert str(caught.value) == (
        f"Marquez at {hanging.base_url} did not answer GET /api/v1/events/lineage within 0.5s"
    )


def test_problems_found_before_marquez_failed_are_reported(
    server: MarquezLike, tmp_path: Path, key: Key
) -> None:
    """When Marquez fails after some pages, the problems of the pages read are already out."""
    ship(server, tmp_path, key, ("success",), "spark")
    first = min(server.stored, key=lambda event: str(event["eventTime"]))
    first["job"]["name"] += "_renamed"
    server.fail_from = 2
    found: list[Problem] = []
    with pytest.raises(ReadBackError) as caught:
        verify_marquez(server.url, load_verify_key(key.text), page_size=2, on_problem=found.append)
    assert found == [Problem(label(first), "signature does not verify")]
    assert str(caught.value) == (
        f"Marquez at {server.base_url} answered 503 Service Unavailable "
        "to GET /api/v1/events/lineage"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "verify: give event FILEs or --marquez URL"),
        (
            ("events.jsonl", "--marquez", "http://127.0.0.1:5000"),
            "verify: give event FILEs or --marquez URL, not both",
        ),
        (("events.jsonl", "--namespace", "spark"), "verify: --namespace goes with --marquez URL"),
        (
            ("--marquez", "ftp://user:pw@marquez:5000"),
            "--marquez: expected Marquez's http:// or https:// address, got 'ftp://marquez:5000'",
        ),
    ],
    ids=["nothing", "both", "namespace-alone", "not-http"],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], key: Key, args: tuple[str, ...], message: str
) -> None:
    """What to verify is files or Marquez, and Marquez is an http(s) address: exit 2."""
    code, out, err = run_main(capsys, *args, "--public-key", key.text)
    assert (code, out, err) == (2, "", f"lineage-agent: {message}\n")
