"""Identity of what this agent emits: producer URI and the URLs of our facet schemas."""

from __future__ import annotations

from typing import Final

from agent import __version__

PRODUCER: Final = f"https://github.com/edge-lineage/lineage-agent/tree/v{__version__}"
SCHEMA_BASE: Final = "https://github.com/edge-lineage/lineage-agent/blob/main/agent/schemas/"
SIGNATURE_SCHEMA_URL: Final = SCHEMA_BASE + "lineageAgent_signature.json#/$defs/SignatureRunFacet"
RUN_SCHEMA_URL: Final = SCHEMA_BASE + "lineageAgent_run.json#/$defs/RunCountersRunFacet"
OPENLINEAGE_SCHEMA_URL: Final = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
