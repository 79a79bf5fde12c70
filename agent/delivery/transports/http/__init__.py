"""The HTTP transport, one module per concern: `settings` (the endpoint, header, token and TLS
rules, also run by preflight), `proxy` (the proxy variables), `wire` (one HTTP/1.1 connection's
framing over asyncio streams), `pool` (opening and keeping connections), `policy` (what a
failure or an answer means for the batch) and `transport` (the `Transport` itself).

Imports `agent.config`, `agent.errors` and one another, in that order: settings and proxy
know nothing of the rest, wire nothing of the pool, the pool nothing of the policy."""
