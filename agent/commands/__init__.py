"""The command line: argument parsing and each command (run, exec, replay, verify, config
check, keygen, status, describe, job stop); the only layer that picks exit codes."""
