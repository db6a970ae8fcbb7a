"""``opsbot approvers add NAME`` and ``list``, as root on a terminal would run them: the
secret lands root's alone (0700 directory, 0600 file), the provisioning URI and QR code
carry exactly that secret, an existing one is replaced only when asked, and every
refusal is one line with the documented exit status."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import pyotp
import pytest

from approver_svc.totp import read_secret
from opsbot_cli.main import main
from opsbot_cli.say import unfold
from shared_io.exit_codes import ERROR, OK, USAGE
from testbed.skips import skip_unless

CONFIG = """
[notify.channels.ops]
kind = "slack"

[approvers.alice]
notify = ["ops"]

[approvers.bob]
"""


@pytest.fixture
def totp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    skip_unless(os.geteuid() == 0, "approvers add is root's; run the tests as root")
    config = tmp_path / "opsbot.toml"
    config.write_text(CONFIG)
    config.chmod(0o644)
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))
    monkeypatch.setenv("OPSBOT_TOTP_DIR", str(tmp_path / "totp"))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    return tmp_path / "totp"


def secret_of(uri: str) -> str:
    query = urllib.parse.parse_qs(urllib.parse.urlparse(uri).query)
    return query["secret"][0]


def test_add_writes_a_root_only_secret_and_prints_the_uri_for_it(
    totp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The directory is made 0700, the file 0600, both root's; the printed otpauth URI
    (issuer opsbot, account alice@host) carries the very secret in the file, and the
    approver reads it as the credential totp_alice and accepts its code."""
    assert main(["approvers", "add", "alice"]) == OK
    out = capsys.readouterr().out
    path = totp_dir / "alice"
    assert os.stat(totp_dir).st_mode & 0o777 == 0o700
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path).st_uid == 0
    [uri] = [line for line in out.splitlines() if line.startswith("otpauth://")]
    parsed = pyotp.parse_uri(uri)
    assert parsed.issuer == "opsbot" and parsed.name.startswith("alice@")
    assert secret_of(uri) == path.read_text().strip()
    credentials = totp_dir.parent / "credentials"
    credentials.mkdir()
    (credentials / "totp_alice").write_bytes(path.read_bytes())
    (credentials / "totp_alice").chmod(0o400)  # as systemd writes a credential
    assert read_secret(credentials, "alice").now() == pyotp.TOTP(secret_of(uri)).now()
    assert "add alice to" not in out  # alice is configured: no advice to add her


def test_add_of_an_unconfigured_approver_says_what_to_add(
    totp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """carol has no [approvers.carol]: the secret is made, and the output says the
    table to add."""
    assert main(["approvers", "add", "carol"]) == OK
    assert "  [approvers.carol]" in capsys.readouterr().out


def test_an_existing_secret_is_replaced_only_with_replace(
    totp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second add is refused (exit 2, one line and a hint, the file untouched);
    ``--replace`` writes a new secret."""
    assert main(["approvers", "add", "alice"]) == OK
    first = (totp_dir / "alice").read_text()
    capsys.readouterr()
    assert main(["approvers", "add", "alice"]) == USAGE
    err = unfold(capsys.readouterr().err)
    assert err[0].startswith("opsbot: error: approver alice has a TOTP secret already")
    assert err[1].startswith("opsbot: hint: `opsbot approvers add alice --replace`")
    assert (totp_dir / "alice").read_text() == first
    assert main(["approvers", "add", "alice", "--replace", "--json"]) == OK
    said = json.loads(capsys.readouterr().out)
    assert said["replaced"] is True and said["configured"] is True
    assert (totp_dir / "alice").read_text().strip() == secret_of(said["uri"]) != first.strip()


def test_qr_prints_a_code_off_a_terminal(
    totp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off a terminal there is no QR code unless ``--qr`` asks for one (block characters,
    two modules a character)."""
    assert main(["approvers", "add", "alice"]) == OK
    assert "█" not in capsys.readouterr().out
    assert main(["approvers", "add", "alice", "--replace", "--qr"]) == OK
    out = capsys.readouterr().out
    assert sum("█" in line or "▀" in line or "▄" in line for line in out.splitlines()) > 10


@pytest.mark.parametrize(
    "argv",
    [
        ["approvers", "add", "Alice"],
        ["approvers", "add", "../etc"],
        ["approvers", "add"],
        ["approvers", "list", "alice"],
    ],
)
def test_bad_arguments_are_one_usage_line(
    totp_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A name that could not be [approvers.NAME] (or a path), a missing or extra name:
    exit 2, no file written."""
    assert main(argv) == USAGE
    assert capsys.readouterr().err.startswith("opsbot: error: ")
    assert not totp_dir.exists() or not any(totp_dir.iterdir())


def test_a_secret_directory_others_can_read_is_refused(
    totp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/etc/opsbot/totp at 0755: no secret is written into it (exit 1), and the hint says
    how to fix its mode."""
    totp_dir.mkdir(mode=0o755)
    os.chmod(totp_dir, 0o755)
    assert main(["approvers", "add", "alice"]) == ERROR
    err = " ".join(unfold(capsys.readouterr().err))
    assert "must be a directory of root's with mode 0700" in err and "chmod 700" in err
    assert not (totp_dir / "alice").exists()


def test_it_is_roots(
    totp_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone else is told to use sudo (exit 2), for add and list alike."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for verb in ("add", "list"):
        assert main(["approvers", verb, *(["alice"] if verb == "add" else [])]) == USAGE
        assert f"approvers {verb} must run as root" in capsys.readouterr().err


def test_list_says_who_has_a_secret_and_their_channels(
    totp_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """alice has a secret and channel ops, bob neither; a secret for someone not in the
    config is named as never used."""
    main(["approvers", "add", "alice"])
    main(["approvers", "add", "mallory"])
    capsys.readouterr()
    assert main(["approvers", "list", "--json"]) == OK
    said = json.loads(capsys.readouterr().out)
    assert said["approvers"] == [
        {"approver": "alice", "secret": True, "notify": ["ops"]},
        {"approver": "bob", "secret": False, "notify": []},
    ]
    assert said["secrets_without_approver"] == ["mallory"]
    assert main(["approvers", "list"]) == OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["alice", "yes", "ops"]
    assert lines[2].split() == ["bob", "NO", "none"]
    assert "mallory" in lines[3] and "never used" in lines[3]
