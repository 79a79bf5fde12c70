"""The OpenLineage client's configuration conventions, read into the `lineage` section.

Sources, highest first (the client's own order: what its constructor is given, then its
openlineage.yml, then its `OPENLINEAGE__` variables, then `OPENLINEAGE_URL`):

1. `OPENLINEAGE_DISABLED=true`: lineage off, whatever else says.
2. `lineage.transport` in the agent's file. Written as the seed's names (`http`, `[http, file]`)
   it alone decides, with the `lineage.http` / `file` / `kafka` sections. Written as the
   client's `{type: ...}` mapping it is merged, key by key, over the sources below.
3. The `transport` section of the first readable openlineage.yml of `OPENLINEAGE_CONFIG`,
   `./openlineage.yml` and `~/.openlineage/openlineage.yml`.
4. `OPENLINEAGE__TRANSPORT*` variables: `__` nests, names are lower-cased, a value that
   parses as JSON is taken as JSON (`{"type": "api_key", ...}`, `5`, `true`), else as text;
   `OPENLINEAGE__TRANSPORT` alone is the whole transport as JSON and replaces the others.
5. `OPENLINEAGE_URL` (+ `OPENLINEAGE_ENDPOINT`, `OPENLINEAGE_API_KEY`): copied, before all of
   the above, into a `default_http` member of `transports`, which counts when the transport is
   composite; an http transport of its own when nothing above names a transport type.

An http transport's events go to the client's `urljoin(url, endpoint)`, `endpoint` being
`api/v1/lineage` by default; a seed `lineage.http.endpoint` that is a bare base URL is completed
the same way. Every setting taken here is remembered with where it came from (`file:line` or a
variable's name) for `config check`; an error names that place and the key, never a secret.

This module decides the order; `clientsources` reads each source and `clientshape` translates
the merged transport settings into the lineage section.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from agent.config.clientevents import read_filters, read_tags
from agent.config.clientkeys import DEFAULT_ENDPOINT
from agent.config.clientshape import Builder
from agent.config.clientsources import (
    AgentSide,
    Leaf,
    aliased,
    client_variables,
    config_file,
    env_tree,
    file_tree,
    get,
    merge,
    node_tree,
    url_transport,
    without_url_member,
)
from agent.config.model import LineageConfig
from agent.errors import ConfigError

Origins = tuple[tuple[str, str], ...]


def resolve(
    lineage: LineageConfig,
    agent: AgentSide,
    environ: Mapping[str, str],
    read_text: Callable[[str], str],
) -> tuple[LineageConfig, Origins]:
    """`lineage` with the client's settings applied; see the module docstring for the order."""
    if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return dataclasses.replace(lineage, enabled=False), (
            ("lineage.enabled", "OPENLINEAGE_DISABLED"),
        )
    if agent.line is not None and agent.node is None:  # the seed's shape decides alone
        completed, seed_origins = _complete_seed(lineage, agent)
        unread = client_variables(environ)
        if unread:  # say so: an operator who set them expects them to count
            where = f"{agent.source}:{agent.line} ({', '.join(unread)} not read)"
            seed_origins = (("lineage.transport", where), *seed_origins)
        return completed, seed_origins
    sections = [k for k in agent.seed_lines if k.count(".") == 1]
    if agent.node is not None and sections:
        section = min(sections, key=agent.seed_lines.__getitem__)
        raise ConfigError(
            f"{agent.source}:{agent.seed_lines[section]}: {section}: not read when"
            " lineage.transport is the client's {type: ...} mapping; write its keys inside"
            " lineage.transport"
        )
    tree: dict[str, Any] = env_tree(aliased(environ), environ)
    # No environment at all is `config check --syntax-only`: the agent's file alone.
    found = config_file(environ, os.getcwd()) if environ else None
    origins: list[tuple[str, str]] = []
    lineage = _with_events(lineage, environ, found, read_text, origins)
    if found is not None:
        tree = merge(tree, file_tree(found, read_text))
    if agent.node is not None:
        tree = merge(tree, node_tree(agent.node, "lineage.transport", agent))
    kind = get(tree, "type")
    if kind is not None and not (isinstance(kind, Leaf) and kind.value == "composite"):
        tree = without_url_member(tree)
    elif kind is None:
        # Settings with no type are ignored by the client (it falls back to OPENLINEAGE_URL or
        # its console): refused here, by the Builder, as a missing type.
        tree = without_url_member(tree)
        if not tree and environ.get("OPENLINEAGE_URL"):
            tree = url_transport(environ)
        elif not tree:
            completed, seed_origins = _complete_seed(lineage, agent)
            return completed, (*seed_origins, *origins)
    built = Builder(lineage, origins).transport(tree, "transport")
    return built, tuple(origins)


