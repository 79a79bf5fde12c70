"""Where Spark cut a list it printed: marks that stand for items left out, never names.

A scan's `Location` lists its root paths, cut in three ways: the plan description keeps the
first and counts the others (`InMemoryFileIndex [file:/in/f0.json, ... 2 entries]`);
`sparkPlanInfo`'s metadata appends paths up to `spark.sql.maxMetadataStringLength` characters
and marks the rest `...`; `simpleString` abbreviates the whole value, so its last path may
end in `...`. Lists cut at `spark.sql.debug.maxToStringFields` end in `... N more fields`.
"""

from __future__ import annotations


def cut(item: str) -> bool:
    """Whether a printed list item is Spark's mark of a cut (`...`, `... 2 entries`,
    `... 476 more fields`) or an item it cut short (`file:/data/lo...`)."""
    text = item.strip()
    return text.startswith("...") or text.endswith("...")
