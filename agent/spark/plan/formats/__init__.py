"""Lakehouse tables and Kafka in a plan, as the plan names them: Delta's statements, table
commands and writes (`delta`), Iceberg's writes, scans and row-level statements (`iceberg`),
table DDL of any catalog (`ddl`) and Kafka reads and saves (`kafka`). Imports
`plan.datasets`, `plan.attributes` and `plan.syntax` only."""
