"""Names as Spark prints them: catalog table identifiers, and plan-node and application names
snake-cased the way the OpenLineage integration does."""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

from agent import linear


@dataclass(frozen=True, slots=True)
class TableIdent:
    """A catalog table as Spark prints it: `catalog`.`database`.`table` (catalog optional)."""

    table: str
    database: str | None = None
    catalog: str | None = None

    @property
    def qualified(self) -> str:
        """`database.table` (or `table`): the symlink name the integration uses."""
        return f"{self.database}.{self.table}" if self.database else self.table


#: ASCII classes: names become ASCII snake case.
_LEADING = linear.compile(r"^[^A-Za-z0-9_]+")
_TRAILING = linear.compile(r"[^A-Za-z0-9_]+$")
_CAMEL = linear.compile(r"([a-z])([A-Z])")
_ACRONYM_END = linear.compile(r"([A-Z])([a-z])")
_DIGIT_WORD = linear.compile(r"(\d)([A-Z])")
_OTHERS = linear.compile(r"[^a-zA-Z0-9]+")


@functools.lru_cache(maxsize=4096)  # the same few command and application names, per event
def normalize(text: str) -> str:
    """Snake-case a Spark application or plan-node name, as the OpenLineage integration does.

    Non-word characters at both ends go, accents are stripped, camelCase and acronym
    boundaries become word breaks, and every run of other characters becomes one `_`.
    """
    trimmed = _TRAILING.sub("", _LEADING.sub("", text))
    decomposed = unicodedata.normalize("NFKD", trimmed)
    plain = "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M"))
    words = _CAMEL.sub(r"\1 \2", plain)
    words = words[:1] + _ACRONYM_END.sub(r" \1\2", words[1:])  # not before the first letter
    words = _DIGIT_WORD.sub(r"\1 \2", words)
    return _OTHERS.sub("_", words.lower())


def parse_table_ident(text: str) -> TableIdent | None:
    """Parse `` `spark_catalog`.`db`.`t` ``, ``db.t`` or ``t``; None if it is not one."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    text = text.strip()
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1 : i + 2] == "`":  # escaped backtick inside a quoted part
                current.append("`")
                i += 1
            else:
                quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(current))
            current = []
        elif not quoted and not (ch.isalnum() or ch in "_$-"):
            return None
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    if quoted or not 1 <= len(parts) <= 3 or not all(parts):
        return None
    if len(parts) == 3:
        return TableIdent(parts[2], parts[1], parts[0])
    if len(parts) == 2:
        return TableIdent(parts[1], parts[0])
    return TableIdent(parts[0])


def default_table_location(warehouse: str, table: TableIdent) -> str:
    """Where the session catalog puts a managed table: `wh/t` or `wh/db.db/t`."""
    root = warehouse.rstrip("/")
    if table.database in (None, "default"):
        return f"{root}/{table.table}"
    return f"{root}/{table.database}.db/{table.table}"
