"""Runs and their lifecycle: one START, RUNNING at the interval, one terminal event
(`lifecycle`) for every SQL statement (`statements`, `steps`, `executions`), streaming query
(`queries`) and RDD job (`jobs`); which runs a stage's metrics count toward (`charges`);
deterministic run ids (`runids`). Imports the rest of `translate` and `agent.spark.plan`."""
