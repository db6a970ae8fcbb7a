"""opsbot's test bench: real hosts to try opsbot on, and what stands in for the world.

    container        a real systemd booted in a throw-away systemd-nspawn container
    host             opsbot installed in one, and the verbs to talk to it
    stack            the scenario stack (a proxy, an app, a db) installed in one
    faults           one injector per fault scenario, with the operator's expected answer
    observe          reading a container's state as an operator would (units, HTTP)
    scripted_openai  a local OpenAI-compatible server that replays a script
    inproc           real executors on real sockets in this process, for fast attacks
    wire_attacks     hostile messages for the executor socket (fuzzing, attack tests)
    skips            when a test may skip, and when (under CI) it must fail instead
    inside/          scripts run inside a container (stdlib and opsbot only)

Tests, benchmarks, the demo and the fuzzer import this package; it imports nothing from
tests. Typed and linted like the product.
"""
