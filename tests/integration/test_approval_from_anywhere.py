"""Approving from anywhere, on a booted systemd: a stored plan is announced on a signed
webhook and by mail; its link opens the page (opsbot-web), which shows the plan as the
executor stored it; the approver's TOTP code approves it through root's opsbot-approver,
and the plan is applied and verified. The page and the notifier hold no authority:
tokens and codes are checked by root, a link works once, a GET changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from testbed.container import BootedSystemd
from testbed.host import (
    EXECUTOR_SOCKET as EXECUTOR,
    PYTHON,
    REPO,
    opsbot,
    plan_state,
    send_raw,
    wait_state,
)
from testbed.phone import APPROVERS, PAGE, PHONE_CONFIG, Phone, propose, start_receivers

APPROVER_SOCKET = "/run/opsbot/approver.sock"
WEB_SOCKET = "/run/opsbot/web.sock"
APPROVER_STATE = "/var/lib/opsbot-approver/state.json"
CONFIG = "/etc/opsbot/opsbot.toml"
CAPS = "max_waiting_plans_per_submitter = 1000\nmax_waiting_plans = 5000\n"
#: What a host would set (the defaults are 50 and 100): the plans earlier tests left
#: waiting are far more than this, so the flood gets few or none stored.
FLOOD_CAPS = "max_waiting_plans_per_submitter = 20\nmax_waiting_plans = 25\n"


def test_a_stored_plan_is_announced_signed_and_by_mail(phone: Phone) -> None:
    """The operator's webhook receiver accepts opsbot's signature (HMAC-SHA256 over
    timestamp.body, checked as docs/operating.md says); the message carries the host, the goal,
    the step as argv, the sha256's first 12 hex, the expiry, the evidence and both links;
    the mail says the same, and carol's Apprise channel (from opsbot-notify's sandbox)
    brings her own links."""
    plan = propose(phone.ct, "restart demo-web after its crash (notice test)")
    notice = phone.notice_for(plan["plan_id"], "alice")
    assert phone.refused() == []
    text = notice["text"]
    assert plan["sha256"][:12] in text and notice["sha256"] == plan["sha256"]
    assert [step["argv"][-1] for step in notice["steps"]] == ["demo-web.service"]
    assert "systemctl restart" in text and "demo-web.service" in text
    assert "restart demo-web after its crash (notice test)" in text
    assert "Evidence:" in text and "expire" in text
    approve_url, reject_url = notice["approve_url"], notice["reject_url"]
    assert approve_url != reject_url and approve_url.startswith(f"{PAGE}/p/")
    assert reject_url.startswith(f"{PAGE}/p/")

    def mailed() -> str:
        return next((m for m in phone.mails() if plan["plan_id"] in m), "")

    mail = phone.ct.wait_for(mailed, timeout=30, interval=0.3, what="the mail")
    assert plan["sha256"][:12] in mail
    assert re.search(r"/p/[A-Za-z0-9_-]{22}", mail)

    # carol's Apprise channel, sent from opsbot-notify's sandbox: her own links.
    def chatted() -> dict[str, Any] | None:
        return next((m for m in phone.chats() if plan["plan_id"] in m["message"]), None)

    chat = phone.ct.wait_for(chatted, timeout=30, interval=0.3, what="carol's Apprise message")
    assert chat["title"].startswith(f"opsbot: plan {plan['plan_id']} "), chat
    assert f"Approve (carol): {PAGE}/p/" in chat["message"], chat

    # Announced once: another notify run sends nothing new for it.
    def about_it() -> int:
        return sum(m.get("plan_id") == plan["plan_id"] for m in phone.hooks())

    for approver in APPROVERS:  # each approver's own message, on the webhook
        phone.notice_for(plan["plan_id"], approver)
    before = about_it()
    assert before == len(APPROVERS)
    phone.ct.run(["systemctl", "start", "opsbot-notify.service"], timeout=300)
    assert about_it() == before


def test_the_link_shows_the_plan_and_a_get_changes_nothing(phone: Phone) -> None:
    """A chat's link preview fetches every URL: GETs of the approve link show the plan
    (its argv, its whole sha256, who is asked) and leave it PROPOSED, the link usable."""
    plan = propose(phone.ct, "restart demo-web (preview test)")
    url = phone.notice_for(plan["plan_id"], "bob")["approve_url"]
    for _ in range(3):
        seen = phone.click(url)
        assert seen["get"]["status"] == 200, seen
    assert plan["sha256"] in seen["get"]["text"]
    assert "demo-web.service" in seen["get"]["text"]
    assert "bob" in seen["get"]["text"]
    assert plan_state(phone.ct, plan["plan_id"]) == "PROPOSED"
    assert (
        not phone.ct.run(
            ["test", "-e", f"/var/lib/opsbot-approvals/{plan['plan_id']}.approval"], check=False
        ).returncode
        == 0
    )


def test_approving_from_the_page_applies_and_verifies_the_plan(phone: Phone) -> None:
    """The approver's code on the page writes root's approval (approver's name in it and
    in the journal); the apply runs it and opsbot-verify says VERIFIED. The same link a
    second time is refused with a clear page, and nothing runs twice."""
    ct = phone.ct
    plan = propose(ct, "restart demo-web (page approval test)")
    url = phone.notice_for(plan["plan_id"], "carol")["approve_url"]
    done = phone.click(url, "--code", phone.code("carol"), "--reason", "seen on call")
    assert done["post"]["status"] == 200, done
    approval = json.loads(
        ct.run(["cat", f"/var/lib/opsbot-approvals/{plan['plan_id']}.approval"]).stdout
        or ct.run(
            ["sh", "-c", f"cat /var/lib/opsbot-approvals/used/{plan['plan_id']}*.approval"]
        ).stdout
    )
    assert approval["approver"] == "carol" and approval["sha256"] == plan["sha256"]
    assert wait_state(ct, plan["plan_id"], {"VERIFIED", "UNRESOLVED"}, timeout=90) == "VERIFIED"
    journal = ct.journal("-u", "opsbot-approver.service", "-o", "cat")
    assert plan["plan_id"] in journal and "carol" in journal
    again = phone.click(url, "--code", phone.code("carol"))
    assert again["get"]["status"] in (404, 410), again
    assert "used" in again["get"]["text"].lower() or "no longer" in again["get"]["text"].lower()


def test_a_reject_link_cannot_approve(phone: Phone) -> None:
    """The reject link, with a right code, rejects: a relay that saw it cannot make an
    approval of it. The plan is REJECTED and never runs."""
    ct = phone.ct
    plan = propose(ct, "restart demo-web (reject link test)")
    url = phone.notice_for(plan["plan_id"], "dave")["reject_url"]
    seen = phone.click(url)
    assert "reject" in seen["get"]["text"].lower()
    done = phone.click(url, "--code", phone.code("dave"), "--reason", "not now")
    assert done["post"]["status"] == 200, done
    assert plan_state(ct, plan["plan_id"]) == "REJECTED"


# -- the page and the notifier hold no authority ---------------------------------------


def _as(ct: BootedSystemd, user: str, message: dict[str, object]) -> tuple[int, str]:
    status, out, err = send_raw(ct, json.dumps(message) + "\n", user=user, socket=APPROVER_SOCKET)
    return status, out + err


def test_the_web_user_cannot_approve_by_hand(phone: Phone) -> None:
    """As opsbot-web, by hand: forged and cross-plan tokens and wrong codes are refused by
    root's approver; writing an approval file is refused by the kernel; asking for fresh
    tokens (announce) is not the web's request; other users cannot reach the socket."""
    ct = phone.ct
    plan = propose(ct, "restart demo-web (attack test)")
    other = propose(ct, "restart demo-web (attack test, other plan)")
    token = phone.notice_for(plan["plan_id"], "alice")["approve_url"].rsplit("/", 1)[1]
    forged = "A" * 22
    for message, kind in (
        ({"v": 1, "op": "decide", "token": forged, "code": "123456", "confirm": "AAAA"}, "token"),
        ({"v": 1, "op": "decide", "token": token, "code": "000000", "confirm": "AAAA"}, "code"),
        ({"v": 1, "op": "announce"}, "request"),
    ):
        status, said = _as(ct, "opsbot-web", message)
        reply = json.loads(said.splitlines()[0])
        assert reply["op"] == "refused" and reply["kind"] == kind, (message, reply)
    # The kernel refuses the web user the approvals directory and the executor's store.
    for path in (f"/var/lib/opsbot-approvals/{plan['plan_id']}.approval", "/var/lib/opsbot/x"):
        wrote = ct.run(["sh", "-c", f"echo x > {path}"], user="opsbot-web", check=False)
        assert wrote.returncode != 0
    # Reading the TOTP secrets: root's only.
    read = ct.run(["cat", "/etc/opsbot/totp/alice"], user="opsbot-web", check=False)
    assert read.returncode != 0
    status, said = _as(ct, "mallory", {"v": 1, "op": "view", "token": token})
    assert status == 3, said  # connect refused: not in group opsbot-relay
    for plan_id in (plan["plan_id"], other["plan_id"]):
        assert plan_state(ct, plan_id) == "PROPOSED"


