"""Every ``opsbot`` verb, run by a plain user, an operator (group opsbot-operators) or
root where the files it needs are not theirs to read or are not what opsbot expects,
ends with one ``opsbot: error:`` line (and at most one hint saying what to do) and a
non-zero exit status: never a traceback (issue 13, item 3).

The plain user and the operator are real: the verb runs in a forked child that has
dropped to uid ``nobody`` (with the operators' group for the operator), so the kernel
refuses the reads, not a mock. Without root to drop from, the plain user is the test's
own user facing mode-000 directories, and the operator case is skipped. Root meets
paths that are files where directories belong, which refuse root too; its verbs that
would change the host itself (apply, watch, unwatch, polkit-rule --write) are left to
the container test.
"""

from __future__ import annotations

import grp
import os
import shutil
import signal
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from opsbot_cli.main import build_parser, main
from tests.unit.console.scripted_journal import install

PLAN_ID = "20261129-213500-1a2b3c4d"
SHA = "0123456789ab"
NOBODY = 65534
#: One invocation of every verb; a verb added to the parser without a line here fails.
EVERY_VERB = {
    "plans": ["plans"],
    "show": ["show", PLAN_ID],
    "approve": ["approve", PLAN_ID, "--sha256", SHA, "--ttl", "30m"],
    "reject": ["reject", PLAN_ID, "--reason", "not now"],
    "approvers add": ["approvers", "add", "alice"],
    "approvers list": ["approvers", "list"],
    "archive-approvals": ["archive-approvals"],
    "apply": ["apply"],
    "apply --dry-run": ["apply", "--dry-run"],
    "audit": ["audit", PLAN_ID],
    "diagnose": ["diagnose", "app.service"],
    # Runs diagnose_svc.replay over the diagnose user's records (root's state here).
    "replay": ["replay"],
    # The server itself answers a client on stdin (tests/unit/console/test_console_mcp.py);
    # --check meets the sockets as its tools would, in the console's words.
    "mcp --check": ["mcp", "--check"],
    "watch": ["watch", "app.service"],
    "unwatch": ["unwatch", "app.service"],
    "check-config": ["check-config"],
    "policy check": ["policy", "check"],
    "policy test": ["policy", "test", PLAN_ID],
    "polkit-rule": ["polkit-rule"],
    "polkit-rule --write": ["polkit-rule", "--write"],
    "firewall": ["firewall"],
    "firewall --write": ["firewall", "--write"],
    "notify test": ["notify", "test"],
    # `help VERB` reads nothing and succeeds for anyone; a name it does not know is its error.
    "help no-such-verb": ["help", "no-such-verb"],
}
#: What root would run for real against this host's systemd and /etc: not in a unit test.
#: (``approvers`` reads and writes root's /etc/opsbot/totp.)
CHANGES_THE_HOST = {
    "apply",
    "watch",
    "unwatch",
    "polkit-rule --write",
    "firewall --write",
    "notify test",
    "approvers add",
    "approvers list",
}
IS_ROOT = os.geteuid() == 0
#: The verbs that read only the config (and /etc/polkit-1): anyone may run them.
READ_ONLY_CONFIG = ("check-config", "policy check", "polkit-rule", "firewall")


def operators_gid() -> int:
    try:
        return grp.getgrnam("opsbot-operators").gr_gid
    except KeyError:
        return 4242  # a group no one is in: the test only needs its number


@dataclass(frozen=True)
class Ran:
    status: int
    out: str
    err: str


def run_in_child(argv: list[str], scratch: Path, uid: int | None, groups: list[int]) -> Ran:
    """``main(argv)`` in a forked child, as ``uid`` with ``groups`` when given; whatever
    escapes main is printed as a traceback (what the test looks for) with status 99."""
    out_path, err_path = scratch / "stdout", scratch / "stderr"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 99
        try:
            signal.alarm(120)  # a hung verb ends the child, not the test run
            sys.stdout = open(out_path, "w")  # noqa: SIM115 (flushed by os._exit below)
            sys.stderr = open(err_path, "w")  # noqa: SIM115
            if uid is not None:
                os.setgroups(groups)
                os.setgid(groups[0] if groups else NOBODY)
                os.setuid(uid)
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 98
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    status = os.waitstatus_to_exitcode(wait_status)
    return Ran(status, out_path.read_text(), err_path.read_text())


