"""Translation, pure: SparkListener events of one application -> OpenLineage RunEvents, named
and faceted the OpenLineage way. Imports `agent.spark.plan` only from the Spark side."""
