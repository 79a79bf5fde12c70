"""The OpenLineage client's `filters` and `tags` sections, read into the lineage section: a
list of `{type: exact, match: NAME}` / `{type: regex, regex: PATTERN}` (events of matching
jobs are not sent) and `{job: {KEY: VALUE}, run: {KEY: VALUE}}` (tags facets added to every
event, source `USER`). Where the client skips a filter it cannot read, with a log line, the
agent refuses it naming its place; a regex is RE2 (linear time), so one Python's `re` alone
takes is refused too."""

from __future__ import annotations

from typing import Any

import re2

from agent.config.clientsources import Leaf, get
from agent.config.model import EventFilter

_WHERE = Leaf(None, "filters", "filters", None)


def read_filters(tree: Any) -> tuple[EventFilter, ...]:
    """The filters of the merged `filters` tree (a list; `{}` when none was given)."""
    if isinstance(tree, dict) and not tree:
        return ()
    if not isinstance(tree, list):
        raise _first(tree).error("expected a list like [{type: exact, match: job_name}]")
    found = []
    for item in tree:
        if not isinstance(item, dict):
            raise _first(item).error("expected a mapping like {type: regex, regex: 'tmp_.*'}")
        kind = get(item, "type")
        name = str(kind.value).strip().lower() if isinstance(kind, Leaf) else ""
        if name not in ("exact", "regex"):
            where = kind if isinstance(kind, Leaf) else _first(item)
            raise where.error("a filter's type is exact (with match) or regex (with regex)")
        value = get(item, "match" if name == "exact" else "regex")
        if not isinstance(value, Leaf) or not isinstance(value.value, str) or not value.value:
            key = "match" if name == "exact" else "regex"
            raise (kind if isinstance(kind, Leaf) else _WHERE).error(f"a {name} filter needs {key}")
        if name == "regex":
            try:
                re2.compile(value.value)
            except re2.error as error:
                why = error.args[0] if error.args else ""
                shown = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
                raise value.error(f"not a pattern RE2 reads: {shown}") from None
        found.append(EventFilter(name, value.value))  # type: ignore[arg-type]
    return tuple(found)


def read_tags(tree: Any) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(job tags, run tags) of the merged `tags` tree, in the order written."""
    if not isinstance(tree, dict):
        raise _first(tree).error("expected a mapping like {job: {team: data}, run: {}}")
    read: dict[str, tuple[tuple[str, str], ...]] = {"job": (), "run": ()}
    for section, value in tree.items():
        if section.lower() not in read:
            raise _first(value).error("tags holds job and run only")
        if not isinstance(value, dict):
            raise _first(value).error("expected a mapping of tag names to values")
        pairs = []
        for key, leaf in value.items():
            if not isinstance(leaf, Leaf) or leaf.value is None or isinstance(leaf.value, bool):
                raise _first(leaf).error("expected a text value")
            pairs.append((key, str(leaf.value)))
        read[section.lower()] = tuple(pairs)
    return read["job"], read["run"]


def _first(value: Any) -> Leaf:
    if isinstance(value, Leaf):
        return value
    children = list(value.values()) if isinstance(value, dict) else list(value or ())
    return _first(children[0]) if children else _WHERE
