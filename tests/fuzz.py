"""How many examples a Hypothesis fuzzer tries: a smoke of each in the suite, its full count
with the soak run.

The suite runs every fuzzer, each on a tenth of its examples (never fewer than 20): enough
to catch what breaks every input of a shape, in seconds. `LINEAGE_FUZZ=full` gives each its
full count, for the soak run and for a change to what a fuzzer covers:

    LINEAGE_FUZZ=full ./run test -m "soak or not soak" tests/test_canonical.py
"""

from __future__ import annotations

import os

FULL = os.environ.get("LINEAGE_FUZZ") == "full"
SMOKE_SHARE = 10  # the suite's share of each fuzzer's full count: one in ten
SMOKE_LEAST = 20


def examples(full: int) -> int:
    """`max_examples` of a fuzzer whose full count is `full`."""
    return full if FULL else min(full, max(SMOKE_LEAST, full // SMOKE_SHARE))
