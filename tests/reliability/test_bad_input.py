"""Bad input and attackers: property-based fuzzing of the config loader and of the event-log
line path (reader, `wanted`, JSON, translator, inside the real Spark source), and the agent's
defences: private key modes, the bearer token's secrecy, the metrics endpoint's address,
signatures that catch tampering, and symbolic links planted by another user."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import rfc8785
import trustme
import yaml
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.config.loader import load_config, parse_config
from agent.errors import ConfigError
from agent.service.control.client import request
from tests.agentproc import AgentProcess, keygen, metric
from tests.fuzz import examples
from tests.independent import verify
from tests.olschema import validate_run_event
from tests.reliability.harness import (
    ROOT,
    TallyCollector,
    assert_healthy,
    check_events,
    config_file,
    drops,
    file_lineage,
    healthz,
    http_lineage,
    memory_agent,
    public,
    read_jsonl,
    settle,
    source_events,
    stop_and_account,
    wait_until,
)
from tests.samples import sample_bytes

# -- the config loader -------------------------------------------------------------------------

SOURCE = "fuzz/config.yaml"
LOCATED = re.compile(rf"{re.escape(SOURCE)}(:(\d+))?: \S")
#: A config with every section and key, as an operator would write it.
FULL: dict[str, Any] = {
    "lineage": {
        "enabled": True,
        "namespace": "spark",
        "transport": ["http", "file"],
        "queue_size": 1024,
        "drain_timeout": "5s",
        "http": {
            "endpoint": "https://collector.example:5000/api/v1/lineage",
            "timeout": "3s",
            "auth": {"type": "bearer", "token_env": "OL_TOKEN"},
            "ca_file": "/etc/ssl/ca.pem",
            "compression": "gzip",
            "batch_size": 1,
            "batch_endpoint": "https://collector.example:5000/api/v1/lineage/batch",
            "concurrency": 4,
        },
        "file": {"path": "/var/lib/lineage-agent/events.jsonl", "rotation_size_mb": 64},
    },
    "signing": {"key_path": "/etc/lineage-agent/ed25519.key"},
    "spark": {
        "event_log_dirs": ["/var/log/spark-events"],
        "namespace": "prod",
        "poll_interval": "1s",
        "stale_after": "10m",
        "running_interval": "0s",
        "emit_empty_executions": False,
        "replay_horizon": "1d",
        "max_line_bytes": 67108864,
    },
    "metrics": {"listen": "127.0.0.1:9464"},
    "state_dir": "/var/lib/lineage-agent",
    "control_socket": "/run/lineage-agent/control.sock",
    "logging": {"level": "info", "format": "auto"},
}


def leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in tree.items():
        path = (*prefix, key)
        yield path
        if isinstance(value, dict):
            yield from leaves(value, path)


KEY_PATHS = sorted(leaves(FULL))
ODD_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.sampled_from(
        [
            "",
            " ",
            "0",
            "-1",
            "1e999",
            "5",
            "5x",
            "500ms",
            "1:30",
            "-5s",
            ".5s",
            "5 s",
            "nan",
            "http://",
            "https://[::1",
            "https://h:0/x",
            "file:///",
            "file://host/x",
            "~",
            "/",
            "127.0.0.1:99999",
            "[::1]:1",
            "[zz]:1",
            "a b",
            "x\x00y",
            "OL-TOKEN",
            "yes",
            "off",
            "!!python/object:os.system",
            "*anchor",
            "&a",
            "{",
            "[",
            "%YAML 1.2",
            "@x",
            "`x`",
        ]
    )
)
ODD_VALUES = st.recursive(
    ODD_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def with_value(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    document = copy.deepcopy(FULL)
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


def check_outcome(text: str) -> None:
    """An AgentConfig, or a ConfigError that names the file (and a line within the text);
    nothing else, ever."""
    try:
        parse_config(text, SOURCE, base_dir="/etc/lineage-agent")
    except ConfigError as error:
        match = LOCATED.match(str(error))
        assert match, str(error)
        if match[2] is not None:
            assert 1 <= int(match[2]) <= text.count("\n") + 2, str(error)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(KEY_PATHS), ODD_VALUES, st.sampled_from([None, True, False]))
def test_fuzz_each_key_of_a_full_config(
    path: tuple[str, ...], value: Any, flow: bool | None
) -> None:
    """Any value at any key of a full config gives a config or a ConfigError with file and line."""
    check_outcome(yaml.safe_dump(with_value(path, value), default_flow_style=flow))


@settings(max_examples=examples(150), deadline=None)
@given(st.sampled_from(KEY_PATHS), st.text(max_size=30))
def test_fuzz_raw_text_at_a_key(path: tuple[str, ...], raw: str) -> None:
    """Raw YAML text at any key gives a config or a located ConfigError, never a traceback."""
    marker = "__VALUE__"
    text = yaml.safe_dump(with_value(path, marker), default_flow_style=False)
    check_outcome(text.replace(marker, raw.replace("\n", " ")))


@settings(max_examples=examples(100), deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe"]))
def test_fuzz_config_file_bytes(data: bytes, prefix: bytes) -> None:
    """A config file of arbitrary bytes gives a ConfigError naming the file, or a config."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.yaml"
        path.write_bytes(prefix + data)
        try:
            load_config(path)
        except ConfigError as error:
            assert str(error).startswith(f"{path}:"), str(error)


