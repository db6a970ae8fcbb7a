"""A typo in opsbot.toml never takes the executor's socket down: the daemon still starts,
answers every message with REJECT naming the file and the line, takes no plan, and
exits once the file is fixed (or when idle), so the socket starts one that reads it."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared_schema import ListPlans, Reject, encode_message
from testbed.inproc import (
    CONFIG_TOML,
    REPO,
    daemon_environment,
    one_reply,
    plan,
    submit_bytes,
    wait_listening,
)

TYPO = CONFIG_TOML + "[diagnose]\nmax_steps = = 6\n"
#: The line the typo is on, as the error names it.
LINE = f"line {TYPO.splitlines().index('max_steps = = 6') + 1},"


class Daemon:
    """``python -m executor_svc.daemon --socket ...`` started on a config of the test's."""

    def __init__(self, tmp: Path, idle_timeout: str = "0") -> None:
        self.config = tmp / "opsbot.toml"
        self.state = tmp / "state"
        self.socket = str(tmp / "executor.sock")
        self.log = tmp / "daemon.log"
        self.idle_timeout = idle_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "executor_svc.daemon", "--socket", self.socket]
                + ["--idle-timeout", self.idle_timeout],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=daemon_environment(self.state, self.config),
                cwd=REPO,
            )
        wait_listening(self.socket, self.proc)
        return self.proc

    def logged(self, event: str) -> int:
        return sum(event in line.split() for line in self.log.read_text().splitlines())


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    running = Daemon(tmp_path)
    running.config.write_text(TYPO)
    yield running
    if running.proc is not None and running.proc.poll() is None:
        running.proc.terminate()
        running.proc.wait(timeout=20)


def test_a_typo_is_answered_on_every_request_and_no_plan_is_taken(daemon: Daemon) -> None:
    """With ``max_steps = = 6`` in the file, the executor still listens; a listing and a
    plan submitted, on two connections one after the other, each get one REJECT naming
    the file and the typo's line; nothing is stored (the state directory is not even made), and
    the error is logged once, at start."""
    proc = daemon.start()
    replies = [
        one_reply(daemon.socket, encode_message(ListPlans())),
        one_reply(daemon.socket, submit_bytes(plan("bring demo-web back"))),
    ]
    for reply in replies:
        assert isinstance(reply, Reject)
        assert reply.reason.startswith(f"invalid configuration: {daemon.config}: not valid TOML")
        assert LINE in reply.reason
    assert proc.poll() is None, "the executor exited"
    assert not daemon.state.exists()
    assert daemon.logged("config.invalid") == 1


def test_once_the_config_is_fixed_it_says_try_again_and_exits_cleanly(daemon: Daemon) -> None:
    """After the file is fixed, the next request is told to try again and the daemon
    exits 0 (not a failure systemd would count), so the socket starts one that reads
    the fixed file."""
    proc = daemon.start()
    assert isinstance(one_reply(daemon.socket, encode_message(ListPlans())), Reject)
    daemon.config.write_text(CONFIG_TOML)
    reply = one_reply(daemon.socket, encode_message(ListPlans()))
    assert isinstance(reply, Reject)
    assert reply.reason == f"{daemon.config} was fixed since the executor started; try again"
    assert proc.wait(timeout=20) == 0


def test_with_a_broken_config_it_still_exits_when_idle(tmp_path: Path) -> None:
    """Like the normal server, the broken-config one exits 0 after ``--idle-timeout``
    seconds without a connection (the next start reads the file again)."""
    daemon = Daemon(tmp_path, idle_timeout="0.5")
    daemon.config.write_text(TYPO)
    proc = daemon.start()
    assert proc.wait(timeout=30) == 0
    assert daemon.logged("server.idle_exit") == 1
