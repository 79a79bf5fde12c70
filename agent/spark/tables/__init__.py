"""Tables' own metadata files read in bounded memory, each version of a file once: Delta
commits, Iceberg metadata files, as a stream of JSON events (`jsonstream`) of which only what
the answers need is kept (`delta`, `iceberg`, `fields`), cached per file version
(`filecache`). `spark.tablemeta` asks them; they import nothing else from the Spark side but
the schema fields of plan analysis."""