# -- the event-log line path -------------------------------------------------------------------

SUCCESS = sample_bytes("success").split(b"\n")
FAILURES = sample_bytes("sql_failure").split(b"\n")
EVENT_NAMES = sorted(
    {json.loads(line)["Event"] for line in SUCCESS + FAILURES if line.startswith(b"{")}
)
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def spark_like(draw: st.DrawFn) -> bytes:
    """A JSON object that looks like a listener event: a real event name, odd fields."""
    fields = draw(st.dictionaries(st.text(max_size=16), JSON_VALUE, max_size=6))
    return json.dumps({"Event": draw(st.sampled_from(EVENT_NAMES)), **fields}).encode()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A real line, damaged: a cut, a flipped byte, an insertion, or a field set to a value of
    the wrong type."""
    line = draw(st.sampled_from([line for line in SUCCESS + FAILURES if line]))
    kind = draw(st.sampled_from(["cut", "flip", "insert", "retype"]))
    at = draw(st.integers(min_value=0, max_value=len(line)))
    if kind == "cut":
        return line[:at]
    if kind == "flip":
        return line[:at] + bytes([draw(st.integers(0, 255))]) + line[at + 1 :]
    if kind == "insert":
        return line[:at] + draw(st.binary(max_size=8)) + line[at:]
    event = json.loads(line)
    key = draw(st.sampled_from(sorted(event)))
    event[key] = draw(JSON_VALUE)
    return json.dumps(event).encode()


LINES = st.one_of(
    mutated(),
    spark_like(),
    st.binary(max_size=60),
    JSON_VALUE.map(lambda v: json.dumps(v).encode()),
)


# Found by review, kept as a regression: valid JSON of another shape whose first bytes name
# the environment event once stopped the whole Spark source.
@example("success", [(3, b'[{"Event":"SparkListenerEnvironmentUpdate","Spark Properties":{}}]')])
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.sampled_from(["success", "sql_failure"]),
    st.lists(st.tuples(st.integers(0, 80), LINES), max_size=8),
)
def test_fuzz_event_log_lines_through_the_spark_source(
    sample: str, changes: list[tuple[int, bytes]]
) -> None:
    """Damaged and random lines in real logs: no internal error, valid events, runs whole."""
    lines = list(SUCCESS if sample == "success" else FAILURES)
    for position, line in changes:
        lines.insert(min(position, len(lines)), line.replace(b"\n", b" "))
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "local-1795324432471"
        log.write_bytes(b"\n".join(lines))
        events, entries = source_events(Path(directory))
    failures = [
        entry
        for entry in entries
        if entry["event"] in ("eventlog_failed", "source_failed")
        or "internal error" in str(entry.get("detail", ""))
    ]
    assert failures == []
    runs: dict[str, list[str]] = {}
    for event in events:
        validate_run_event(event)
        runs.setdefault(event["run"]["runId"], []).append(event["eventType"])
    for types in runs.values():
        assert types[0] == "START" and types.count("START") == 1, types
        assert len(types) == 2 and types[1] in ("COMPLETE", "FAIL", "ABORT"), types


# -- the private key ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_private_key_readable_by_others_refused(tmp_path: Path, mode: int) -> None:
    """A key open to group or others refuses the start (exit 78), quoting no key material."""
    key = keygen(tmp_path)
    secret = key.read_text().strip()
    key.chmod(mode)
    config = config_file(tmp_path, file_lineage(tmp_path / "events.jsonl"))
    with memory_agent(config, 10, wait=False) as process:
        assert process.proc.wait(60) == 78
    output = process.raw_output()
    assert process.wait_log("start_refused")["error"] == (
        f"signing.key_path: {key}: private key is accessible by group or others "
        f"(mode {mode:04o}); run chmod 600 {key}"
    )
    assert secret not in output and secret[:12] not in output
    assert not (tmp_path / "events.jsonl").exists() or not (tmp_path / "events.jsonl").read_text()


# -- the bearer token --------------------------------------------------------------------------


def test_token_never_in_logs_metrics_control_or_state(tmp_path: Path) -> None:
    """The token reaches only the collector: not logs, metrics, health, control or state."""
    keygen(tmp_path)
    ca = trustme.CA()
    context = __import__("ssl").create_default_context(__import__("ssl").Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    first, rotated = "tok-" + "A1b2" * 8, "tok-" + "Z9y8" * 8
    (tmp_path / "token").write_text(first)
    with TallyCollector(401, tls=context) as collector:
        lineage = http_lineage(
            collector.url,
            ca_file=str(ca_file),
            auth={"type": "bearer", "token_env": "OL_TOKEN"},
        )
        config = config_file(tmp_path, lineage, logging={"level": "debug", "format": "json"})
        with memory_agent(config, 200, 100.0, env={"OL_TOKEN": first}) as process:
            collector.wait_for_requests(20, timeout=60)
            document = yaml.safe_load(config.read_text())
            document["lineage"]["http"]["ca_file"] = str(tmp_path / "missing-ca.pem")
            config.write_text(yaml.safe_dump(document))
            process.signal(signal.SIGHUP)  # a failing reload logs its error
            process.wait_log("reload_failed")
            samples = settle(process, "http", 200)
            answers = [
                request(str(tmp_path / "control.sock"), {"command": "status"}),
                request(
                    str(tmp_path / "control.sock"), {"command": "describe", "app_id": "memory"}
                ),
            ]
            assert process.metrics_url is not None
            exposed = [
                httpx.get(process.metrics_url, timeout=10).text,
                httpx.get(process.metrics_url.replace("/metrics", "/healthz"), timeout=10).text,
                json.dumps(answers),
            ]
            assert_healthy(process)
            stop_and_account(process)
        with memory_agent(config, 5, env={"OL_TOKEN": rotated}, wait=False) as again:
            again.proc.wait(60)  # the missing CA file refuses the start; the message says so
    assert samples
    headers = {r.headers["authorization"] for r in collector.requests}
    assert headers == {f"Bearer {first}"}
    state = b"".join(p.read_bytes() for p in (tmp_path / "state").iterdir() if p.is_file())
    everything = "\n".join(
        [process.raw_output(), again.raw_output(), *exposed, state.decode("latin-1")]
    )
    for token in (first, rotated):
        assert token not in everything
        assert token[4:20] not in everything  # not even a piece of it
    assert "http_4xx" in exposed[0]  # the refusals were counted, under a reason


# -- the metrics endpoint ----------------------------------------------------------------------


def listening(port: int) -> list[str]:
    """Local addresses of TCP sockets listening on `port` (from /proc/net/tcp{,6})."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.append(address)
    return found


