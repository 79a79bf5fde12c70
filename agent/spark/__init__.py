"""The Spark side: event logs read (eventlog), plans analysed (plan, pure), listener events
translated to RunEvents (translate, pure), wired by the source with liveness, claims, job stop."""
