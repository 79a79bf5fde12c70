"""The metrics as operators read them: names, zero series, process metrics, the alert rules
under deploy/prometheus (checked and unit-tested by promtool) and the Grafana dashboard."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from agent.errors import DROP_REASONS
from agent.telemetry.metrics import EVENT_TYPES, SKIP_REASONS, Metrics, render
from tests.agentproc import ROOT, keygen, run_agent, write_config

RULES = ROOT / "deploy" / "prometheus" / "lineage-agent.rules.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "lineage-agent.rules.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "lineage-agent.json"
# A PromQL identifier; the ones naming our metrics start with one of the two prefixes.
NAME = re.compile(r"\b(?:lineage|process)_[a-z_]+\b")


def promtool() -> str:
    # scripts/services.sh installs Debian's prometheus package (promtool) for `./run test`.
    path = shutil.which("promtool")
    assert path is not None, "promtool is missing: run scripts/services.sh"
    return path


def families(text: str) -> dict[str, set[str]]:
    """Family name -> the names of its samples, as prometheus_client reads them."""
    return {f.name: {s.name for s in f.samples} for f in text_string_to_metric_families(text)}


def test_registry_has_one_prefix_process_metrics_and_no_created_series() -> None:
    """Every family is lineage_* or process_*, process_* is on the injected registry and no
    `_created` sample is exported."""
    registry = CollectorRegistry()
    Metrics(registry).register_transport("http", 8)
    found = families(render(registry).decode())
    assert {"process_open_fds", "process_max_fds"} <= set(found)
    assert [n for n in found if not n.startswith(("lineage_", "process_"))] == []
    assert [n for n in found if n.startswith("lineage_agent_")] == []
    assert "lineage_build_info" in {s for names in found.values() for s in names}
    samples = {s for names in found.values() for s in names}
    assert [s for s in samples if s.endswith("_created")] == []


def test_labelled_counters_start_at_zero_for_every_documented_value() -> None:
    """Drop reasons per transport, skip reasons, event types and end causes are all 0 before
    the first increment, so that increase() sees the first one."""
    registry = CollectorRegistry()
    Metrics(registry).register_transport("file", 8)
    value = registry.get_sample_value
    for reason in DROP_REASONS:
        labels = {"transport": "file", "reason": reason}
        assert value("lineage_events_dropped_by_reason_total", labels) == 0, reason
    for skipped in SKIP_REASONS:
        assert value("lineage_eventlog_lines_skipped_total", {"reason": skipped}) == 0, skipped
    for event_type in EVENT_TYPES:
        assert value("lineage_events_emitted_total", {"event_type": event_type}) == 0
    for cause in ("driver_lost", "log_ended"):
        assert value("lineage_applications_ended_total", {"cause": cause}) == 0
    assert value("lineage_delivery_latency_seconds_count", {"transport": "file"}) == 0


def test_promtool_checks_the_rules() -> None:
    """`promtool check rules` accepts the shipped alert rules."""
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    """`promtool test rules` passes the rules' unit tests (each alert fires and stays quiet)."""
    done = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=RULE_TESTS.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {
        item["alertname"]
        for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for item in case["alert_rule_test"]
    }
    alerts = {rule["alert"] for rule in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}
    assert tested == alerts


#: Families with one series per followed store directory, sample name by family: the agent
#: of `scraped` follows no store, so it declares them without a sample.
PER_STORE = {
    "lineage_eventlog_store_up": "lineage_eventlog_store_up",
    "lineage_eventlog_store_failures": "lineage_eventlog_store_failures_total",
    "lineage_eventlog_store_listing_seconds": "lineage_eventlog_store_listing_seconds",
    "lineage_eventlog_store_last_listing_timestamp_seconds": (
        "lineage_eventlog_store_last_listing_timestamp_seconds"
    ),
}


def expressions(dashboard: dict[str, object]) -> list[str]:
    exprs = [
        str(target["expr"])
        for panel in dashboard["panels"]  # type: ignore[attr-defined]
        for target in panel["targets"]
    ]
    for variable in dashboard["templating"]["list"]:  # type: ignore[index]
        query = variable.get("query")
        if isinstance(query, dict):
            exprs.append(str(query["query"]))
    return exprs


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The families of a real agent's /metrics after it shipped a few events to a file."""
    workdir = tmp_path_factory.mktemp("scrape")
    keygen(workdir)
    lineage = {"enabled": True, "transport": "file", "file": {"path": str(workdir / "ev.jsonl")}}
    with run_agent(write_config(workdir, lineage), events=5) as agent:
        assert agent.metrics_url is not None
        text = httpx.get(agent.metrics_url, timeout=10).text
        assert agent.stop() == 0
    return families(text)


def test_real_agent_exports_one_prefix_and_no_created(scraped: dict[str, set[str]]) -> None:
    """A running agent's /metrics: lineage_* and process_* only, no `_created` series."""
    assert [n for n in scraped if not n.startswith(("lineage_", "process_"))] == []
    assert "process_open_fds" in scraped
    samples = {s for names in scraped.values() for s in names}
    assert [s for s in samples if s.endswith("_created")] == []


def test_dashboard_and_rules_refer_only_to_exported_metrics(
    scraped: dict[str, set[str]],
) -> None:
    """The Grafana dashboard is valid JSON whose every expression (and every alert rule's)
    names metrics a running agent exports, and it shows every lineage_* family."""
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "lineage-agent"
    exprs = expressions(dashboard)
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert {f for f in PER_STORE if not scraped.get(f)} == set(PER_STORE)
    scraped = {**scraped, **{family: {name} for family, name in PER_STORE.items()}}
    samples = {s for names in scraped.values() for s in names}
    used: set[str] = set()
    for expr in [*exprs, *(str(rule["expr"]) for rule in rules)]:
        names = set(NAME.findall(expr))
        assert names, expr
        assert names <= samples, f"{expr}: {sorted(names - samples)}"
        used |= names
    shown = {family for family, names in scraped.items() if names & used}
    assert {f for f in scraped if f.startswith("lineage_")} - shown == set()