def test_metrics_endpoint_on_loopback_unless_configured(tmp_path: Path) -> None:
    """Metrics listen on 127.0.0.1:9464 only unless an address is configured."""
    keygen(tmp_path)
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 9464)) == 0:
            pytest.skip("port 9464 is taken on this machine; the default cannot be started")
    config = config_file(tmp_path, file_lineage(tmp_path / "events.jsonl"))
    document = yaml.safe_load(config.read_text())
    del document["metrics"]
    config.write_text(yaml.safe_dump(document))
    with memory_agent(config, 1) as process:
        assert process.wait_log("agent_started")["metrics"] == "127.0.0.1:9464"
        assert listening(9464) == ["0100007F"]  # 127.0.0.1, and nothing else
        assert_healthy(process)
        stop_and_account(process)
    document["metrics"] = {"listen": "0.0.0.0:0"}
    config.write_text(yaml.safe_dump(document))
    with memory_agent(config, 1) as process:
        port = int(process.wait_log("agent_started")["metrics"].rsplit(":", 1)[1])
        assert listening(port) == ["00000000"]
        stop_and_account(process)


# -- signatures --------------------------------------------------------------------------------


def resigned(event: dict[str, Any], key: Ed25519PrivateKey, key_id: str) -> dict[str, Any]:
    """The event signed again the way the agent signs, with another key, claiming `key_id`."""
    forged = copy.deepcopy(event)
    facet = forged["run"]["facets"].pop("lineageAgent_signature")
    facet["keyId"] = key_id
    facet["signature"] = base64.b64encode(key.sign(rfc8785.dumps(forged))).decode()
    forged["run"]["facets"]["lineageAgent_signature"] = facet
    return forged


