"""From RunEvent to collector: canonical bytes, signatures (and their verification), the
pipeline with its drop policy, bounded queues and the transports. Knows nothing of Spark."""
