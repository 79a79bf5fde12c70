"""lineage-agent: OpenLineage lineage for Spark, from outside the JVM."""

__version__ = "0.1.0"
