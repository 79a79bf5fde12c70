"""The daemon: startup, run, drain and shutdown; SIGHUP reloads, startup checks, the control
socket and sd_notify. Only the command layer imports it."""
