"""opsbot's executor half: the only code that changes the host.

It takes plans over a Unix socket, validates them again, stores them, and runs a plan
only when a root-owned approval bound to that plan's fingerprint is present and fresh.
It runs argv lists, never a shell.
"""
