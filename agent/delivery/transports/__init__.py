"""The transports behind the queues: the Protocol, the factory that builds the configured kinds,
and one module per kind (HTTP, JSON-lines files)."""
