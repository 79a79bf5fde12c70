"""The client's filters and tags applied by the pipeline before signing: filtered events never
reach a transport; tags facets merged as the client merges them; the signature covers them."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from nacl.signing import SigningKey
from prometheus_client import CollectorRegistry

from agent.config.model import EventFilter, LineageConfig
from agent.delivery.pipeline import Pipeline
from agent.delivery.shaping import shaping
from agent.delivery.signing import Signer
from agent.telemetry.health import HealthTracker
from agent.telemetry.metrics import Metrics
from tests.olschema import example_run_event


def event(job: str) -> dict[str, Any]:
    base = example_run_event()
    return {**base, "job": {**base["job"], "name": job}}


def test_filters_drop_exact_names_and_regex_prefixes() -> None:
    """exact: the whole name; regex: matched from the start, as Python's re.match."""
    lineage = LineageConfig(
        filters=(EventFilter("exact", "app.tmp"), EventFilter("regex", "scratch_\\d+"))
    )
    shape = shaping(lineage)
    assert shape is not None
    assert shape(event("app.tmp")) is None
    assert shape(event("scratch_12.write")) is None
    assert shape(event("app.tmp.x")) is not None  # exact is exact
    assert shape(event("x.scratch_12")) is not None  # a regex matches at the start only


def test_tags_merge_into_existing_facets_keeping_the_spelling() -> None:
    """A given tag replaces one of the same name (any case), keeping its spelling; others stay."""
    lineage = LineageConfig(job_tags=(("team", "data"),), run_tags=(("env", "prod"),))
    shape = shaping(lineage)
    assert shape is not None
    base = event("app")
    base["job"]["facets"] = {
        "tags": {
            "_producer": "p",
            "_schemaURL": "s",
            "tags": [
                {"key": "Team", "value": "old", "source": "SPARK"},
                {"key": "pii", "value": "true", "source": "SPARK"},
            ],
        }
    }
    shaped = shape(base)
    assert shaped is not None
    assert shaped["job"]["facets"]["tags"]["tags"] == [
        {"key": "pii", "value": "true", "source": "SPARK"},
        {"key": "Team", "value": "data", "source": "USER"},
    ]
    run_tags = shaped["run"]["facets"]["tags"]
    assert run_tags["tags"] == [{"key": "env", "value": "prod", "source": "USER"}]
    assert run_tags["_schemaURL"].endswith("TagsRunFacet.json#/$defs/TagsRunFacet")
    assert "tags" not in base["run"].get("facets", {})  # the source's event is left as it was


def test_nothing_to_shape_is_no_step() -> None:
    """Without filters or tags the pipeline does nothing more per event."""
    assert shaping(LineageConfig()) is None


def test_pipeline_signs_the_tagged_event_and_never_counts_a_filtered_one() -> None:
    """A filtered event is not produced (as the client's emit() returns early); a tagged one
    is signed with its tags."""
    signed: list[bytes] = []
    signer = Signer(SigningKey.generate())

    def sign(value: object) -> bytes:
        signed.append(signer.sign_event(value))  # type: ignore[arg-type]
        return signed[-1]

    pipeline = Pipeline(sign, Metrics(CollectorRegistry()), HealthTracker())
    lineage = dataclasses.replace(
        LineageConfig(), filters=(EventFilter("exact", "drop.me"),), job_tags=(("k", "v"),)
    )
    pipeline.set_shape(shaping(lineage))
    pipeline.submit("app", event("drop.me"))
    pipeline.submit("app", event("keep.me"))
    assert pipeline.produced == 1
    (payload,) = signed
    assert orjson.loads(payload)["job"]["facets"]["tags"]["tags"] == [
        {"key": "k", "value": "v", "source": "USER"}
    ]