def test_tampered_reordered_or_resigned_events_fail_verification(tmp_path: Path) -> None:
    """Tampered, reordered, re-signed or unsigned real events fail both verifiers."""
    keygen(tmp_path)
    target = tmp_path / "events.jsonl"
    config = config_file(tmp_path, file_lineage(target))
    with memory_agent(config, 4) as process:
        settle(process, "file", 4)
        stop_and_account(process)
    original = read_jsonl(target)[1]  # a COMPLETE with an output dataset and its schema
    trusted = public(tmp_path / "ed25519.key")
    attacker = Ed25519PrivateKey.generate()
    claimed = original["run"]["facets"]["lineageAgent_signature"]["keyId"]
    raw = attacker.public_key().public_bytes_raw()
    own_id = "sha256:" + base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).decode().rstrip("=")
    fields = original["outputs"][0]["facets"]["schema"]["fields"]

    def changed(edit: Any) -> dict[str, Any]:
        event = copy.deepcopy(original)
        edit(event)
        return event

    forgeries = {
        "tampered": changed(lambda e: e["outputs"][0].update(name="/data/elsewhere")),
        "event type": changed(lambda e: e.update(eventType="FAIL")),
        "reordered": changed(
            lambda e: e["outputs"][0]["facets"]["schema"].update(fields=fields[::-1])
        ),
        "own key": resigned(original, attacker, own_id),
        "claims trusted key": resigned(original, attacker, claimed),
        "unsigned": changed(lambda e: e["run"]["facets"].pop("lineageAgent_signature")),
    }
    reasons = {
        "tampered": "signature does not verify",
        "event type": "signature does not verify",
        "reordered": "signature does not verify",
        "own key": f"unknown keyId {own_id}",
        "claims trusted key": "signature does not verify",
        "unsigned": "no lineageAgent_signature facet",
    }
    key_text = base64.b64encode(trusted.public_bytes_raw()).decode()
    for name, event in forgeries.items():
        path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        path.write_text(json.dumps(event) + "\n")
        result = subprocess.run(
            [sys.executable, "-m", "agent", "verify", str(path), "--public-key", key_text],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert result.returncode == 1, (name, result.stdout)
        assert result.stdout.splitlines()[0] == f"{path}:1: {reasons[name]}", name
        with pytest.raises((InvalidSignature, KeyError, AssertionError)):
            verify(event, trusted)
    # Object keys in another order and other whitespace: the canonical bytes are the same.
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text(json.dumps(original, sort_keys=True, separators=(" , ", " : ")) + "\n")
    ok = subprocess.run(
        [sys.executable, "-m", "agent", "verify", str(shuffled), "--public-key", key_text],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stdout
    verify(json.loads(shuffled.read_text()), trusted)


# -- symbolic links planted by another user ----------------------------------------------------

NOBODY = 65534


def as_nobody(code: str) -> None:
    subprocess.run(
        [sys.executable, "-c", f"import os; os.setgid({NOBODY}); os.setuid({NOBODY}); {code}"],
        check=True,
        timeout=30,
    )


@pytest.fixture
def shared_spool() -> Iterator[Path]:
    """A world-writable directory other users can reach, like a spool under /var/tmp."""
    if os.geteuid() != 0:
        pytest.skip("planting files as another user needs root")
    public_dir = Path(tempfile.mkdtemp(prefix="lineage-spool-"))
    public_dir.chmod(0o755)
    spool = public_dir / "spool"
    spool.mkdir()
    spool.chmod(0o777)  # not sticky: others may also rename what the agent made
    try:
        yield spool
    finally:
        shutil.rmtree(public_dir, ignore_errors=True)


def delivered_to_file(process: AgentProcess) -> float:
    return metric(process.scrape(), "lineage_events_delivered_total", transport="file")


def test_symlinks_planted_by_another_user_are_never_followed(
    tmp_path: Path, shared_spool: Path
) -> None:
    """Links another user plants at the file, lock or directory never steer a write; the
    directory swapped for a link while the agent runs is refused, and /healthz names the lock
    whose path it took."""
    keygen(tmp_path)
    victim = shared_spool.parent / "victim"
    victim.mkdir()
    precious = victim / "precious"
    precious.write_text("keep me\n")
    cases = {
        "out-file/events.jsonl": (
            "out-file/events.jsonl",
            str(precious),
            "{path}: it is a symbolic link",
        ),
        "out-lock/events.jsonl": (
            "out-lock/events.jsonl.lock",
            str(precious),
            "{path}.lock: it is a symbolic link",
        ),
        "out-dir/events.jsonl": (
            "out-dir",
            str(victim),
            "{path}: {spool}/out-dir is a symbolic link owned by another user (uid 65534)",
        ),
    }
    for relative, (link, target, message) in cases.items():
        path = shared_spool / relative
        if "/" in link:
            (shared_spool / link).parent.mkdir(exist_ok=True)
            (shared_spool / link).parent.chmod(0o777)
        as_nobody(f"os.symlink({target!r}, {str(shared_spool / link)!r})")
        config = config_file(tmp_path, file_lineage(path))
        with memory_agent(config, 5, wait=False) as process:
            assert process.proc.wait(60) == 78, process.raw_output()
        expected = "refusing to write " + message.format(path=path, spool=shared_spool)
        assert process.wait_log("start_refused")["error"] == expected
    # While it runs: nobody moves the agent's directory away and plants a link instead.
    path = shared_spool / "live" / "events.jsonl"
    config = config_file(tmp_path, file_lineage(path))
    with memory_agent(config, 1_000_000, 100.0) as process:
        wait_until("deliveries", lambda: delivered_to_file(process) >= 20)
        as_nobody(
            f"os.rename({str(path.parent)!r}, {str(shared_spool / 'moved')!r}); "
            f"os.symlink({str(victim)!r}, {str(path.parent)!r})"
        )
        wait_until("write errors", lambda: "write_error" in drops(process.scrape(), "file"))
        # The lock's path no longer names the lock the agent holds: /healthz says so at the
        # next check of the files it owns (every second), until a restart.
        lock_gone = f"{path}.lock removed"
        wait_until("the lock reported", lambda: lock_gone in healthz(process)["problems"])
        assert process.proc.poll() is None, process.raw_output()[-4000:]
        assert healthz(process)["status"] == "degraded"
        accounting = stop_and_account(process)
    failing = process.wait_log("transport_failing", transport="file")
    assert failing["detail"] == (
        f"refusing to write {path}: {path.parent} is a symbolic link owned by another user "
        "(uid 65534)"
    )
    assert accounting["file"]["dropped"] > 0
    assert sorted(p.name for p in victim.iterdir()) == ["precious"]
    assert precious.read_text() == "keep me\n"
    written = read_jsonl(shared_spool / "moved" / "events.jsonl")
    assert len(written) == accounting["file"]["delivered"]
    check_events(written, tmp_path / "ed25519.key")
