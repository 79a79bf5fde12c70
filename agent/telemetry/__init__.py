"""What every stage reports through: metrics on an injected registry, per-application health,
and structured logs. It imports nothing else of the agent, so any layer may use it."""
