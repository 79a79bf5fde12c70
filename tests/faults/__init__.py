"""Delivery fault scenarios against a real Marquez (`./run marquez`, issue 35): Marquez's
database restarted or paused, Marquez killed, the agent restarted while Marquez is down. The
runner drives the real agent as a child process and Marquez and its database through shell
commands, so the same scenarios run against a local build or the repository's
docker-compose.marquez.yaml. See docs/operations/marquez.md."""
