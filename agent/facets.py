"""Identity of what this agent emits: its producer URI, and every facet's schema URL, in one place.

Standard facets name the spec's schema file (`$id`) and the facet's `$defs` entry; ours
(`lineageAgent_*`) name the JSON schemas shipped in `agent/schemas/`.
"""

from __future__ import annotations

from typing import Any, Final

from agent import __version__

PRODUCER: Final = f"https://github.com/edge-lineage/lineage-agent/tree/v{__version__}"
SCHEMA_BASE: Final = "https://github.com/edge-lineage/lineage-agent/blob/main/agent/schemas/"
OPENLINEAGE_SCHEMA_URL: Final = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
_OL: Final = "https://openlineage.io/spec/facets/"


def _standard(version: str, name: str) -> str:
    return f"{_OL}{version}/{name}.json#/$defs/{name}"


#: Facet key -> the `_schemaURL` it carries.
FACET_URLS: Final[dict[str, str]] = {
    # run and job facets
    "processing_engine": _standard("1-1-1", "ProcessingEngineRunFacet"),
    "parent": _standard("1-2-0", "ParentRunFacet"),
    "errorMessage": _standard("1-0-1", "ErrorMessageRunFacet"),
    "jobType": _standard("2-0-4", "JobTypeJobFacet"),
    "sql": _standard("1-1-0", "SQLJobFacet"),
    "tags": _standard("1-0-0", "TagsJobFacet"),
    "tags_run": _standard("1-0-0", "TagsRunFacet"),  # the run facet `tags`
    # dataset facets
    "schema": _standard("1-2-0", "SchemaDatasetFacet"),
    "dataSource": _standard("1-0-1", "DatasourceDatasetFacet"),
    "symlinks": _standard("1-0-1", "SymlinksDatasetFacet"),
    "lifecycleStateChange": _standard("1-0-1", "LifecycleStateChangeDatasetFacet"),
    "inputStatistics": _standard("1-0-0", "InputStatisticsInputDatasetFacet"),
    "outputStatistics": _standard("1-0-2", "OutputStatisticsOutputDatasetFacet"),
    "columnLineage": _standard("1-2-0", "ColumnLineageDatasetFacet"),
    "version": _standard("1-0-1", "DatasetVersionDatasetFacet"),
    # ours
    "lineageAgent_run": SCHEMA_BASE + "lineageAgent_run.json#/$defs/RunCountersRunFacet",
    "lineageAgent_stream": SCHEMA_BASE + "lineageAgent_stream.json#/$defs/StreamingQueryRunFacet",
    "lineageAgent_signature": SCHEMA_BASE + "lineageAgent_signature.json#/$defs/SignatureRunFacet",
    "lineageAgent_application": SCHEMA_BASE
    + "lineageAgent_application.json#/$defs/ApplicationDetailsRunFacet",
    "lineageAgent_sparkProperties": SCHEMA_BASE
    + "lineageAgent_sparkProperties.json#/$defs/SparkPropertiesRunFacet",
    "lineageAgent_truncation": SCHEMA_BASE
    + "lineageAgent_truncation.json#/$defs/TruncationDatasetFacet",
    "lineageAgent_topicPattern": SCHEMA_BASE
    + "lineageAgent_topicPattern.json#/$defs/TopicPatternDatasetFacet",
    "lineageAgent_unnamedDatasets": SCHEMA_BASE
    + "lineageAgent_unnamedDatasets.json#/$defs/UnnamedDatasetsRunFacet",
    "lineageAgent_pathList": SCHEMA_BASE + "lineageAgent_pathList.json#/$defs/PathListDatasetFacet",
}


def facet(key: str, **fields: Any) -> dict[str, Any]:
    """A facet with our producer and its schema URL, then `fields` in the order given."""
    return {"_producer": PRODUCER, "_schemaURL": FACET_URLS[key], **fields}
