"""Tables' own metadata, read from disk: `metadata.DiskTableMetadata` answers the translator's
`TableMetadata` seam (committed Delta versions and Iceberg snapshots, whether a table is
there, its schema) and `parquet` reads the schema Spark wrote into a parquet footer. Below
them, metadata files read in bounded memory, each version of a file once: Delta commits,
Iceberg metadata files, as a stream of JSON events (`jsonstream`) of which only what the
answers need is kept (`delta`, `iceberg`, `fields`), cached per file version (`filecache`).
Imports nothing else from the Spark side but plan analysis (its schema fields and the table
formats)."""
