"""What the agent remembers across restarts: log positions, emitted runs, stop requests,
verdicts and the delivery ledger, in a SQLite database in the state directory."""