def _with_events(
    lineage: LineageConfig,
    environ: Mapping[str, str],
    found: str | None,
    read_text: Callable[[str], str],
    origins: list[tuple[str, str]],
) -> LineageConfig:
    """`lineage` with the client's `filters` and `tags` (openlineage.yml over variables)."""
    values: dict[str, Any] = {}
    for section in ("filters", "tags"):
        tree = env_tree(environ, environ, section)
        if found is not None:
            written = file_tree(found, read_text, section)
            tree = (
                merge(tree, written)
                if isinstance(tree, dict) and isinstance(written, dict)
                else (written if written != {} else tree)
            )
        if tree in ({}, None):
            continue
        origins.append((f"lineage.{section}", _origin_of(tree)))
        if section == "filters":
            values["filters"] = read_filters(tree)
        else:
            values["job_tags"], values["run_tags"] = read_tags(tree)
    return dataclasses.replace(lineage, **values) if values else lineage


def _origin_of(tree: Any) -> str:
    if isinstance(tree, Leaf):
        return tree.origin
    children = list(tree.values()) if isinstance(tree, dict) else list(tree)
    return _origin_of(children[0]) if children else "?"


# --- the seed's endpoint ----------------------------------------------------------------------


def _complete_seed(lineage: LineageConfig, agent: AgentSide) -> tuple[LineageConfig, Origins]:
    """A seed `lineage.http.endpoint` with no path (`http://host:5000`, how OPENLINEAGE_URL is
    written) gets the client's `/api/v1/lineage`, instead of POSTs to `/`."""
    http = lineage.http
    if http is None or urlsplit(http.endpoint).path not in ("", "/"):
        return lineage, ()
    endpoint = urljoin(http.endpoint, DEFAULT_ENDPOINT)
    line = agent.seed_lines.get("lineage.http.endpoint", agent.line)
    note = f"{agent.source}:{line} (completed with /{DEFAULT_ENDPOINT})"
    replaced = dataclasses.replace(lineage, http=dataclasses.replace(http, endpoint=endpoint))
    return replaced, (("lineage.http.endpoint", note),)


# --- where the agent deliberately differs ------------------------------------------------------


def differences(lineage: LineageConfig, origins: Origins) -> list[str]:
    """One line per setting where the agent, given the client's settings, deliberately does
    otherwise than the client; empty when none of the client's settings was taken."""
    if not origins:
        return []
    notes = [
        f"lineage.queue_size: events wait in a queue of"
        f" {lineage.queue_size} per transport and are dropped when it is full (at-most-once);"
        " the client sends each event inside emit()",
        "signing.key_path: every event carries the agent's Ed25519"
        " signature facet; the client's carry none",
    ]
    if len(lineage.transport) > 1:
        notes.append(
            "lineage.transport: composite: each member has its own"
            " queue and gets every event whatever the others do (continue_on_failure and"
            " continue_on_success both true)"
        )
    if lineage.kafka is not None:
        notes.append(
            "lineage.kafka.config: no producer retries (message.send.max.retries=0,"
            " enable.idempotence=false), so a record is written at most once"
        )
    return notes
