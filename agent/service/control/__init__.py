"""The control socket: the server behind status, describe, job stop and exec, its path binding,
and the one-request client the commands use."""
