"""The OpenLineage client's `filters` and `tags`, applied to each event before it is signed,
as the client applies them in `emit`: an event whose job name a filter matches is not sent
(`exact`: equal; `regex`: RE2, matched from the name's start like Python's `re.match`), and
the tags given are merged into the job's and the run's `tags` facets, source `USER`, a tag
already there under the same name (whatever its case) taking the new value and keeping its
spelling."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import re2

from agent.config.model import LineageConfig
from agent.facets import facet

Shape = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]

_FACETS: Final = {"job": "tags", "run": "tags_run"}


def shaping(lineage: LineageConfig) -> Shape | None:
    """What the pipeline does to each event before signing; None when there is nothing to do."""
    if not (lineage.filters or lineage.job_tags or lineage.run_tags):
        return None
    exact = {f.pattern for f in lineage.filters if f.type == "exact"}
    patterns = [re2.compile(f.pattern) for f in lineage.filters if f.type == "regex"]
    tags = {"job": lineage.job_tags, "run": lineage.run_tags}

    def shape(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
        job = event.get("job")
        name = job.get("name") if isinstance(job, Mapping) else None
        if isinstance(name, str) and (
            name in exact or any(p.match(name) is not None for p in patterns)
        ):
            return None
        shaped = dict(event)
        for part, given in tags.items():
            if given and isinstance(shaped.get(part), Mapping):
                shaped[part] = _tagged(shaped[part], part, given)
        return shaped

    return shape


def _tagged(
    holder: Mapping[str, Any], part: str, given: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    facets = dict(holder.get("facets") or {})
    existing = facets.get("tags")
    before = list(existing.get("tags") or []) if isinstance(existing, Mapping) else []
    spelled = {
        str(t.get("key", "")).lower(): t.get("key") for t in before if isinstance(t, Mapping)
    }
    named = {key.lower() for key, _ in given}
    kept = [
        t
        for t in before
        if not isinstance(t, Mapping) or str(t.get("key", "")).lower() not in named
    ]
    added = [
        {"key": spelled.get(key.lower(), key), "value": value, "source": "USER"}
        for key, value in given
    ]
    if isinstance(existing, Mapping):
        facets["tags"] = {**existing, "tags": [*kept, *added]}
    else:
        facets["tags"] = facet(_FACETS[part], tags=added)
    return {**holder, "facets": facets}
