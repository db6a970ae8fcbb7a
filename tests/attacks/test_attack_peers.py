"""Who may talk to the executor, probed as each kind of local user would.

In the booted systemd: a stranger (mallory) cannot even connect to either socket, whose
owner, group and mode are what the units say; an operator (olivia) may list and show but
not submit; the diagnose user may submit but not list or show.

In-process (the real Server on an abstract Unix socket, which any local user can reach,
and clients run as the unprivileged user ``nobody``): the daemon's own refusal, which the
socket's mode hides in production. A peer that is neither root, the diagnose user nor in
the operators group is answered REJECT before a byte of its message is read.
"""

from __future__ import annotations

import configparser
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from executor_svc.peer import Roles
from shared_schema import parse_reply
from testbed.container import BootedSystemd
from testbed.host import opsbot as cli, request, restart_plan, send_raw, submit
from testbed.inproc import REPO, plan as make_plan, running_executor, submit_bytes

NOBODY = 65534
# A stdlib-only client, run as another user: connect, optionally wait, send stdin, print
# what comes back and how long the first byte took.
CLIENT = """
import select, socket, sys, time
address = "\\0" + sys.argv[1]
pause = float(sys.argv[2])
data = sys.stdin.buffer.read()
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(10)
sock.connect(address)
started = time.monotonic()
first = None
if pause and select.select([sock], [], [], pause)[0]:
    first = time.monotonic() - started  # answered before we sent anything
time.sleep(max(0.0, pause - (time.monotonic() - started)))
try:
    if data:
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
except OSError:
    pass
out = b""
while True:
    try:
        chunk = sock.recv(65536)
    except OSError:
        break
    if not chunk:
        break
    if first is None:
        first = time.monotonic() - started
    out += chunk
sys.stdout.write(repr((first, out.decode("utf-8", "replace"))))
"""


def _as_user(name: str, data: bytes, uid: int, gid: int, pause: float = 0.0) -> tuple[Any, str]:
    """Run the client as uid/gid (no supplementary groups) against the abstract socket."""
    proc = subprocess.run(
        [sys.executable, "-I", "-c", CLIENT, name, str(pause)],
        input=data,
        capture_output=True,
        user=uid,
        group=gid,
        extra_groups=[],
        timeout=30,
        check=True,
    )
    first, text = eval(proc.stdout.decode())  # our own repr() of (float | None, str)
    return first, text


def _replies(text: str) -> list[Any]:
    return [parse_reply(line.encode()) for line in text.splitlines() if line]


@pytest.fixture
def abstract_name(root: None) -> str:
    """A fresh name in the abstract socket namespace (clients run as nobody: root only)."""
    return f"opsbot-attack-{secrets.token_hex(6)}"


def test_a_stranger_is_refused_before_its_message_is_read(
    tmp_path: Path, abstract_name: str
) -> None:
    """A peer (uid nobody) not in the operators group (here: root's group) and not the
    diagnose user: the daemon answers REJECT "permission denied" at once, before it has
    sent a byte; a valid submit sent after that is never parsed or stored; the log
    shows request.refused and no request.malformed or plan event."""
    roles = Roles(diagnose_user="opsbot-diagnose", operators_group="root")
    with (
        capture_logs() as logs,
        running_executor(tmp_path / "state", "\0" + abstract_name, roles) as ex,
    ):
        first, text = _as_user(
            abstract_name, submit_bytes(make_plan("stranger")), NOBODY, NOBODY, pause=1.5
        )
        assert ex.store.ids() == []
    assert first is not None and first < 1.0, "the refusal waited for the message"
    [reply] = _replies(text)
    assert reply.verdict == "REJECT"
    assert reply.reason == (
        "permission denied: nobody is neither the diagnose user nor in group root"
    )
    events = [e["event"] for e in logs]
    assert "request.refused" in events
    assert not {"request.malformed", "plan.accepted", "plan.revise"} & set(events), events


def test_a_uid_without_a_name_is_refused_too(tmp_path: Path, abstract_name: str) -> None:
    """A uid with no passwd entry (a container's or a deleted user's) is nobody's role:
    REJECT naming it as uid:N, and garbage it sends is not even looked at."""
    roles = Roles(diagnose_user="opsbot-diagnose", operators_group="nogroup")
    with running_executor(tmp_path / "state", "\0" + abstract_name, roles) as ex:
        _, text = _as_user(abstract_name, b"\xff\x00{{{ not json\n", 54321, 54321)
        assert ex.store.ids() == []
    [reply] = _replies(text)
    assert reply.verdict == "REJECT"
    assert reply.reason.startswith("permission denied: uid:54321 is neither")


