"""The runtime that follows Spark applications over time: the source loop (`source`, with the
pass over each application in `pumping` and the control socket's answers in `control`), each
followed log (`application`, `followed`), the event-log directories, claims and leases in the
state database, problems, stale drivers (`liveness`, `driver/`) and the verdicts of `exec`.
The only Spark-side folder that may import all the others, and the daemon side's state,
telemetry and config."""
