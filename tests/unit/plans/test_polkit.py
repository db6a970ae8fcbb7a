"""The polkit rule generated from the policy: the executor's user may run exactly the
allowlisted verbs on exactly the allowlisted units, and for every other action polkit
decides (logind's linger among them) opsbot's two users get NO. The file is root's,
0644, replaced atomically. (That polkitd really answers so is tested in the booted
container: tests/attacks/test_attack_polkit.py.)"""

import json
import os
import re
import stat
from pathlib import Path

import pytest

from plans.polkit import allowed_verbs, opsbot_users, render_rule, write_rule
from shared_schema import ExecutorPolicy
from testbed.skips import skip_unless

POLICY = ExecutorPolicy(
    allow={
        "restart_unit": ["nginx.service", "app.service"],
        "reset_failed_unit": ["nginx.service"],
        "reload_unit": ["nginx.service"],
    }
)


def _allowed_in(rule: str) -> dict[str, list[str]]:
    match = re.search(r"var allowed = (\{.*?\});", rule, re.DOTALL)
    assert match, rule
    allowed: dict[str, list[str]] = json.loads(match.group(1))
    return allowed


def _users_in(rule: str) -> list[str]:
    match = re.search(r"var users = (\[.*?\]);", rule)
    assert match, rule
    users: list[str] = json.loads(match.group(1))
    return users


def _body(rule: str) -> list[str]:
    """The rule's code lines, comments left out."""
    return [line.strip() for line in rule.splitlines() if not line.lstrip().startswith("//")]


def test_the_rule_allows_each_allowed_verb_on_each_allowed_unit_for_the_executor_only() -> None:
    """The table maps each systemd verb (as polkit sees it) to exactly the allowlisted
    units, and the one YES is reached only for manage-units asked by the executor's user."""
    rule = render_rule(POLICY)
    assert _allowed_in(rule) == {
        "reload": ["nginx.service"],
        "reset-failed": ["nginx.service"],
        "restart": ["app.service", "nginx.service"],
    }
    assert _allowed_in(rule) == allowed_verbs(POLICY)
    body = _body(rule)
    assert body.count("return polkit.Result.YES;") == 1
    assert 'if (action.id === "org.freedesktop.systemd1.manage-units" &&' in body
    assert 'subject.user === "opsbot-executor") {' in body


def test_every_other_action_of_opsbots_users_gets_no() -> None:
    """Both of opsbot's users are held by the rule (not only the executor's): whatever is
    not the YES above falls through to NO for them, so an action whose defaults allow any
    user (logind's set-self-linger, the inhibitors) is refused to them; other users'
    requests are left to polkit's other rules (NOT_HANDLED)."""
    rule = render_rule(POLICY)
    assert _users_in(rule) == ["opsbot-diagnose", "opsbot-executor"]
    assert opsbot_users(POLICY) == ["opsbot-diagnose", "opsbot-executor"]
    body = _body(rule)
    not_ours = body.index("if (users.indexOf(subject.user) < 0) {")
    assert body[not_ours + 1] == "return polkit.Result.NOT_HANDLED;"
    # The last statement of the function: everything that did not return YES gets NO.
    assert body[-2:] == ["return polkit.Result.NO;", "});"]
    assert body.count("return polkit.Result.NOT_HANDLED;") == 1


def test_a_configured_diagnose_user_is_held_too() -> None:
    """``[executor] diagnose_user`` renames the diagnosis's user: the rule holds that one."""
    policy = ExecutorPolicy(diagnose_user="diag")
    assert _users_in(render_rule(policy)) == ["diag", "opsbot-executor"]


def test_the_verb_is_looked_up_as_an_own_property() -> None:
    """A verb such as ``constructor`` or ``__proto__`` finds nothing in the table (no
    inherited property of a JavaScript object counts as an allowed verb)."""
    assert "Object.prototype.hasOwnProperty.call(allowed, verb)" in render_rule(POLICY)


def test_the_rule_mentions_nothing_that_is_not_allowed() -> None:
    """Verbs and units not in the allowlist, and denylisted units, appear nowhere in the
    rule."""
    rule = render_rule(POLICY)
    for absent in ('"stop"', '"start"', "redis.service", "sshd", "dbus", "journald"):
        assert absent not in rule


def test_an_empty_allowlist_gives_a_rule_that_allows_nothing() -> None:
    """With nothing allowed, the rule's table is empty: every request is answered NO."""
    assert _allowed_in(render_rule(ExecutorPolicy())) == {}


def test_the_user_names_in_the_rule_are_quoted() -> None:
    """User names are written as JSON strings, so no name can break out of them."""
    hostile = 'x" || true || "'
    rule = render_rule(ExecutorPolicy(diagnose_user=hostile), executor_user=hostile)
    assert 'subject.user === "x\\" || true || \\"") {' in rule
    assert _users_in(rule) == [hostile]


@pytest.fixture
def as_root() -> None:
    skip_unless(os.geteuid() == 0, "the rule file is given to root: run the tests as root")


def test_the_rule_file_is_roots_0644_whoever_owns_the_directory(
    tmp_path: Path, as_root: None
) -> None:
    """Debian's /etc/polkit-1/rules.d belongs to polkitd: the rule written there, and one
    replacing a file someone else owned, is root:root 0644 (whatever the umask); no temp
    file is left beside it."""
    rules_d = tmp_path / "rules.d"
    rules_d.mkdir(mode=0o700)
    os.chown(rules_d, 65534, 65534)
    path = rules_d / "60-opsbot.rules"
    path.write_text("// someone else's\n")
    os.chown(path, 65534, 65534)
    old_umask = os.umask(0o077)
    try:
        write_rule(render_rule(POLICY), path)
    finally:
        os.umask(old_umask)
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644)
    assert path.read_text() == render_rule(POLICY)
    assert sorted(p.name for p in rules_d.iterdir()) == ["60-opsbot.rules"]


def test_a_rule_that_cannot_be_written_leaves_the_old_one(tmp_path: Path, as_root: None) -> None:
    """Writing over a directory in the rule's place fails, and leaves no temp file."""
    path = tmp_path / "60-opsbot.rules"
    path.mkdir()
    (path / "keep").write_text("")
    with pytest.raises(OSError):
        write_rule(render_rule(POLICY), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["60-opsbot.rules"]
