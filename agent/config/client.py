"""The OpenLineage client's configuration conventions, read into the `lineage` section.

Sources, highest first (the client's own order: what its constructor is given, then its
openlineage.yml, then its `OPENLINEAGE__` variables, then `OPENLINEAGE_URL`):

1. `OPENLINEAGE_DISABLED=true`: lineage off, whatever else says.
2. `lineage.transport` in the agent's file. Written as the seed's names (`http`, `[http, file]`)
   it alone decides, with the `lineage.http` / `file` / `kafka` sections. Written as the
   client's `{type: ...}` mapping it is merged, key by key, over the sources below.
3. The `transport` section of the openlineage.yml named by `OPENLINEAGE_CONFIG`.
4. `OPENLINEAGE__TRANSPORT__*` variables: `__` nests, names are lower-cased, a value that
   parses as JSON is taken as JSON (`{"type": "api_key", ...}`, `5`, `true`), else as text.
5. `OPENLINEAGE_URL` (+ `OPENLINEAGE_ENDPOINT`, `OPENLINEAGE_API_KEY`): an http transport when
   nothing above names a transport type; with `type: composite` one more member, `default_http`.

An http transport's events go to the client's `urljoin(url, endpoint)`, `endpoint` being
`api/v1/lineage` by default; a seed `lineage.http.endpoint` that is a bare base URL is completed
the same way. Every setting taken here is remembered with where it came from (`file:line` or a
variable's name) for `config check`; an error names that place and the key, never a secret.

This module decides the order; `clientsources` reads each source and `clientshape` translates
the merged transport settings into the lineage section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from agent.config.clientshape import DEFAULT_ENDPOINT, Builder
from agent.config.clientsources import (
    AgentSide,
    client_variables,
    env_tree,
    file_tree,
    merge,
    node_tree,
    with_url,
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
    tree: dict[str, Any] = env_tree(environ)
    config_path = environ.get("OPENLINEAGE_CONFIG", "").strip()
    if config_path:
        tree = merge(tree, file_tree(config_path, read_text))
    if agent.node is not None:
        tree = merge(tree, node_tree(agent.node, "lineage.transport", agent))
    tree = with_url(tree, environ)
    if not tree:
        return _complete_seed(lineage, agent)
    origins: list[tuple[str, str]] = []
    built = Builder(lineage, origins).transport(tree, "transport")
    return built, tuple(origins)


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
