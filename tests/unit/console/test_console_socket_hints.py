"""When no daemon answers on a socket, the console's hint says what to look at
(``systemctl status``, and ``reset-failed`` for a socket systemd gave up on) and, when
the console can read the config and it is invalid, names that cause first."""

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from opsbot_cli.main import main
from opsbot_cli.say import unfold

TYPO = '[executor.allow]\nrestart_unit = ["nginx.service"]\n[diagnose]\nmax_steps = = 6\n'


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The console's paths in tmp_path, no daemon listening; returns the config's path."""
    path = tmp_path / "opsbot.toml"
    path.write_text('[executor.allow]\nrestart_unit = ["nginx.service"]\n')
    monkeypatch.setenv("OPSBOT_CONFIG", str(path))
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("OPSBOT_SOCKET", str(tmp_path / "executor.sock"))
    monkeypatch.setenv("OPSBOT_DIAGNOSE_SOCKET", str(tmp_path / "diagnose.sock"))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    return path


@pytest.fixture
def refusing(tmp_path: Path) -> Iterator[None]:
    """A socket file at the executor's path that nobody listens on (what a socket unit
    systemd stopped after start-limit-hit can leave): connecting is refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(tmp_path / "executor.sock"))
        yield


def hint_of(err: str) -> str:
    """The hint line, with the lines it was folded onto (to fit 100 columns) joined back."""
    lines = err.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith("opsbot: hint: ")]
    rest = [line.strip() for line in lines[start + 1 :] if line.startswith(" " * 8)]
    return " ".join([lines[start], *rest])


def test_a_missing_socket_with_a_broken_config_names_the_config_first(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``opsbot plans`` with no executor socket and a typo in the config: one error line
    (no socket), and a hint naming the file and line of the typo, then what to run."""
    config.write_text(TYPO)
    assert main(["plans"]) == 1
    err = capsys.readouterr().err
    assert f"opsbot: error: no socket at {config.parent}/executor.sock" in unfold(err)
    hint = hint_of(err)
    assert f"the config is invalid: {config}: not valid TOML: " in hint
    assert "line 4," in hint
    assert "`systemctl status opsbot-executor.socket opsbot-executor.service`" in hint
    assert "`systemctl reset-failed opsbot-executor.socket opsbot-executor.service`" in hint


@pytest.mark.usefixtures("refusing")
def test_a_refused_socket_says_status_and_reset_failed(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a valid config and a socket nobody listens on, the hint says how to see why
    (``systemctl status``) and how to bring it back (``reset-failed``, ``start``), and
    blames no config."""
    assert main(["plans"]) == 1
    hint = hint_of(capsys.readouterr().err)
    assert hint == (
        "opsbot: hint: `systemctl status opsbot-executor.socket opsbot-executor.service`; "
        "if failed (start-limit-hit): `systemctl reset-failed opsbot-executor.socket "
        "opsbot-executor.service` then `systemctl start opsbot-executor.socket`"
    )


def test_the_diagnose_socket_hint_names_its_own_units(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``opsbot diagnose`` with no diagnose socket names opsbot-diagnose's units."""
    config.write_text(TYPO)
    assert main(["diagnose", "nginx.service"]) == 1
    hint = hint_of(capsys.readouterr().err)
    assert "is opsbot-diagnose.socket enabled?" in hint
    assert "`systemctl reset-failed opsbot-diagnose.socket opsbot-diagnose.service`" in hint
    assert f"the config is invalid: {config}" in hint