def test_the_page_cannot_turn_a_reject_into_an_approve(phone: Phone) -> None:
    """As opsbot-web (a subverted page): it saw erin's approve link of a plan opened on
    it; erin then rejects, typing her code and the reject link's confirmation. The page
    sends that code with the approve token: refused by root's approver (``confirm``),
    the plan still PROPOSED, no approval written. Her reject link still rejects."""
    ct = phone.ct
    plan = propose(ct, "restart demo-web (subverted page test)")
    notice = phone.notice_for(plan["plan_id"], "erin")
    approve_token = notice["approve_url"].rsplit("/", 1)[1]
    typed = {"code": phone.code("erin"), "confirm": notice["reject_confirm"]}
    status, said = _as(ct, "opsbot-web", {"v": 1, "op": "decide", "token": approve_token, **typed})
    reply = json.loads(said.splitlines()[0])
    assert (reply["op"], reply["kind"]) == ("refused", "confirm"), reply
    assert plan_state(ct, plan["plan_id"]) == "PROPOSED"
    approval = f"/var/lib/opsbot-approvals/{plan['plan_id']}.approval"
    assert ct.run(["test", "-e", approval], check=False).returncode != 0
    done = phone.click(notice["reject_url"], "--code", phone.code("erin"))
    assert done["post"]["status"] == 200, done
    assert plan_state(ct, plan["plan_id"]) == "REJECTED"


