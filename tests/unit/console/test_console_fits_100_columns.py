"""Errors that say the right thing, in 100 columns (issue 25): every error path the
console reaches in-process, run at COLUMNS=100 against real files in a deep temporary
directory (long paths), a socket nobody listens on and a real diagnosis service, prints
no line wider than 100 columns. The message comes first (folded, its further lines
indented), the hint on its own line; a mistyped verb is one line naming the nearest; a
root-only verb's hint repeats what was typed, with sudo; a unit systemd does not know is
said not found, in systemctl's words. (Every verb as every user: test_console_every_verb.)
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from diagnose_svc.scope import build_scope
from diagnose_svc.server import DiagnoseServer
from opsbot_cli.main import main
from opsbot_cli.say import INDENT, error_lines, unfold
from shared_io.config import load_config
from shared_schema.diagnose_socket import Event
from shared_schema.verdict import NoteVerdict, PlanVerdict
from tests.unit.console.scripted_journal import install

WIDTH = 100
PLAN_ID = "20261129-213500-1a2b3c4d"
SHA = "0123456789ab"
CONFIG = '[executor.allow]\nrestart_unit = ["app.service"]\n'
#: The operator's typo, on line 3.
TYPO = CONFIG + "[diagnose]\nmax_step = 3\n"
IS_ROOT = os.geteuid() == 0


@dataclass(frozen=True)
class Said:
    """What one ``opsbot ARGV`` printed, and its exit status."""

    status: int
    out: str
    err: str

    def too_wide(self) -> list[str]:
        return [line for line in (self.out + self.err).splitlines() if len(line) > WIDTH]

    def text(self) -> str:
        """stderr with each folded line joined back, as one string."""
        return " ".join(unfold(self.err))


@pytest.fixture
def console(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., Said]:
    """``opsbot ARGV`` in-process at COLUMNS=100, its paths in a directory of its own in
    /tmp (so that a long message folds, whatever pytest's tmp_path); as root or,
    with ``root=False``, as uid 1000; ``config`` is the text of opsbot.toml."""
    install(monkeypatch)
    # As long as /etc/opsbot/opsbot.toml and a little longer, whichever worker runs it.
    deep = Path(tempfile.mkdtemp(prefix="opsbot-fits-100-columns-"))
    request.addfinalizer(lambda: shutil.rmtree(deep))
    for name, value in {
        "OPSBOT_CONFIG": deep / "opsbot.toml",
        "OPSBOT_STATE_DIR": deep / "state",
        "OPSBOT_APPROVALS_DIR": deep / "approvals",
        "OPSBOT_SOCKET": deep / "executor.sock",
        "OPSBOT_DIAGNOSE_SOCKET": deep / "diagnose.sock",
        "OPSBOT_TOTP_DIR": deep / "totp",
    }.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.delenv("OPSBOT_DEBUG", raising=False)
    monkeypatch.delenv("SUDO_USER", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # a script: no terminal to ask on
    monkeypatch.setattr(socket, "gethostname", lambda: "web1")

    def run(*argv: str, root: bool = True, config: str = CONFIG) -> Said:
        (deep / "opsbot.toml").write_text(config)
        (deep / "opsbot.toml").chmod(0o644)
        capsys.readouterr()
        with monkeypatch.context() as user:
            if not root:
                user.setattr(os, "geteuid", lambda: 1000)
            try:
                status = main(list(argv))
            except SystemExit as exc:  # argparse's usage errors
                status = exc.code if isinstance(exc.code, int) else 98
        out, err = capsys.readouterr()
        # The diagnosis service's own log lines: its thread shares this process's logging
        # (the console configured it for stderr); on a host they go to its journal.
        logged = ("opsbot: debug: ", "opsbot: info: ", "opsbot: warning: ")
        err = "".join(line for line in err.splitlines(True) if not line.startswith(logged))
        return Said(status, out, err)

    return run


#: Every error path of the console that needs no daemon: argv, as root or not, the
#: config, and what the error says (folded lines joined back), with its exit status.
ERRORS: dict[str, tuple[list[str], bool, str, str, int]] = {
    "a mistyped verb": (
        ["aprove", PLAN_ID],
        True,
        CONFIG,
        "invalid choice: 'aprove' (did you mean approve?)",
        2,
    ),
    "a mistyped sub-verb": (["approvers", "ad", "alice"], True, CONFIG, "did you mean add?", 2),
    "an unknown verb": (["frobnicate"], True, CONFIG, "`opsbot --help` lists them", 2),
    "an unknown sub-verb": (["approvers", "zap"], True, CONFIG, "choose from add, list", 2),
    "a missing argument": (["approve"], True, CONFIG, "arguments are required: ID", 2),
    "an unknown option": (["plans", "--colour"], True, CONFIG, "unrecognized arguments", 2),
    "a malformed plan id": (["show", "../x"], True, CONFIG, "'../x' is not a plan id", 2),
    "a malformed unit": (["diagnose", "a/b"], True, CONFIG, "is not a unit name", 2),
    "a bad ttl": (
        ["approve", PLAN_ID, "--sha256", SHA, "--ttl", "forever"],
        True,
        CONFIG,
        "--ttl",
        2,
    ),
    "a short sha256": (["approve", PLAN_ID, "--sha256", "abc"], True, CONFIG, "12 hex", 2),
    "approve off a terminal": (["approve", PLAN_ID], True, CONFIG, "no terminal to confirm", 2),
    "a root-only verb": (["watch", "web"], False, CONFIG, "watch must run as root", 2),
    "no executor": (["plans"], True, CONFIG, "no socket at", 1),
    "no executor, a config typo": (["plans"], True, TYPO, "the config is invalid", 1),
    "no diagnosis service": (["diagnose", "app"], True, CONFIG, "no socket at", 1),
    "a config key typo": (["check-config"], True, TYPO, "did you mean max_steps?", 78),
    "a config that is not TOML": (["check-config"], True, "[executor\n", "not valid TOML", 78),
    "a config key typo, root's verb": (
        ["polkit-rule"],
        True,
        TYPO,
        "opsbot.toml:4: diagnose.max_step: unknown key",
        78,
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_every_error_fits_100_columns_and_says_what_went_wrong(
    console: Callable[..., Said], case: str
) -> None:
    """Each error ends with its documented status and says what went wrong, message
    first, hint after; no line of it, usage line included, is wider than 100 columns."""
    argv, root, config, says, status = ERRORS[case]
    said = console(*argv, root=root, config=config)
    assert said.status == status, said
    assert says in said.text(), said.err
    assert said.too_wide() == [], said.err
    errors = [line for line in said.err.splitlines() if ": error: " in line]
    assert len(errors) == 1, said.err
    hints = [line for line in unfold(said.err) if line.startswith("opsbot: hint: ")]
    assert len(hints) <= 1, said.err


def test_a_mistyped_verb_is_one_line_naming_the_nearest(console: Callable[..., Said]) -> None:
    """`opsbot aprove ID` is one line, no usage block, exit 2 as every usage error."""
    said = console("aprove", PLAN_ID)
    assert (said.status, said.out) == (2, "")
    assert said.err.splitlines() == [
        "opsbot: error: invalid choice: 'aprove' (did you mean approve?)"
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["watch", "web"],
        ["unwatch", "web.service"],
        ["reject", PLAN_ID, "--reason", "not during business hours"],
        ["approve", PLAN_ID, "--sha256", SHA, "--ttl", "30m"],
        ["approvers", "add", "alice", "--replace"],
        ["archive-approvals"],
        ["polkit-rule", "--write"],
    ],
    ids=lambda argv: argv[0] + (f" {argv[1]}" if argv[0] in ("approvers", "polkit-rule") else ""),
)
def test_a_root_only_verb_hints_at_what_was_typed_with_sudo(
    console: Callable[..., Said], argv: list[str]
) -> None:
    """olivia runs a root-only verb: the hint is her own command line after sudo, ready
    to copy (`sudo opsbot watch web`, not `sudo opsbot watch`)."""
    said = console(*argv, root=False)
    assert said.status == 2, said
    assert unfold(said.err)[-1] == f"opsbot: hint: run it as root: sudo opsbot {shlex.join(argv)}"


def test_a_config_typo_names_file_line_and_key_folded_to_fit(
    console: Callable[..., Said],
) -> None:
    """The config error names the file, the line and the key even where the path is long:
    it folds (the further lines indented), and joined back it is the whole message."""
    said = console("check-config", config=TYPO)
    path = os.environ["OPSBOT_CONFIG"]
    assert unfold(said.err)[0] == (
        f"opsbot: error: {path}:4: diagnose.max_step: unknown key (did you mean max_steps?)"
    )
    assert said.err.splitlines()[1].startswith(" " * 8)
    assert said.too_wide() == []


def test_a_folded_error_joins_back_whole() -> None:
    """A script reading stderr gets each error whole with unfold(); a path too long to
    follow the head starts the second line, the head alone as every error starts."""
    message = "cannot use " + "/var/lib/opsbot/" + "x" * 70 + ": Not a directory; check it"
    lines = error_lines(message, "is it what opsbot expects there? " * 4)
    assert lines[0] == "opsbot: error: cannot use"
    assert lines[1].startswith(f"{INDENT}/var/lib/opsbot/{'x' * 70}:")
    assert all(len(line) <= WIDTH for line in lines)
    assert unfold("\n".join(lines)) == [
        f"opsbot: error: {message}",
        "opsbot: hint: " + " ".join(("is it what opsbot expects there? " * 4).split()),
    ]
    path = "/" + "p" * 90
    assert error_lines(path)[:2] == ["opsbot: error: ", f"{INDENT}{path}"]
    assert unfold("\n".join(error_lines(path))) == [f"opsbot: error: {path}"]


# -- the diagnosis service -----------------------------------------------------------------


def systemd(units: Sequence[str], properties: Sequence[str]) -> list[dict[str, str]]:
    """``systemctl show`` of a host with app.service and payroll.service, no other."""
    known = {"app.service", "payroll.service"}
    return [
        {
            p: ("loaded" if u in known else "not-found") if p == "LoadState" else ""
            for p in properties
        }
        for u in units
    ]


@contextlib.contextmanager
def diagnosis_service(path: Path) -> Iterator[None]:
    """The real DiagnoseServer on ``path``, refusing as the daemon does: the scope of the
    config, against the scripted systemd above."""

    def diagnose(
        unit: str, symptom: str, on_event: Callable[[Event], None]
    ) -> PlanVerdict | NoteVerdict:
        config = load_config(Path(os.environ["OPSBOT_CONFIG"]))
        build_scope(config, systemd).require(unit, systemd)
        raise AssertionError(f"{unit} is in scope: this test asks only for refusals")

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    server = DiagnoseServer(listener, diagnose, idle_timeout=0, notify=False)
    thread = threading.Thread(target=server.serve, name="diagnose", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.stopping.set()
        thread.join(timeout=15)
        listener.close()


@pytest.mark.parametrize(
    ("unit", "lines"),
    [
        (
            "nosuch",
            [
                "opsbot: error: Unit nosuch.service could not be found.",
                "opsbot: hint: `systemctl list-unit-files` lists the units this host has",
            ],
        ),
        (
            "ap",
            [
                "opsbot: error: Unit ap.service could not be found.",
                "opsbot: hint: did you mean app.service? (`systemctl list-unit-files` lists the "
                "units this host has)",
            ],
        ),
    ],
)
def test_a_unit_systemd_does_not_know_is_not_found_not_out_of_scope(
    console: Callable[..., Said], unit: str, lines: list[str]
) -> None:
    """`opsbot diagnose nosuch` through the real diagnosis service: systemctl's words and
    status 5, never a hint to put the typo into [diagnose] scope; a near miss of a unit in
    scope is named."""
    with diagnosis_service(Path(os.environ["OPSBOT_DIAGNOSE_SOCKET"])):
        said = console("diagnose", unit)
    assert said.status == 5, said
    assert unfold(said.err) == lines
    assert "[diagnose] scope" not in said.err
    assert said.too_wide() == []


def test_a_unit_out_of_scope_is_refused_in_lines_that_fit(console: Callable[..., Said]) -> None:
    """payroll exists but opsbot may not diagnose it: the refusal is one short error line
    and a hint whose first line names [diagnose] scope, all within 100 columns."""
    with diagnosis_service(Path(os.environ["OPSBOT_DIAGNOSE_SOCKET"])):
        said = console("diagnose", "payroll")
    assert said.status == 5, said
    lines = said.err.splitlines()
    assert lines[0] == "opsbot: error: payroll.service is not in the diagnosis scope"
    assert lines[1].startswith("opsbot: hint: to diagnose it, add it to [diagnose] scope in ")
    assert said.too_wide() == []


@pytest.mark.skipif(not IS_ROOT, reason="approvers add writes root's secrets; run as root")
def test_approvers_add_off_a_terminal_fits_and_says_how_to_get_the_code(
    console: Callable[..., Said],
) -> None:
    """Run from a script (stdout not a terminal): the URI, a line saying --qr prints the
    code anyway, and the notice about the approver, each within 100 columns."""
    said = console("approvers", "add", "alice")
    assert said.status == 0, said
    assert "(no QR code: this is not a terminal; --qr prints it anyway)" in said.out
    assert said.too_wide() == []
