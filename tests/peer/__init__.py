"""Side by side with the OpenLineage Spark listener: `./run peer` (see `__main__.py`)."""
