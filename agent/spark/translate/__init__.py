"""Translation, pure: SparkListener events of one application -> OpenLineage RunEvents, named
and faceted the OpenLineage way. Imports `agent.spark.plan` only from the Spark side.

`translator.ApplicationTranslator` is the entry point. Three folders, each importing only
those below it: `runs` (runs and their lifecycle: statements, queries, jobs, executions) >
`facets` (the RunEvent body and its run and job facets, `exec`'s verdict) > `datasets`
(datasets, their names and facets). Beside them at the top: `options` (between `runs` and
`facets`), and the pieces all folders share: the model of runs (`model`), dataset and job
naming (`naming`), typed reads of untrusted JSON (`values`), the fields each event needs
(`required`) and the raw-line pre-filter (`listener`)."""
