"""What the event log generators of tests/data share: one log line made compact, its
environment event trimmed to the Spark properties a generator keeps.

The generators run as scripts and put the repository first on `sys.path` to import this
module; it imports only the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Collection

#: The Spark properties of the environment event every generator keeps.
KEPT_PROPERTIES = frozenset(
    {
        "spark.app.name",
        "spark.app.id",
        "spark.master",
        "spark.sql.warehouse.dir",
        "spark.sql.catalogImplementation",
    }
)


def trimmed(raw: str, kept: Collection[str]) -> str:
    """`raw` (one JSON event) as compact JSON; an environment update keeps only its Spark
    properties named in `kept`."""
    event = json.loads(raw)
    if event.get("Event") == "SparkListenerEnvironmentUpdate":
        props = event.get("Spark Properties", {})
        event = {
            "Event": event["Event"],
            "Spark Properties": {k: v for k, v in props.items() if k in kept},
        }
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)
