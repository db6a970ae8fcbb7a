"""What every opsbot unit does on the host, written once: run a program, log to the
journal, frame a socket message, take a socket from systemd, read the config file.

    errors       OpsbotError (message, hint, exit status) and the errors below it
    run          the one subprocess runner: argv only, bounded in time and output
    log          structlog to journald, the same field names on every unit
    framing      newline-delimited messages on Unix sockets: size limits and deadlines
    activation   the listening socket systemd passes, and sd_notify
    server       a threaded accept loop with a bounded number of connections
    config       /etc/opsbot/opsbot.toml read into shared_schema.OpsbotConfig
    paths        where things live, each movable by an environment variable

No write tool and no policy lives here: the diagnosis half imports this package too.
Nothing is re-exported here, so that importing one module imports only what it needs.
"""
