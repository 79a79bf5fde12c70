"""The two sides of the client conformance test, each run as its own process under the same
environment and working directory: `client` sends the events with openlineage-python's
`OpenLineageClient()` (configured only by what it finds), `agent CONFIG` with the agent's own
resolution (`load_config`), signing key and transports. Each writes what happened to RESULT
as JSON: `{"refused": message}` or `{"failed": n}` (sends that raised).

    python -m tests.client_sides client RESULT
    python -m tests.client_sides agent RESULT CONFIG
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sys
from typing import Any

APP_RUN = "01912c3c-0000-7000-8000-000000000001"
STEP_RUN = "01912c3c-0000-7000-8000-000000000002"
NESTED_RUN = "01912c3c-0000-7000-8000-000000000003"
PRODUCER = "https://github.com/lineage-agent/conformance"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def _parent(run: str, namespace: str, name: str, root: tuple[str, str] | None) -> dict[str, Any]:
    facet: dict[str, Any] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
        "run": {"runId": run},
        "job": {"namespace": namespace, "name": name},
    }
    if root is not None:
        facet["root"] = {"run": {"runId": APP_RUN}, "job": {"namespace": root[0], "name": root[1]}}
    return facet


#: An application's run (no parent), a step of it (parent: the application), and a step
#: whose parent names a root job (an orchestrator's task above the application).
EVENTS: list[dict[str, Any]] = [
    {"job": ("spark", "etl_app"), "run": APP_RUN, "parent": None},
    {
        "job": ("spark", "etl_app.step_1"),
        "run": STEP_RUN,
        "parent": (APP_RUN, "spark", "etl_app", None),
    },
    {
        "job": ("spark", "etl_app.step_2"),
        "run": NESTED_RUN,
        "parent": (APP_RUN, "spark", "etl_app", ("airflow", "dag.task")),
    },
]


def event_dict(spec: dict[str, Any]) -> dict[str, Any]:
    facets = {} if spec["parent"] is None else {"parent": _parent(*spec["parent"])}
    return {
        "eventType": "START",
        "eventTime": "2026-01-01T00:00:00.000Z",
        "producer": PRODUCER,
        "schemaURL": SCHEMA,
        "run": {"runId": spec["run"], "facets": facets},
        "job": {"namespace": spec["job"][0], "name": spec["job"][1], "facets": {}},
        "inputs": [],
        "outputs": [],
    }


def client_side() -> dict[str, Any]:
    # The console transport logs each event at INFO: shown as an operator would see it.
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import parent_run

    try:
        client = OpenLineageClient()
    except Exception as error:
        return {"refused": f"{type(error).__name__}: {error}"}
    failed = 0
    for spec in EVENTS:
        facets: dict[str, Any] = {}
        if spec["parent"] is not None:
            run, namespace, name, root = spec["parent"]
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=run),
                job=parent_run.Job(namespace=namespace, name=name),
                root=None
                if root is None
                else parent_run.Root(
                    run=parent_run.RootRun(runId=APP_RUN),
                    job=parent_run.RootJob(namespace=root[0], name=root[1]),
                ),
            )
        event = RunEvent(
            eventType=RunState.START,
            eventTime="2026-01-01T00:00:00.000Z",
            run=Run(runId=spec["run"], facets=facets),
            job=Job(namespace=spec["job"][0], name=spec["job"][1]),
            producer=PRODUCER,
        )
        try:
            client.emit(event)
        except Exception:
            failed += 1
    client.close(timeout=10)
    return {"failed": failed}


async def agent_side(config_path: str) -> dict[str, Any]:
    from agent.config.loader import load_config
    from agent.delivery.envelope import Envelope
    from agent.delivery.shaping import shaping
    from agent.delivery.signing import Signer, load_signing_key
    from agent.delivery.transports.factory import build_transports
    from agent.errors import ConfigError, KeyFileError, StartError

    try:
        config = load_config(config_path)
        if not config.lineage.enabled:
            return {"failed": 0}
        try:
            signer = Signer(load_signing_key(config.signing.key_path))
        except KeyFileError as error:  # as the start's preflight reports it
            raise StartError(f"signing.key_path: {error}") from None
        transports = await build_transports(config.lineage)
    except (ConfigError, StartError) as error:
        return {"refused": str(error)}
    shape = shaping(config.lineage)  # the client's filters and tags, as the pipeline applies them
    failed = 0
    try:
        for spec in EVENTS:
            shaped = event_dict(spec) if shape is None else shape(event_dict(spec))
            if shaped is None:
                continue
            payload = signer.sign_event(shaped)
            digest = hashlib.sha256(payload).hexdigest()
            envelope = Envelope(payload, spec["run"], "START", "conformance", digest, 0.0)
            for transport in transports.values():
                try:
                    await transport.send([envelope])
                except Exception:
                    failed += 1
    finally:
        for transport in transports.values():
            await transport.aclose()
    return {"failed": failed}


def main() -> None:
    side, result = sys.argv[1], sys.argv[2]
    outcome = client_side() if side == "client" else asyncio.run(agent_side(sys.argv[3]))
    sys.stdout.flush()
    with open(result, "w", encoding="utf-8") as file:
        json.dump(outcome, file)


if __name__ == "__main__":
    main()
