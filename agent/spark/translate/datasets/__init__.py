"""Datasets and their names: a run's OpenLineage datasets and their facets (`rundatasets`,
`columnfacet`, `schemas`, `untyped`), what names them beyond the plan (`places`, `jdbc`,
`brokers`, a MERGE's lineage in `merges`), a streaming query's sources and sink
(`streaming`, `descriptions`) and the seam to tables' metadata on disk (`versions`).
Imports `agent.spark.plan` and the shared modules at `translate`'s top (`model`, `naming`,
`values`) only."""
