"""A typo in opsbot.toml never takes the diagnose socket down: ``opsbot-diagnose serve``
still starts and answers every request with one ``diagnose.error`` naming the file and
the line (and the config hint); it runs no diagnosis, and exits once the file is fixed
(or when idle), so the socket starts one that reads it."""

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from shared_io.config import HINT
from shared_schema import decode_json_object, encode_message
from shared_schema.diagnose_socket import STREAM_ITEM, DiagnoseRequest, ErrorMessage
from testbed.inproc import CONFIG_TOML, REPO, daemon_environment, exchange, wait_listening

TYPO = CONFIG_TOML + "[diagnose]\nmax_steps = = 6\n"
#: The line the typo is on, as the error names it.
LINE = f"line {TYPO.splitlines().index('max_steps = = 6') + 1},"
REQUEST = encode_message(DiagnoseRequest(unit="demo-web.service", symptom="it is down"))


@dataclass
class Serving:
    proc: subprocess.Popen[bytes]
    config: Path
    listen: str
    log: Path
    #: Where the daemon would submit a plan: a socket of the test's, never connected to.
    executor: socket.socket

    def ask(self) -> list[ErrorMessage]:
        """One request; every line of the answer (an ErrorMessage is expected)."""
        items = [
            STREAM_ITEM.validate_python(decode_json_object(line))
            for line in exchange(self.listen, REQUEST)
        ]
        assert all(isinstance(item, ErrorMessage) for item in items), items
        return [item for item in items if isinstance(item, ErrorMessage)]

    def logged(self, event: str) -> int:
        return sum(event in line.split() for line in self.log.read_text().splitlines())

    def executor_was_contacted(self) -> bool:
        self.executor.setblocking(False)
        try:
            self.executor.accept()[0].close()
        except BlockingIOError:
            return False
        return True


def start(tmp: Path, idle_timeout: str = "0") -> Serving:
    config = tmp / "opsbot.toml"
    config.write_text(TYPO)
    executor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    executor.bind(str(tmp / "executor.sock"))
    executor.listen(4)
    listen = str(tmp / "diagnose.sock")
    log = tmp / "daemon.log"
    argv = [sys.executable, "-m", "diagnose_svc.daemon", "serve", "--config", str(config)]
    argv += ["--listen", listen, "--socket", str(tmp / "executor.sock")]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*argv, "--idle-timeout", idle_timeout],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=daemon_environment(tmp / "state", config),
            cwd=REPO,
        )
    wait_listening(listen, proc)
    return Serving(proc, config, listen, log, executor)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Serving]:
    running = start(tmp_path)
    yield running
    if running.proc.poll() is None:
        running.proc.terminate()
        running.proc.wait(timeout=20)
    running.executor.close()


def test_a_typo_is_answered_on_every_request_and_nothing_is_diagnosed(serving: Serving) -> None:
    """Two requests in a row each get exactly one diagnose.error naming the file and the
    typo's line, with the config hint; the service is still up, started no diagnosis
    (nothing logged, the executor never contacted), and logged the error once."""
    for _ in range(2):
        [error] = serving.ask()
        assert error.message.startswith(f"invalid configuration: {serving.config}: not valid")
        assert LINE in error.message
        assert error.hint == HINT
    assert serving.proc.poll() is None, "the diagnosis service exited"
    assert serving.logged("diagnose.requested") == 0
    assert not serving.executor_was_contacted()
    assert serving.logged("config.invalid") == 1


def test_once_the_config_is_fixed_it_says_try_again_and_exits_cleanly(serving: Serving) -> None:
    """After the file is fixed, the next request is told to try again and the service
    exits 0, so the socket starts one that reads the fixed file."""
    serving.ask()
    serving.config.write_text(CONFIG_TOML)
    [error] = serving.ask()
    assert error.message == "the configuration was fixed since the diagnosis service started"
    assert error.hint == "try again"
    assert serving.proc.wait(timeout=30) == 0


def test_with_a_broken_config_it_still_exits_when_idle(tmp_path: Path) -> None:
    """Like the normal service, it exits 0 after ``--idle-timeout`` idle seconds."""
    running = start(tmp_path, idle_timeout="0.5")
    try:
        assert running.proc.wait(timeout=30) == 0
    finally:
        running.executor.close()
    assert running.logged("server.idle_exit") == 1