def test_roles_decide_ops_operator_lists_diagnose_submits(
    tmp_path: Path, abstract_name: str
) -> None:
    """The same uid as operator (its group is the operators group) may list and show but
    its submit gets REJECT "may not submit"; as the diagnose user it may submit, but
    list and show get REJECT (show even for an id that exists: no oracle)."""
    operator = Roles(diagnose_user="opsbot-diagnose", operators_group="nogroup")
    with running_executor(tmp_path / "op", "\0" + abstract_name + "o", operator) as ex:
        _, text = _as_user(abstract_name + "o", submit_bytes(make_plan("operator")), NOBODY, NOBODY)
        [reply] = _replies(text)
        assert reply.verdict == "REJECT" and reply.reason == "nobody (operator) may not submit"
        assert ex.store.ids() == []
        _, text = _as_user(abstract_name + "o", b'{"v":1,"op":"list"}\n', NOBODY, NOBODY)
        assert _replies(text)[0].verdict == "PLANS"

    diagnose = Roles(diagnose_user="nobody", operators_group="root")
    with running_executor(tmp_path / "dg", "\0" + abstract_name + "d", diagnose) as ex:
        _, text = _as_user(abstract_name + "d", submit_bytes(make_plan("diagnose")), NOBODY, NOBODY)
        [accept] = _replies(text)
        assert accept.verdict == "ACCEPT"
        for message in (
            {"v": 1, "op": "list"},
            {"v": 1, "op": "show", "plan_id": accept.plan_id},
            {"v": 1, "op": "show", "plan_id": "20000101-000000-00000000"},
        ):
            _, text = _as_user(
                abstract_name + "d", json.dumps(message).encode() + b"\n", NOBODY, NOBODY
            )
            [reply] = _replies(text)
            assert reply.verdict == "REJECT", reply
            assert reply.reason == f"nobody (diagnose) may not {message['op']}"


# -- in the booted systemd ----------------------------------------------------------------


