"""opsbot's demo: the main job, end to end, as an operator sees it, in a throw-away
systemd (``sudo scripts/demo``, which runs ``python -m demo``). Built on testbed."""
