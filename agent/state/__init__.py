"""What the agent remembers across restarts: log positions, emitted runs, stop requests,
verdicts and the delivery ledger, in a SQLite database in the state directory or in
PostgreSQL shared by several agents (`store` is the seam, `opening` picks one)."""
