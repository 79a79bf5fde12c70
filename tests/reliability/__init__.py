"""Reliability and security suite: faults injected for real, exact accounting at the end."""