def test_a_local_user_reaches_the_page_only_through_the_proxy_as_herself(phone: Phone) -> None:
    """The attack on the old ``trusted_proxies = ["127.0.0.1"]``: any local user connected
    to the page and named any source in X-Forwarded-For (a new one per request lifts the
    limits; a forged one goes into the approver's audit). Now the page listens on its
    Unix socket, group www-data (the proxy's), 0660: mallory's connect is refused by the
    kernel, the proxy's group connects; through the proxy her forged X-Forwarded-For is
    replaced by her address, and that is the source root's approver logs."""
    ct = phone.ct
    listen = ct.run(["systemctl", "show", "-P", "Listen", "opsbot-web.socket"]).stdout
    assert listen.split()[0] == WEB_SOCKET, listen
    probe = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX); s.settimeout(3)\n"
        "try: s.connect(sys.argv[1]); print('connected')\n"
        "except OSError as e: print('refused', e.errno)\n"
    )
    mallory = ct.run([PYTHON, "-c", probe, WEB_SOCKET], user="mallory").stdout.strip()
    assert mallory == "refused 13", mallory  # EACCES
    proxy = ct.run([PYTHON, "-c", probe, WEB_SOCKET], user="www-data").stdout.strip()
    assert proxy == "connected", proxy
    plan = propose(ct, "restart demo-web (forged source test)")
    url = phone.notice_for(plan["plan_id"], "dave")["approve_url"]
    since = ct.run(["date", "+%Y-%m-%d %H:%M:%S"]).stdout.strip()
    tapped = ct.run(
        [
            PYTHON,
            f"{REPO}/testbed/inside/tap.py",
            url,
            "--code",
            "000000",
            "--confirm",
            "AAAA",
            "--source",
            "127.0.0.9",
            "--forwarded-for",
            "203.0.113.77",
        ],
        env={"PYTHONPATH": REPO},
        user="mallory",
        timeout=60,
    )
    assert json.loads(tapped.stdout)["post"]["status"] == 400, tapped.stdout
    said = ct.journal(
        "-u", "opsbot-approver.service", "--since", since, "-o", "json", "EVENT=request.refused"
    )
    refusals = [json.loads(line) for line in said.splitlines()]
    sources = {e.get("SOURCE") for e in refusals}
    assert sources == {"127.0.0.9"}, refusals
    assert plan_state(ct, plan["plan_id"]) == "PROPOSED"


