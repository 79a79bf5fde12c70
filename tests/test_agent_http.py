"""The whole agent process shipping to a real loopback collector, fault by fault."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import trustme

from tests.agentproc import AgentProcess, assert_identity, keygen, metric, run_agent, write_config
from tests.collector import Collector, closed_port, slow
from tests.independent import public_key, verify


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    keygen(tmp_path)
    return tmp_path


def http_lineage(url: str, **extra: object) -> dict[str, object]:
    return {"enabled": True, "transport": "http", "http": {"endpoint": url, **extra}}


def test_events_arrive_valid_and_verified(workdir: Path) -> None:
    """Every event reaches the collector schema-valid and verifies with `cryptography`."""
    with Collector(validate=True) as collector:
        config = write_config(workdir, http_lineage(collector.url))
        with run_agent(config, events=40) as agent:
            events = collector.wait_for(40, timeout=20)
            samples = agent.scrape()
            assert metric(samples, "lineage_events_delivered_total", transport="http") == 40
            assert_identity(samples, "http")
            assert agent.stop() == 0
    assert collector.invalid == []
    key = public_key(workdir / "ed25519.key")
    for event in events:
        verify(event, key)
    runs: dict[str, list[str]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert all(types == ["START", "COMPLETE"] for types in runs.values())


@pytest.mark.parametrize(
    ("behaviour", "counter", "reason"),
    [
        (400, "lineage_events_dropped_by_reason_total", "http_4xx"),
        (401, "lineage_events_dropped_by_reason_total", "http_4xx"),
        (500, "lineage_events_dropped_by_reason_total", "http_500"),
        (501, "lineage_events_dropped_by_reason_total", "http_5xx"),
        (slow(2.0), "lineage_events_unconfirmed_total", "timeout"),
        ("reset", "lineage_events_unconfirmed_total", "network"),
    ],
)
def test_collector_faults_are_counted_with_reason(
    workdir: Path, behaviour: object, counter: str, reason: str
) -> None:
    """A collector that answers no drops the events with its reason; one that took the
    request and gave no answer leaves them unconfirmed (a COMPLETE's resend too, counted
    once); the agent stays up."""
    with Collector(behaviour) as collector:  # type: ignore[arg-type]
        # retries and the late-answer wait off: the fault decides each event's outcome
        lineage = http_lineage(
            collector.url, timeout="300ms", retry={"total": 0}, late_answer_wait=0
        )
        config = write_config(workdir, lineage)
        with run_agent(config, events=6) as agent:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                samples = agent.scrape()
                if metric(samples, counter, transport="http", reason=reason) == 6:
                    break
                time.sleep(0.1)
            assert metric(samples, counter, transport="http", reason=reason) == 6
            assert metric(samples, "lineage_events_delivered_total", transport="http") == 0
            assert_identity(samples, "http")
            assert agent.proc.poll() is None
            assert agent.stop() == 0


def test_connection_refused_keeps_events_queued(workdir: Path) -> None:
    """A collector that is not there: nothing left, so nothing is dropped; the events wait
    in the queue (attempts counted as `connect`), and at the stop stay in the spool."""
    url = f"http://127.0.0.1:{closed_port()}/api/v1/lineage"
    config = write_config(workdir, {**http_lineage(url), "drain_timeout": "500ms"})
    with run_agent(config, events=10) as agent:
        samples = wait_not_sent(agent, "connect")
        assert metric(samples, "lineage_events_dropped_total") == 0
        assert metric(samples, "lineage_queue_depth", transport="http") == 10
        assert_identity(samples, "http")
        assert agent.stop() == 0
        stopped = agent.wait_log("agent_stopped")
    assert stopped["undelivered"] == {"http": 0}
    assert stopped["kept"] == {"http": 10}
    assert agent.wait_log("transport_failing")["reason"] == "connect"


def wait_not_sent(agent: AgentProcess, reason: str, seconds: float = 20) -> dict[str, float]:
    """Scrape until an attempt that never left was counted with `reason`; the last scrape."""
    deadline = time.monotonic() + seconds
    name = "lineage_delivery_not_sent_total"
    while not metric(samples := agent.scrape(), name, transport="http", reason=reason):
        assert time.monotonic() < deadline, samples
        time.sleep(0.1)
    return samples


def test_https_bearer_token_sent_and_never_logged(workdir: Path) -> None:
    """Over https with a test CA the token is sent as Bearer and appears in no log line."""
    ca = trustme.CA()
    server_context = __import__("ssl").create_default_context(__import__("ssl").Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_file = workdir / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    token = "s3cr3t-token-value-1234"
    with Collector(tls=server_context, validate=True) as collector:
        lineage = http_lineage(
            collector.url, ca_file=str(ca_file), auth={"type": "bearer", "token_env": "OL_TOKEN"}
        )
        config = write_config(workdir, lineage, logging={"level": "debug", "format": "json"})
        with run_agent(config, events=4, env={"OL_TOKEN": token}) as agent:
            collector.wait_for(4, timeout=20)
            agent.signal(signal.SIGHUP)  # the token is read again at reload
            agent.wait_log("reload_ok")
            assert agent.stop() == 0
            output = agent.raw_output()
    assert {r.headers["authorization"] for r in collector.requests} == {f"Bearer {token}"}
    assert token not in output
    assert collector.invalid == []


def test_untrusted_certificate_keeps_events_queued(workdir: Path) -> None:
    """A certificate the agent does not trust: nothing of the request left, so the events
    wait in the queue (`tls` attempts), not a crash and not a drop."""
    ca = trustme.CA()
    server_context = __import__("ssl").create_default_context(__import__("ssl").Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    with Collector(tls=server_context) as collector:
        config = write_config(workdir, {**http_lineage(collector.url), "drain_timeout": "500ms"})
        with run_agent(config, events=2) as agent:
            samples = wait_not_sent(agent, "tls")
            assert metric(samples, "lineage_events_dropped_total") == 0
            assert metric(samples, "lineage_queue_depth", transport="http") == 2
            assert agent.stop() == 0
        assert collector.requests == []


def test_http_with_auth_refused_at_start(workdir: Path) -> None:
    """Bearer auth with an http:// endpoint exits 78 with a clear message."""
    lineage = http_lineage(
        "http://127.0.0.1:9/api/v1/lineage", auth={"type": "bearer", "token_env": "OL_TOKEN"}
    )
    config = write_config(workdir, lineage)
    with run_agent(config, env={"OL_TOKEN": "x" * 16}, wait=False) as agent:
        assert agent.proc.wait(20) == 78
        output = agent.raw_output()
    assert (
        "lineage.http.endpoint: bearer auth needs an https:// endpoint; refusing to send a "
        "token over http" in output
    )


