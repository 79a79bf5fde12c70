"""The Spark side, one folder per stage: `eventlog` reads event logs, `plan` analyses plans
(pure), `translate` turns listener events into RunEvents (pure), `tables` reads tables' own
metadata files, and `follow` is the runtime that follows applications over time and wires
the others (the source loop, claims, leases, liveness, verdicts, job stop)."""