def test_the_units_have_their_ip_filters_and_the_page_no_network(phone: Phone) -> None:
    """systemd's IP filters are set from the config (these containers do not enforce them:
    no cgroup BPF), and the page's service has no network of its own: from inside its
    namespace nothing is reachable, not even the receivers on the container's loopback."""
    ct = phone.ct
    show = ct.run(
        ["systemctl", "show", "-p", "IPAddressAllow,IPAddressDeny", "opsbot-notify.service"]
    ).stdout
    assert "IPAddressAllow=127.0.0.1/32\n" in show, show
    assert set(show.split("IPAddressDeny=")[1].split()) == {"0.0.0.0/0", "::/0"}, show
    sock = ct.run(["systemctl", "show", "-p", "IPAddressDeny", "opsbot-web.socket"]).stdout
    assert "0.0.0.0/0" in sock, sock
    private = ct.run(["systemctl", "show", "-P", "PrivateNetwork", "opsbot-web.service"])
    assert private.stdout.strip() == "yes"
    # Root's approver probes health targets before a rule restarts a running unit:
    # loopback only.
    approver = ct.run(
        ["systemctl", "show", "-p", "IPAddressAllow,IPAddressDeny", "opsbot-approver.service"]
    ).stdout
    allowed = approver.split("IPAddressAllow=")[1].split("\n")[0].split()
    assert set(allowed) == {"127.0.0.0/8", "::1/128"}, approver
    assert set(approver.split("IPAddressDeny=")[1].split()) == {"0.0.0.0/0", "::/0"}, approver
    # Wake the page and look from its own network namespace.
    phone.click(f"{PAGE}/p/" + "B" * 22)
    pid = ct.run(["systemctl", "show", "-P", "MainPID", "opsbot-web.service"]).stdout.strip()
    assert pid not in ("", "0")
    probe = (
        "import socket,sys\n"
        "s=socket.socket(); s.settimeout(3)\n"
        "try: s.connect(('127.0.0.1', int(sys.argv[1]))); print('connected')\n"
        "except OSError as e: print('refused', e.errno)\n"
    )
    inside = ct.run(
        ["nsenter", "-t", pid, "-n", PYTHON, "-c", probe, "9099"], check=False
    ).stdout.strip()
    assert inside.startswith("refused"), inside
    routes = ct.run(["nsenter", "-t", pid, "-n", "ip", "route"], check=False).stdout.strip()
    assert routes == "", routes
    outside = ct.run([PYTHON, "-c", probe, "9099"]).stdout.strip()
    assert outside == "connected"


