"""Names as Spark prints them: catalog table identifiers, and plan-node and application names
snake-cased the way the OpenLineage integration does."""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass


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


@functools.lru_cache(maxsize=4096)  # the same few command and application names, per event
def normalize(text: str) -> str:
    """Snake-case a Spark application or plan-node name, as the OpenLineage integration does.

    Non-word characters at both ends go, accents are stripped, camelCase and acronym
    boundaries become word breaks, and every run of other characters becomes one `_`.
    """
    trimmed = re.sub(r"[^\w]+$", "", re.sub(r"^[^\w]+", "", text, flags=re.ASCII), flags=re.ASCII)
    decomposed = unicodedata.normalize("NFKD", trimmed)
    plain = "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M"))
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", plain)
    words = re.sub(r"(?<!^)([A-Z])([a-z])", r" \1\2", words)
    words = re.sub(r"(\d)([A-Z])", r"\1 \2", words)
    return re.sub(r"[^a-zA-Z0-9]+", "_", words.lower())


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
