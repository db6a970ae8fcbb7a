"""Start the executor daemon many times fast, to kill it many times.

    python tests/attacks/zygote.py SOCKET

imports ``executor_svc.daemon`` once, then reads commands on stdin, one a line:

* ``spawn``: fork; the child runs ``executor_svc.daemon.main(["--socket", SOCKET,
  "--idle-timeout", "0"])``, the daemon program itself, with the environment this
  process was given (OPSBOT_STATE_DIR, OPSBOT_CONFIG, ...). Answers the child's pid.
* ``kill PID``: SIGKILL it and reap it. Answers ``killed PID``.

Forking a warm interpreter costs milliseconds where starting Python and importing
pydantic costs most of a second: this is what lets a test kill the daemon hundreds of
times. Single-threaded, so fork is safe.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    socket_path = sys.argv[1]
    from executor_svc import daemon

    for command in sys.stdin:
        words = command.split()
        if words == ["spawn"]:
            pid = os.fork()
            if pid == 0:
                os.setpgid(0, 0)
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)  # the commands are the zygote's, not the daemon's
                os.dup2(2, 1)
                status = 1
                try:
                    status = daemon.main(["--socket", socket_path, "--idle-timeout", "0"])
                finally:
                    os._exit(status)
            print(pid, flush=True)
        elif len(words) == 2 and words[0] == "kill":
            pid = int(words[1])
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            print(f"killed {pid}", flush=True)
        else:
            print(f"unknown command {command!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
