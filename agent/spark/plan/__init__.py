"""Plan analysis, pure: a SQL execution's plan JSON and text -> the datasets it reads and writes
and the column lineage of its writes. Imports nothing else from the Spark side.

Four folders, each importing only those below it: `touched` (what an execution reads and
writes; `touched.read.read_plan` is the entry point) > `formats` (Delta, Iceberg, Kafka) >
`datasets` (the `DatasetRef` every folder above hands on) > `attributes` (where each
attribute comes from: the operator walk, column lineage, types) > `syntax` (how Spark prints
plans, expressions, types and names)."""
