"""The agent against openlineage-python 1.54, side by side: for each case both run in their
own process under the same environment, files and working directory and send the same three
events (an application's run, a step of it, a step under a root job); where the events
arrive (which collector and path with which Authorization header, which Kafka topic and key,
how many console lines) must be the same, or the agent must refuse the case at start naming
the setting. The table of cases and their outcomes is in docs/configuration.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme

from agent.delivery.signing import generate_key_file, public_key_text
from tests.collector import Collector
from tests.kafka import Kafka
from tests.test_transport_kafka import consume
from tests.tokens import TokenServer

ROOT = Path(__file__).resolve().parent.parent
SECRET = "8d3f0c1e-4b7a-4f55-9a7e-2c1b0d9e6f31"
JOBS = 3  # events each side sends


@dataclass(frozen=True)
class Case:
    """Environment and files, placeholders `{A}` `{B}` (collectors), `{F}` (one answering
    500), `{S}` (https), `{T}` (an https token endpoint), `{BOOT}` `{TOPIC}` (Kafka),
    `{TMP}`; `refused`: the setting the agent names when it refuses the case."""

    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # "cwd/…", "home/…", "tmp/…"
    agent: str = "lineage: {}\n"
    refused: str | None = None
    kafka: bool = False
    public_key: bool = False


HTTP_YML = "transport:\n  type: http\n  url: {URL}\n"
CASES: dict[str, Case] = {
    "1 url beside composite": Case(
        {
            "OPENLINEAGE_URL": "{A}",
            "OPENLINEAGE__TRANSPORT__TYPE": "composite",
            "OPENLINEAGE__TRANSPORT__TRANSPORTS__OUT__TYPE": "console",
        }
    ),
    "2 whole transport as JSON": Case(
        {
            "OPENLINEAGE__TRANSPORT": '{"type": "http", "url": "{B}", "endpoint": "json/lineage"}',
            "OPENLINEAGE__TRANSPORT__TYPE": "console",
            "OPENLINEAGE_URL": "{A}",
        }
    ),
    "3 ./openlineage.yml": Case(files={"cwd/openlineage.yml": HTTP_YML.replace("{URL}", "{A}")}),
    "3 ~/.openlineage/openlineage.yml": Case(
        files={"home/.openlineage/openlineage.yml": HTTP_YML.replace("{URL}", "{B}")}
    ),
    "3 OPENLINEAGE_CONFIG over ./": Case(
        {"OPENLINEAGE_CONFIG": "{TMP}/named.yml"},
        {
            "tmp/named.yml": HTTP_YML.replace("{URL}", "{B}"),
            "cwd/openlineage.yml": HTTP_YML.replace("{URL}", "{A}"),
        },
    ),
    "4 no lineage section, url": Case({"OPENLINEAGE_URL": "{A}"}, agent=""),
    "5 kafka key of root, parent, own job": Case(
        files={
            "cwd/openlineage.yml": "transport:\n  type: kafka\n  topic: {TOPIC}\n"
            "  config: {bootstrap.servers: '{BOOT}'}\n"
        },
        kafka=True,
    ),
    "6 filters": Case(
        {
            "OPENLINEAGE_URL": "{A}",
            "OPENLINEAGE__FILTERS": '[{"type": "exact", "match": "etl_app.step_1"},'
            ' {"type": "regex", "regex": "etl_app.step_[2-9]"}]',
        },
    ),
    "6 tags": Case(
        {"OPENLINEAGE__TAGS__RUN__ENV": "prod"},
        files={
            "cwd/openlineage.yml": HTTP_YML.replace("{URL}", "{A}")
            + "tags:\n  job: {team: data, pii: 'true'}\n"
        },
    ),
    "7 oauth2 auth": Case(
        {
            "OPENLINEAGE__TRANSPORT": '{"type": "http", "url": "{S}", "auth": {"type": "oauth2",'
            ' "tokenEndpoint": "{T}", "clientId": "c", "clientSecret": "' + SECRET + '"}}'
        },
    ),
    "7 jwt auth": Case(
        files={
            "cwd/openlineage.yml": HTTP_YML.replace("{URL}", "{S}")
            + f"  auth: {{type: jwt, apiKey: {SECRET}, tokenEndpoint: '{{T}}'}}\n"
        }
    ),
    "7 async_http": Case(
        {"OPENLINEAGE_URL": "{A}", "OPENLINEAGE__TRANSPORT__TYPE": "async_http"},
    ),
    "7 datadog type": Case(
        {"OPENLINEAGE__TRANSPORT__TYPE": "datadog", "OPENLINEAGE_URL": "{A}"},
        refused="transport.type",
    ),
    "8 public key as signing.key_path": Case(
        {"OPENLINEAGE_URL": "{A}"}, public_key=True, refused="signing.key_path"
    ),
    "disabled": Case({"OPENLINEAGE_DISABLED": "true", "OPENLINEAGE_URL": "{A}"}),
    "api key": Case({"OPENLINEAGE_URL": "{S}", "OPENLINEAGE_API_KEY": SECRET}),
    "console": Case({"OPENLINEAGE__TRANSPORT__TYPE": "console"}),
    "composite, a failing member": Case(
        files={
            "cwd/openlineage.yml": "transport:\n  type: composite\n  transports:\n"
            "    broken: {type: http, url: '{F}', retry: {total: 0}}\n"
            "    out: {type: console}\n"
        }
    ),
    "url beside another type": Case(
        {
            "OPENLINEAGE_URL": "{A}",
            "OPENLINEAGE__TRANSPORT__TYPE": "http",
            "OPENLINEAGE__TRANSPORT__URL": "{B}",
        }
    ),
}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def collectors(ca: trustme.CA) -> Iterator[dict[str, Collector]]:
    server = ca.issue_cert("127.0.0.1").configure_cert
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server(context)
    found = {
        "A": Collector(),
        "B": Collector(),
        "F": Collector(500),
        "S": Collector(tls=context),
    }
    for collector in found.values():
        collector.start()
    yield found
    for collector in found.values():
        collector.stop()


@pytest.fixture(scope="module")
def tokens(ca: trustme.CA) -> Iterator[TokenServer]:
    """The token endpoint of the jwt and oauth2 cases: one token for both sides, so that the
    Authorization headers compare."""
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = TokenServer(context, clients={"c": SECRET}, api_keys=(SECRET,))
    server.fixed = "conformance-token"
    server.start()
    yield server
    server.stop()


def fill(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def run_side(
    side: str, case_dir: Path, env: dict[str, str], config: Path
) -> tuple[dict[str, Any], str]:
    result = case_dir / f"{side}.json"
    argv = [sys.executable, "-m", "tests.client_sides", side, str(result)]
    ran = subprocess.run(
        [*argv, str(config)] if side == "agent" else argv,
        cwd=case_dir / "cwd",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(result.read_text()), ran.stdout


def arrivals(collectors: dict[str, Collector], stdout: str, records: list[Any]) -> dict[str, Any]:
    """Where the events went: (collector, path, Authorization) of every request, (topic, key)
    of every record, and how many console lines hold an event."""
    http = sorted(
        (name, request.path, request.headers.get("authorization", ""))
        for name, collector in collectors.items()
        for request in collector.requests
    )
    events = [e for collector in collectors.values() for e in collector.events]
    console = 0
    for line in stdout.splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and "eventType" in found:
            console += 1
            events.append(found)
    events += [json.loads(r.value()) for r in records]
    kafka = sorted((r.topic(), (r.key() or b"").decode()) for r in records)
    return {"http": http, "kafka": kafka, "console": console, "tags": user_tags(events)}


def user_tags(events: list[Any]) -> list[tuple[str, str, str, str]]:
    """(job, part, key, value) of every tag given by the operator (source USER)."""
    found = []
    for event in events:
        for part in ("job", "run"):
            facet = (event.get(part, {}).get("facets") or {}).get("tags") or {}
            for tag in facet.get("tags") or []:
                if tag.get("source") == "USER":
                    found.append((event["job"]["name"], part, tag["key"], tag["value"]))
    return sorted(found)


@pytest.mark.parametrize("name", list(CASES))
def test_agent_conforms_to_the_client(
    name: str,
    tmp_path: Path,
    collectors: dict[str, Collector],
    tokens: TokenServer,
    ca: trustme.CA,
    request: pytest.FixtureRequest,
) -> None:
    """The agent's events arrive where the client's do, or the agent refuses naming the
    setting; openlineage-python 1.54 and the agent run under the same environment and files."""
    case = CASES[name]
    for sub in ("cwd", "home", "tmp"):
        (tmp_path / sub).mkdir()
    values = {k: c.base_url for k, c in collectors.items()}
    values["TMP"] = str(tmp_path / "tmp")
    values["T"] = tokens.url
    kafka: Kafka | None = request.getfixturevalue("kafka_broker") if case.kafka else None
    if kafka is not None:
        values["TOPIC"] = f"conformance-{os.getpid()}-{abs(hash(name)) % 10_000}"
        values["BOOT"] = kafka.bootstrap
        kafka.create_topic(values["TOPIC"], partitions=3)
    for relative, text in case.files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(fill(text, values))
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    key = tmp_path / "tmp" / "ed25519.key"
    verify_key = generate_key_file(key)
    if case.public_key:
        key.write_text(public_key_text(verify_key) + "\n")
    config = tmp_path / "tmp" / "agent.yaml"
    config.write_text(
        f"signing: {{key_path: {key}}}\nstate_dir: {tmp_path / 'tmp'}\n" + fill(case.agent, values)
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path / "home"),
        "SSL_CERT_FILE": str(ca_file),  # both trust the https collector's CA the same way
        "REQUESTS_CA_BUNDLE": str(ca_file),
        **{k: fill(v, values) for k, v in case.env.items()},
    }
    seen: dict[str, dict[str, Any]] = {}
    kept: set[tuple[int, int]] = set()
    for side in ("client", "agent"):
        for collector in collectors.values():
            collector.clear()
        outcome, stdout = run_side(side, tmp_path, env, config)
        records: list[Any] = []
        if kafka is not None and "refused" not in outcome:
            every = consume(kafka.bootstrap, values["TOPIC"], JOBS * (len(seen) + 1))
            records = [r for r in every if (r.partition(), r.offset()) not in kept]
            kept |= {(r.partition(), r.offset()) for r in every}
        seen[side] = {**outcome, **arrivals(collectors, stdout, records)}
    agent, client = seen["agent"], seen["client"]
    if case.refused is not None:  # whatever the client makes of it (datadog wants a key)
        assert "refused" in agent, f"the agent took {name!r} without refusing it: {agent}"
        assert f"{case.refused}:" in agent["refused"], agent["refused"]
        assert SECRET not in agent["refused"]
        return
    assert "refused" not in client, client
    assert "refused" not in agent, agent["refused"]
    shown = ("http", "kafka", "console", "tags")
    assert [agent[k] for k in shown] == [client[k] for k in shown]
    if name != "disabled":  # a comparison of two empty results proves nothing
        assert client["http"] or client["kafka"] or client["console"], client
