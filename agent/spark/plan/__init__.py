"""Plan analysis, pure: a SQL execution's plan JSON and text -> the datasets it reads and writes
and the column lineage of its writes. Imports nothing else from the Spark side."""