def test_notify_test_sends_from_the_notifier_s_sandbox_and_says_each_answer(
    phone: Phone,
) -> None:
    """Root runs `opsbot notify test`: the signed webhook, carol's Apprise channel and the
    mail each get a test message, and the console says each delivered (exit 0). It was
    sent by opsbot-notify in its own sandbox (the journal's notify.sent entries are the
    notifier user's), the webhook's body is the test event, with no link. One channel by
    name with --json; a channel the config does not name is a usage error (exit 2)."""
    ct = phone.ct
    since = ct.run(["date", "+%Y-%m-%d %H:%M:%S"]).stdout.strip()
    before = len(phone.hooks())
    done = opsbot(ct, "notify", "test", check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.splitlines() == [
        "hook (webhook): delivered",
        "chat (apprise): delivered",
        "mail (email): delivered",
        "3 channels delivered",
    ], done.stdout
    [body] = [m for m in phone.hooks()[before:] if m.get("event") == "test"]
    assert body["channel"] == "hook" and "approve_url" not in body, body
    notifier = ct.run(["id", "-u", "opsbot-notify"]).stdout.strip()
    sent = [
        json.loads(line)
        for line in ct.journal(
            "EVENT=notify.sent", "PLAN_ID=test", "--since", since, "-o", "json"
        ).splitlines()
    ]
    assert {entry["CHANNEL"] for entry in sent} == {"hook", "chat", "mail"}, sent
    assert {entry["_UID"] for entry in sent} == {notifier}, sent
    one = opsbot(ct, "notify", "test", "hook", "--json")
    assert json.loads(one.stdout) == [
        {"channel": "hook", "kind": "webhook", "delivered": True, "said": "delivered"}
    ]
    unknown = opsbot(ct, "notify", "test", "hok", check=False)
    assert unknown.returncode == 2, (unknown.stdout, unknown.stderr)
    assert "no channel 'hok' in [notify.channels]" in unknown.stderr


def test_a_channel_that_is_down_is_logged_and_holds_nothing_up(phone: Phone) -> None:
    """With the webhook receiver and the mail server down, a plan is still stored at once
    (the executor knows nothing of the notifier); opsbot-notify tries each channel a
    bounded number of times and logs notify.failed for the plan, in the journal."""
    ct = phone.ct
    ct.systemctl("stop", "test-receivers.service")
    try:
        plan = propose(ct, "restart demo-web (channels down)")
        assert plan_state(ct, plan["plan_id"]) == "PROPOSED"

        def failures() -> set[str]:
            entries = ct.journal(
                "-u",
                "opsbot-notify.service",
                "EVENT=notify.failed",
                f"PLAN_ID={plan['plan_id']}",
                "-o",
                "json",
            )
            return {json.loads(line).get("CHANNEL", "") for line in entries.splitlines()}

        failed = ct.wait_for(
            lambda: failures() >= {"hook", "mail"},
            timeout=60,
            interval=0.5,
            what="notify.failed for both channels",
        )
        assert failed
    finally:
        start_receivers(phone)


def test_a_flood_of_plans_from_the_diagnose_user_shuts_no_link(phone: Phone) -> None:
    """As opsbot-diagnose (subverted): 300 valid plans as fast as the executor answers,
    with the waiting caps lowered to what a host would set. The executor stores no more
    than its cap and rejects the rest saying which cap; opsbot-notify sends alice one
    digest, not a message a plan; the approver's state stays far under its 8 MiB limit;
    and alice's link, sent before the flood, still approves her plan."""
    ct = phone.ct
    mine = propose(ct, "restart demo-web (alice's plan, before the flood)")
    notice = phone.notice_for(mine["plan_id"], "alice")
    hooks_before = len(phone.hooks())
    ct.write_file(CONFIG, PHONE_CONFIG.replace(CAPS, FLOOD_CAPS))
    try:
        flood = json.loads(
            ct.run(
                [
                    PYTHON,
                    f"{REPO}/testbed/inside/plan_flood.py",
                    EXECUTOR,
                    "300",
                    "demo-db.service",
                ],
                user="opsbot-diagnose",
                env={"PYTHONPATH": REPO},
                timeout=300,
            ).stdout
        )
        assert flood["verdicts"].get("ACCEPT", 0) <= 25, flood
        assert flood["verdicts"]["REJECT"] >= 275, flood
        assert "plans already wait for approval" in flood["first_reject"], flood
        ct.run(["systemctl", "start", "opsbot-notify.service"], timeout=300, check=False)
        # The questions put to her (news of other tests' plans ending may come meanwhile).
        to_alice = [
            m
            for m in phone.hooks()[hooks_before:]
            if m.get("approver") == "alice"
            and m.get("event") in ("plan.proposed", "plans.proposed")
        ]
        assert len(to_alice) <= 3, [m.get("event") for m in to_alice]
        size = int(ct.run(["stat", "-c", "%s", APPROVER_STATE]).stdout)
        assert size < 1024 * 1024, size
        done = phone.click(notice["approve_url"], "--code", phone.code("alice"))
        assert done["post"]["status"] == 200, done
        assert plan_state(ct, mine["plan_id"]) in ("APPROVED", "APPLYING", "APPLIED", "VERIFIED")
    finally:
        ct.write_file(CONFIG, PHONE_CONFIG)


#: A shadow rule that reaches the burst's unit: each plan is put to the rules, and each
#: decision journaled (rules.decided), whatever it is.
BURST_RULE = """
[[approve.rule]]
name = "burst-shadow"
mode = "shadow"
tools = ["restart_unit"]
units = ["demo-db.service"]
"""
#: systemd's "Starting UNIT..." (SD_MESSAGE_UNIT_STARTING): one for each start of a unit.
UNIT_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"
WATCHERS = ("opsbot-notify.service", "opsbot-rules.service")
BURST_TIMERS = ("opsbot-notify-burst.timer", "opsbot-rules-burst.timer")


def _idle(ct: BootedSystemd, unit: str) -> bool:
    """Neither running (a oneshot) nor armed (a timer)."""
    state = ct.systemctl("show", "-P", "ActiveState", unit).stdout.strip()
    return state not in ("activating", "active")


def _since(ct: BootedSystemd, cursor: str) -> list[dict[str, Any]]:
    """Every journal entry after ``cursor`` (matched here, not by journalctl: with
    --after-cursor, its matches skip an entry now and then on this systemd)."""
    out = ct.journal(f"--after-cursor={cursor}", "-o", "json")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _starts(entries: list[dict[str, Any]], unit: str) -> int:
    """How many times systemd started ``unit`` in ``entries``."""
    return sum(e.get("MESSAGE_ID") == UNIT_STARTING and e.get("UNIT") == unit for e in entries)


def _words(entries: list[dict[str, Any]], unit: str, event: str, key: str) -> set[str]:
    """Every word of field ``key`` of the ``event`` entries ``unit`` logged."""
    return {
        word
        for e in entries
        if e.get("_SYSTEMD_UNIT") == unit and e.get("EVENT") == event
        for word in str(e.get(key, "")).split()
    }


def test_a_burst_of_plans_is_told_and_put_to_the_rules_by_one_run_of_each(phone: Phone) -> None:
    """Twenty plans stored over ten seconds (the diagnose user's, one every half second):
    each is put to the standing rules and announced to the approvers, none left to the
    units' catch-up timers; and opsbot-notify.service starts once or twice for the burst
    (its path unit arms a timer at the burst's first plan), not again at the first file
    the store writes after each run, which kept a notifier starting on one of the host's
    cores for as long as a burst lasted. opsbot-rules.service starts at most twice: not
    at all while root's approver runs and watches the store itself."""
    ct = phone.ct
    ct.write_file(CONFIG, PHONE_CONFIG + BURST_RULE)
    try:
        # The count starts once what earlier tests set going has ended.
        ct.wait_for(
            lambda: all(_idle(ct, unit) for unit in (*WATCHERS, *BURST_TIMERS)),
            timeout=150,
            interval=0.5,
            what="opsbot-notify and opsbot-rules idle",
        )
        cursor = ct.run(["journalctl", "--show-cursor", "-n", "0", "-q"]).stdout
        cursor = cursor.strip().split("cursor: ")[-1]
        flood = json.loads(
            ct.run(
                [
                    PYTHON,
                    f"{REPO}/testbed/inside/plan_flood.py",
                    EXECUTOR,
                    "20",
                    "demo-db.service",
                    "0.5",
                ],
                user="opsbot-diagnose",
                env={"PYTHONPATH": REPO},
                timeout=120,
            ).stdout
        )
        stored = set(flood["plan_ids"])
        assert len(stored) == 20, flood

        left: dict[str, set[str]] = {}

        def done() -> bool:
            report = json.loads(opsbot(ct, "policy", "report", "--json").stdout)
            ruled = {decision["plan_id"] for decision in report["recent"]}
            told = _words(_since(ct, cursor), "opsbot-approver.service", "plans.announced", "PLANS")
            left["not ruled"], left["not told"] = stored - ruled, stored - told
            return not any(left.values())

        # Well within the catch-up timers' minute or two: the path units told each.
        with contextlib.suppress(TimeoutError):
            ct.wait_for(done, timeout=45, interval=0.5)
        assert not any(left.values()), (
            {k: len(v) for k, v in left.items()},
            ct.journal(f"--after-cursor={cursor}", "-u", "opsbot-rules", "-u", "opsbot-approver")[
                -4000:
            ],
        )
        entries = _since(ct, cursor)
        assert 1 <= _starts(entries, "opsbot-notify.service") <= 2, _starts(
            entries, "opsbot-notify.service"
        )
        assert _starts(entries, "opsbot-rules.service") <= 2, _starts(
            entries, "opsbot-rules.service"
        )
    finally:
        ct.write_file(CONFIG, PHONE_CONFIG)
