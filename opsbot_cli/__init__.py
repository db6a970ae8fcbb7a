"""opsbot's operator console: the ``opsbot`` command, one module per command.

    main          the parser, and the one handler that turns errors into a line and a status
    plans, show   what the executor stores (over its socket, as an operator)
    approve, reject, apply, watch, polkit_rule   root's decisions (executor_svc does them)
    diagnose      ask the diagnosis service (over its socket), steps shown live
    audit         a plan's story from the journal, trusted entries only (story.py)
    check_config  the config and the privilege mode
    clients       the console's side of both sockets
    output        how things are printed: text for people, --json for scripts

The console decides nothing: whether a plan may run is plans.gate's; what a
diagnosis concludes is the diagnosis service's. Hidden from the diagnose unit, like the
executor.
"""