@dataclass(frozen=True)
class Host:
    """Paths the console is pointed at (through its OPSBOT_* variables)."""

    base: Path
    run_dir: Path  # the sockets' directory: root:operators 0750
    locked: Path  # root's state: the executor's plans and root's approvals, 0700


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    """A readable config, sockets behind the operators' group, state behind root's."""
    install(monkeypatch)  # approve and archive-approvals read a scripted journal
    base = Path(tempfile.mkdtemp(prefix="opsbot-every-verb-"))
    base.chmod(0o711)
    run_dir, locked = base / "run", base / "locked"
    for directory in (run_dir, locked / "state", locked / "approvals", base / "scratch"):
        directory.mkdir(parents=True)
    (base / "scratch").chmod(0o777)
    config = base / "opsbot.toml"
    config.write_text('[executor.allow]\nrestart_unit = ["app.service"]\n')
    config.chmod(0o644)
    if IS_ROOT:
        os.chown(run_dir, 0, operators_gid())
        run_dir.chmod(0o750)
        locked.chmod(0o700)
    else:
        run_dir.chmod(0o000)
        locked.chmod(0o000)
    for name, value in {
        "OPSBOT_CONFIG": config,
        "OPSBOT_STATE_DIR": locked / "state",
        "OPSBOT_APPROVALS_DIR": locked / "approvals",
        "OPSBOT_SOCKET": run_dir / "executor.sock",
        "OPSBOT_DIAGNOSE_SOCKET": run_dir / "diagnose.sock",
        "OPSBOT_DIAGNOSE_RECORDS": locked / "records",
    }.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.delenv("OPSBOT_DEBUG", raising=False)
    monkeypatch.delenv("SUDO_USER", raising=False)
    try:
        yield Host(base, run_dir, locked)
    finally:
        for directory in (run_dir, locked):
            directory.chmod(0o700)
        shutil.rmtree(base)


def assert_one_line(verb: str, ran: Ran, *, may_succeed: bool = False) -> None:
    """The operator's contract: a non-zero status, one error and at most one hint, each
    folded to 100 columns.

    ``may_succeed``: a verb that needs nothing refused here may instead do its work: exit
    0 with nothing on stderr, or (check-config) 1 with its warnings on stdout."""
    assert "Traceback" not in ran.err, f"opsbot {verb}:\n{ran.err}"
    if may_succeed and ran.err == "":
        if ran.status == 0 or (verb == "check-config" and ran.status == 1):
            assert verb in READ_ONLY_CONFIG, f"opsbot {verb} succeeded"
            assert ran.status == 0 or "  warning: " in ran.out
            return
    lines = ran.err.splitlines()
    errors = [line for line in lines if line.startswith("opsbot: error: ")]
    hints = [line for line in lines if line.startswith("opsbot: hint: ")]
    wrapped = [line for line in lines if line.startswith(" " * 8)]  # a long line, folded
    assert len(errors) == 1 and len(hints) <= 1, f"opsbot {verb}:\n{ran.err}"
    assert lines[0] == errors[0], f"opsbot {verb}:\n{ran.err}"
    assert len(lines) == len(errors) + len(hints) + len(wrapped), f"opsbot {verb}:\n{ran.err}"
    assert all(len(line) <= 100 for line in lines), f"opsbot {verb}:\n{ran.err}"
    assert ran.status not in (0, 98, 99), f"opsbot {verb} exited {ran.status}:\n{ran.err}"


def test_every_verb_of_the_parser_is_run_here() -> None:
    """A new verb cannot skip this contract: each one the parser knows has a line above."""
    parser = build_parser()
    [sub] = [a for a in parser._actions if a.choices and a.dest == "command"]  # noqa: SLF001
    assert sub.choices is not None
    assert set(sub.choices) == {argv[0] for argv in EVERY_VERB.values()}


