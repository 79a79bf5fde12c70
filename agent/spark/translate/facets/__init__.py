"""The RunEvent and its run and job facets: the event body (`events`), the application's
facets (`appfacets`) and what `lineage-agent exec` tells, its verdict (`verdict`). Imports
`translate.datasets`, the shared modules at `translate`'s top and `agent.spark.plan`; never
`translate.runs` or `translate.options`."""
