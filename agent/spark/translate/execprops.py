"""The Spark properties `lineage-agent exec` sets on the applications it starts, which the
translator reads back from their logs: a module of names alone, so that `exec`, run before
every Spark program it wraps, starts without loading the translator."""

from __future__ import annotations

from typing import Final

EXEC: Final = "spark.lineageAgent.exec"  # the exec's id: its verdict ends the application
PARENT: Final = "spark.lineageAgent.parent"  # the parent run, as OPENLINEAGE_PARENT_ID says
ROOT_PARENT: Final = "spark.lineageAgent.rootParent"  # and the root, OPENLINEAGE_ROOT_PARENT_ID
