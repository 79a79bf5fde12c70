"""The Kafka transport: `settings` (the producer's librdkafka settings, at-most-once forced),
`outcomes` (what a librdkafka error means for a record), `keys` (the client's record key)
and `transport` (the `Transport` that produces records and awaits their reports). Only
`transport` imports confluent-kafka's producer; the factory loads it when a kafka transport
is configured.

Imports `agent.config`, `agent.delivery.envelope`, `agent.errors` and one another."""