def test_missing_token_variable_refused_at_start(workdir: Path) -> None:
    """A token variable that is not set exits 78 naming the variable."""
    lineage = http_lineage(
        "https://127.0.0.1:9/api/v1/lineage", auth={"type": "bearer", "token_env": "NO_SUCH_VAR"}
    )
    config = write_config(workdir, lineage)
    with run_agent(config, wait=False) as agent:
        assert agent.proc.wait(20) == 78
    assert "lineage.http.auth.token_env: environment variable NO_SUCH_VAR is not set" in (
        agent.raw_output()
    )


def test_overflow_and_drain_exact_counts(workdir: Path) -> None:
    """A hung collector: past the queue everything is dropped; what waits at the drain
    deadline is kept in the spool; the request in flight then is unconfirmed."""
    with Collector("hang") as collector:
        lineage = {
            **http_lineage(collector.url, timeout="30s", concurrency=1),
            "queue_size": 10,
            "drain_timeout": "1s",
        }
        config = write_config(workdir, lineage)
        with run_agent(config, events=100) as agent:
            deadline = time.monotonic() + 20
            while metric(agent.scrape(), "lineage_events_dropped_total") < 90:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            samples = agent.scrape()
            assert (
                metric(
                    samples,
                    "lineage_events_dropped_by_reason_total",
                    transport="http",
                    reason="queue_full",
                )
                == 90
            )
            assert metric(samples, "lineage_queue_depth", transport="http") == 10
            assert_identity(samples, "http")
            began = time.monotonic()
            assert agent.stop() == 0
            took = time.monotonic() - began
            stopped = agent.wait_log("agent_stopped")
    # Its drain deadline (1 s) ended it, not the hung collector: well before stop()'s kill
    # at 30 s, with the margin a busy machine needs.
    assert took < 15.0
    assert stopped["undelivered"] == {"http": 0}
    assert stopped["kept"] == {"http": 9}
    assert stopped["accounting"]["http"] == {
        "offered": 100,
        "delivered": 0,
        "dropped": 90,
        "unconfirmed": 1,
        "queued": 9,
    }
