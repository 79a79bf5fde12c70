"""What reading one plan hands to each node it looks at: the plan description's operator
blocks (what a `sparkPlanInfo` node leaves out), the types they give attributes, and the notes
gathered on what could not be read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.syntax.text import Block


@dataclass(frozen=True, slots=True)
class Reading:
    """One plan being read; `notes` grows as its nodes are read."""

    described: Sequence[Block]
    types: Mapping[int, Field]  # expression id -> the type the description gives it
    notes: list[str]