def _socket_unit(name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(REPO / "units" / name)
    return parser["Socket"]


@pytest.mark.parametrize("unit", ["opsbot-executor.socket", "opsbot-diagnose.socket"])
def test_socket_owner_and_mode_are_what_the_unit_says(opsbot: BootedSystemd, unit: str) -> None:
    """The socket file's owner, group and mode, and its directory's mode, are exactly
    the unit's SocketUser=, SocketGroup=, SocketMode= and DirectoryMode=: a stranger has
    no permission bit on it."""
    section = _socket_unit(unit)
    path = section["ListenStream"]
    seen = opsbot.run(["stat", "-c", "%U %G %a %F", path]).stdout.strip().split(maxsplit=3)
    assert seen == [
        section["SocketUser"],
        section["SocketGroup"],
        section["SocketMode"].lstrip("0"),
        "socket",
    ]
    assert int(section["SocketMode"], 8) & 0o007 == 0
    directory = opsbot.run(["stat", "-c", "%U %a", str(Path(path).parent)]).stdout.split()
    assert directory == ["root", section["DirectoryMode"].lstrip("0")]


def test_a_stranger_cannot_connect_to_either_socket(opsbot: BootedSystemd) -> None:
    """mallory (in no opsbot group) is refused by the kernel on connect, on the executor
    socket and the diagnosis socket alike; `opsbot plans` tells her so; nothing she sent
    was stored."""
    before = {p["plan_id"] for p in json.loads(cli(opsbot, "plans", "--json").stdout)}
    for sock in ("/run/opsbot/executor.sock", "/run/opsbot/diagnose.sock"):
        proc = opsbot.run(
            [
                "/opt/opsbot/venv/bin/python",
                "/usr/src/opsbot/testbed/inside/socket_client.py",
                sock,
            ],
            user="mallory",
            input=json.dumps({"v": 1, "op": "submit", "plan": restart_plan("demo-web.service")}),
            check=False,
        )
        assert proc.returncode == 3 and "Permission denied" in proc.stderr, proc
    plans = cli(opsbot, "plans", user="mallory", check=False)
    assert plans.returncode != 0 and "permission denied" in plans.stderr
    assert {p["plan_id"] for p in json.loads(cli(opsbot, "plans", "--json").stdout)} == before


def test_operator_cannot_submit_and_diagnose_cannot_list_or_show(opsbot: BootedSystemd) -> None:
    """olivia (opsbot-operators) gets REJECT "may not submit" and nothing is stored; the
    diagnose user gets REJECT for list, and for show of an existing plan and of a
    missing one alike; olivia can list and show."""
    goal = f"attack: operator submits {secrets.token_hex(3)}"
    reply = submit(opsbot, restart_plan("demo-db.service", goal=goal), user="olivia")
    assert reply == {"v": 1, "verdict": "REJECT", "reason": "olivia (operator) may not submit"}
    listing = request(opsbot, {"v": 1, "op": "list"}, user="olivia")
    assert listing["verdict"] == "PLANS"
    assert all(p["goal"] != goal for p in listing["plans"])

    accepted = submit(opsbot, restart_plan("demo-db.service", goal=goal + " (diagnose)"))
    assert accepted["verdict"] == "ACCEPT"
    for message in (
        {"v": 1, "op": "list"},
        {"v": 1, "op": "show", "plan_id": accepted["plan_id"]},
        {"v": 1, "op": "show", "plan_id": "20000101-000000-00000000"},
    ):
        reply = request(opsbot, message)
        assert reply["verdict"] == "REJECT", reply
        assert reply["reason"] == f"opsbot-diagnose (diagnose) may not {message['op']}"
    shown = request(opsbot, {"v": 1, "op": "show", "plan_id": accepted["plan_id"]}, user="olivia")
    assert shown["verdict"] == "PLAN"
    cli(opsbot, "reject", accepted["plan_id"], "--reason", "attack test cleanup")


def test_only_root_approves_and_writes_approvals(opsbot: BootedSystemd) -> None:
    """olivia cannot `opsbot approve` (root only), cannot write into the approvals
    directory, and cannot read the executor's state directory."""
    reply = submit(
        opsbot, restart_plan("demo-db.service", goal=f"attack: olivia approves {time.time()}")
    )
    plan_id = reply["plan_id"]
    approve = cli(opsbot, "approve", plan_id, user="olivia", check=False)
    assert approve.returncode == 2 and "approve must run as root" in approve.stderr
    forged = opsbot.run(
        ["touch", f"/var/lib/opsbot-approvals/{plan_id}.approval"], user="olivia", check=False
    )
    assert forged.returncode != 0 and "Permission denied" in forged.stderr
    state = opsbot.run(["ls", "/var/lib/opsbot/plans"], user="olivia", check=False)
    assert state.returncode != 0 and "Permission denied" in state.stderr
    status, out, _ = send_raw(opsbot, b'{"v":1,"op":"list"}\n', user="olivia")
    assert status == 0 and json.loads(out)["verdict"] == "PLANS"
    cli(opsbot, "reject", plan_id, "--reason", "attack test cleanup")


def test_no_one_but_root_may_pause_resume_or_run_the_standing_rules(opsbot: BootedSystemd) -> None:
    """The rules' switch and trigger are root's: olivia (an operator), mallory (a
    stranger) and the diagnose user are refused by the kernel on connect to the
    approver's socket; opsbot-notify and opsbot-web, which may connect, are refused the
    request. The approver's journal has no switch after any of it."""
    since = opsbot.run(["date", "+%Y-%m-%d %H:%M:%S"]).stdout.strip()
    for message in (
        {"v": 1, "op": "policy-switch", "paused": False, "by": "mallory"},
        {"v": 1, "op": "policy-switch", "paused": True, "by": "mallory"},
        {"v": 1, "op": "rules"},
        {"v": 1, "op": "policy-report"},
    ):
        for user in ("olivia", "mallory", "opsbot-diagnose", "opsbot-notify", "opsbot-web"):
            proc = opsbot.run(
                [
                    "/opt/opsbot/venv/bin/python",
                    "/usr/src/opsbot/testbed/inside/socket_client.py",
                    "/run/opsbot/approver.sock",
                ],
                user=user,
                input=json.dumps(message) + "\n",
                check=False,
            )
            if user in ("opsbot-notify", "opsbot-web"):
                reply = json.loads(proc.stdout)
                assert (reply["op"], reply["kind"]) == ("refused", "request"), (user, reply)
                assert "may not" in reply["reason"], reply
            else:
                assert proc.returncode == 3 and "Permission denied" in proc.stderr, (user, proc)
    log = opsbot.journal("-u", "opsbot-approver.service", "--since", since, "-o", "cat")
    assert "policy.paused" not in log and "policy.resumed" not in log, log
