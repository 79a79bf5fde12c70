"""Lakehouse tables and Kafka in a plan: Delta and Iceberg statements, scans and DDL
(`lakehouse`), Kafka reads and saves (`kafka`), as the plan names them. Imports
`plan.datasets`, `plan.attributes` and `plan.syntax` only."""