def lock_the_config(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """The config as install.sh leaves it: root's alone."""
    config = host.locked / "opsbot.toml"
    if not IS_ROOT:
        host.locked.chmod(0o700)
    config.write_text('[executor.allow]\nrestart_unit = ["app.service"]\n')
    if not IS_ROOT:
        host.locked.chmod(0o000)
    monkeypatch.setenv("OPSBOT_CONFIG", str(config))


@pytest.mark.parametrize("config", ["readable", "root's"])
@pytest.mark.parametrize("verb", sorted(EVERY_VERB))
def test_a_plain_user_gets_one_line_from_every_verb(
    host: Host, verb: str, config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mallory, in no opsbot group: the sockets, the state and root's commands are all
    refused, each in one line that says who may (the operators' group, or root)."""
    if config == "root's":
        lock_the_config(host, monkeypatch)
    ran = run_in_child(EVERY_VERB[verb], host.base / "scratch", NOBODY if IS_ROOT else None, [])
    assert_one_line(verb, ran, may_succeed=config == "readable")


@pytest.mark.skipif(not IS_ROOT, reason="an operator's groups need root to set")
@pytest.mark.parametrize("config", ["readable", "root's"])
@pytest.mark.parametrize("verb", sorted(EVERY_VERB))
def test_an_operator_gets_one_line_from_every_verb(
    host: Host, verb: str, config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """olivia, in group opsbot-operators: she reaches the sockets' directory (no daemon
    listens here), not root's state; `apply --dry-run` and `check-config` tell her to run
    them as root instead of ending in a PermissionError traceback."""
    if config == "root's":
        lock_the_config(host, monkeypatch)
    ran = run_in_child(EVERY_VERB[verb], host.base / "scratch", NOBODY, [operators_gid()])
    assert_one_line(verb, ran, may_succeed=config == "readable")
    if verb == "apply --dry-run" or (verb == "check-config" and config == "root's"):
        assert f"opsbot: hint: run it as root: sudo opsbot {verb}" in ran.err
    if verb in ("plans", "diagnose"):
        assert "opsbot: error: no socket at " in ran.err  # past the group's directory


@pytest.mark.parametrize("verb", sorted(set(EVERY_VERB) - CHANGES_THE_HOST))
def test_root_gets_one_line_where_a_state_path_is_not_a_directory(
    host: Host, verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """root, with the state, the approvals and the sockets under a file (ENOTDIR refuses
    root too): one line naming the path, not an OSError traceback."""
    blocker = host.base / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("OPSBOT_STATE_DIR", str(blocker / "state"))
    monkeypatch.setenv("OPSBOT_APPROVALS_DIR", str(blocker / "approvals"))
    monkeypatch.setenv("OPSBOT_SOCKET", str(blocker / "executor.sock"))
    monkeypatch.setenv("OPSBOT_DIAGNOSE_SOCKET", str(blocker / "diagnose.sock"))
    monkeypatch.setenv("OPSBOT_DIAGNOSE_RECORDS", str(blocker / "records"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # root's path through the verbs
    ran = run_in_child(EVERY_VERB[verb], host.base / "scratch", None, [])
    # check-config, policy check, polkit-rule and firewall read only the config (and
    # /etc/polkit-1): root may.
    assert_one_line(verb, ran, may_succeed=verb in READ_ONLY_CONFIG)


def test_an_unforeseen_error_is_one_line_and_its_traceback_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug in a verb reaches the operator as one line naming it (exit 1) and how to
    see more; with ``OPSBOT_DEBUG=1`` the traceback comes back for the bug report."""
    import opsbot_cli.plans

    def broken(*_: object) -> int:
        raise RuntimeError("a bug\x1b[31m\nover two lines")

    monkeypatch.setattr(opsbot_cli.plans, "run", broken)
    monkeypatch.delenv("OPSBOT_DEBUG", raising=False)
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    assert main(["plans"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "opsbot: error: internal error: RuntimeError: a bug?[31m over two lines",
        "opsbot: hint: a bug in opsbot: OPSBOT_DEBUG=1 shows the traceback for a report",
    ]
    monkeypatch.setenv("OPSBOT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="a bug"):
        main(["plans"])
