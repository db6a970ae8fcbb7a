"""Approving from a phone, in a booted container: the config that names the channels and
approvers, the receivers an operator's side would run, and the verbs the tests use.

:func:`set_up_phone` turns the session's opsbot container into a host whose plans are
announced on a signed webhook and by mail (testbed/inside/receivers.py, in the container),
with three approvers provisioned by ``opsbot approvers add`` (each with a TOTP secret,
so each test can spend a code of its own: a code is usable once per approver). The page
(opsbot-web) listens on its Unix socket for the proxy's group (``[web] listen = "unix"``),
and the reverse proxy is nginx with the manual's own location block
(docs/operating.md, ``phone-nginx``), on 127.0.0.1:8750 instead of 443 with TLS.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyotp

from testbed.container import BootedSystemd
from testbed.host import PYTHON, REPO, TEST_CONFIG, invocation, opsbot, restart_plan, submit
from testbed.readme import OPERATING, block

WEBHOOK_PORT = 9099
SMTP_PORT = 2525
PROXY = "127.0.0.1:8750"
#: The links' base: the proxy's location, as an operator would publish it.
PAGE = f"http://{PROXY}/opsbot"
#: The proxy's group, which alone may connect to the page's socket.
PROXY_GROUP = "www-data"
PROXY_CONF = "/etc/opsbot-test-proxy/nginx.conf"
#: Where the receivers write what they got, inside the container (and under ct.root).
INBOX = "/srv/receivers"
HOOK_KEY = "/etc/opsbot/notify/hook"
#: carol's Apprise channel: a JSON POST to the receivers (a chat service's stand-in).
CHAT_URL = f"json://127.0.0.1:{WEBHOOK_PORT}/chat/carol"
#: erin's links are the flood's target (her wrong codes lock her, no one else).
APPROVERS = ("alice", "bob", "carol", "dave", "erin")

PHONE_CONFIG = (
    TEST_CONFIG
    + f"""
[notify]
link_base = "{PAGE}"
ip_allow = ["127.0.0.1"]
attempts = 3
timeout_seconds = 5

[notify.channels.hook]
kind = "webhook"
url = "http://127.0.0.1:{WEBHOOK_PORT}/opsbot"

[notify.channels.chat]
kind = "apprise"

[notify.channels.mail]
kind = "email"
host = "127.0.0.1"
port = {SMTP_PORT}
security = "none"
sender = "opsbot@ct.test"
to = ["alice@ct.test"]

[approvers.alice]
notify = ["hook", "mail"]

[approvers.bob]
notify = ["hook"]

[approvers.carol]
notify = ["hook", "chat"]

[approvers.dave]
notify = ["hook"]

[approvers.erin]
notify = ["hook"]

[web]
listen = "unix"
proxy_group = "{PROXY_GROUP}"
"""
)


def proxy_conf() -> str:
    """nginx's whole config for the test: the manual's block, served on ``PROXY``."""
    manual = block("phone-nginx", doc=OPERATING)
    served = manual.replace("listen 443 ssl;", f"listen {PROXY};")
    assert served != manual, "the manual's server no longer listens on 443"
    return (
        f"user {PROXY_GROUP};\n"
        "worker_processes 1;\n"
        "pid /run/opsbot-test-proxy.pid;\n"
        "error_log stderr warn;\n"
        "events { worker_connections 4096; }\n"
        "http {\n" + served + "}\n"
    )


def start_proxy(ct: BootedSystemd) -> None:
    """(Re)start the reverse proxy in front of the page's socket."""
    ct.write_file(PROXY_CONF, proxy_conf())
    ct.systemctl("stop", "test-proxy.service", check=False)
    ct.systemctl("reset-failed", "test-proxy.service", check=False)
    ct.run(["nginx", "-t", "-q", "-c", PROXY_CONF])
    ct.run(
        [
            "systemd-run",
            "--unit=test-proxy",
            "-p",
            "RuntimeMaxSec=3600",
            "nginx",
            "-c",
            PROXY_CONF,
            "-g",
            "daemon off;",
        ]
    )
    probe = (
        "import socket\n"
        "try: socket.create_connection(('127.0.0.1', 8750), 1).close(); print('up')\n"
        "except OSError: print('down')\n"
    )
    ct.wait_for(
        lambda: ct.run([PYTHON, "-c", probe]).stdout.strip() == "up",
        timeout=20,
        what="the proxy listening",
    )


SPENT: dict[str, int] = {}


@dataclass
class Phone:
    ct: BootedSystemd
    secrets: dict[str, str] = field(default_factory=dict)
    #: The last TOTP time step each approver spent (a code works once): one record for
    #: the whole test session, as the approver remembers steps by name across secrets.
    spent: dict[str, int] = field(default_factory=lambda: SPENT)

    @property
    def inbox(self) -> Path:
        return self.ct.root / INBOX.lstrip("/")

    def code(self, approver: str) -> str:
        """A TOTP code of ``approver`` not spent before: the current one, or (once this
        time step's was used) the next step's, which the approver accepts a step early."""
        totp = pyotp.TOTP(self.secrets[approver])
        step = int(time.time()) // 30
        if self.spent.get(approver, -1) >= step:
            step = self.spent[approver] + 1
            while step > int(time.time()) // 30 + 1:
                time.sleep(1)  # two codes spent within one step: wait for the next
        self.spent[approver] = step
        return totp.at(step * 30)

    def wrong_code(self, approver: str) -> str:
        """Six digits that are none of ``approver``'s codes from two steps ago to two steps
        ahead (the approver accepts one step either side): a mistyped code."""
        totp = pyotp.TOTP(self.secrets[approver])
        now = int(time.time()) // 30
        valid = {totp.at((now + step) * 30) for step in range(-2, 3)}
        return next(code for code in ("000000", "111111", "222222") if code not in valid)

    def hooks(self) -> list[dict[str, Any]]:
        """Every signed webhook message received so far, oldest first."""
        found = sorted(self.inbox.glob("hook-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text()) for p in found]

    def refused(self) -> list[str]:
        return [p.read_text() for p in sorted(self.inbox.glob("refused-*.txt"))]

    def chats(self) -> list[dict[str, Any]]:
        """Every message carol's Apprise channel delivered, oldest first: its JSON."""
        found = sorted(self.inbox.glob("chat-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text())["body"] for p in found]

    def mails(self) -> list[str]:
        return [p.read_text() for p in sorted(self.inbox.glob("mail-*.eml"))]

    def notice_for(self, plan_id: str, approver: str, timeout: float = 150) -> dict[str, Any]:
        """The signed webhook message to ``approver`` announcing ``plan_id`` (waits). A plan
        stored in the moment opsbot-notify.service ends a run is not seen by its path
        unit (the oneshot was still active): opsbot-notify.timer tells it within two
        minutes of that run, as on any host; the wait allows for it."""

        def found() -> dict[str, Any] | None:
            for message in self.hooks():
                if message.get("plan_id") == plan_id and message.get("approver") == approver:
                    return message
            return None

        got = self.ct.wait_for(found, timeout=timeout, interval=0.3, what=f"notice of {plan_id}")
        assert got is not None
        return got

    def confirm_for(self, url: str) -> str:
        """The confirmation the message showed beside the link ``url``."""
        for message in self.hooks():
            for decision in ("approve", "reject"):
                if message.get(f"{decision}_url") == url:
                    return str(message[f"{decision}_confirm"])
        raise AssertionError(f"no message showed the link {url}")

    def typed(self, url: str, args: tuple[str, ...]) -> list[str]:
        """``args`` as the human types them: with a code, the link's confirmation too."""
        if "--code" in args and "--confirm" not in args:
            return [*args, "--confirm", self.confirm_for(url)]
        return list(args)

    def click(self, url: str, *args: str) -> dict[str, Any]:
        """testbed/inside/tap.py URL ARGS inside the container: its JSON. With
        ``--code``, the confirmation beside the link is typed too (unless given)."""
        done = self.ct.run(
            [PYTHON, f"{REPO}/testbed/inside/tap.py", url, *self.typed(url, args)],
            env={"PYTHONPATH": REPO},
            timeout=60,
        )
        said: dict[str, Any] = json.loads(done.stdout)
        return said


def set_up_phone(ct: BootedSystemd) -> Phone:
    ct.write_file("/etc/opsbot/opsbot.toml", PHONE_CONFIG)
    ct.run(["install", "-d", "-m", "0700", "/etc/opsbot/notify"])
    ct.write_file(HOOK_KEY, "webhook-key-of-this-test\n", mode=0o600)
    ct.write_file("/etc/opsbot/notify/chat", CHAT_URL + "\n", mode=0o600)
    phone = Phone(ct)
    for name in APPROVERS:
        said = json.loads(opsbot(ct, "approvers", "add", name, "--replace", "--json").stdout)
        uri = urlparse(said["uri"])
        phone.secrets[name] = parse_qs(uri.query)["secret"][0]
    opsbot(ct, "firewall", "--write")
    start_receivers(phone)
    # The approver and the page read the config when they start; the socket moves to
    # /run/opsbot/web.sock (the listen drop-in firewall --write wrote).
    ct.systemctl("stop", "opsbot-web.service")
    ct.systemctl("restart", "opsbot-web.socket")
    start_proxy(ct)
    ct.systemctl("stop", "opsbot-web.service", "opsbot-approver.service", check=False)
    # Plans earlier tests left waiting are announced now, as on a host where approvers
    # were just configured (each run takes up to 100 of them, newest first).
    for _ in range(3):
        ct.run(["systemctl", "start", "opsbot-notify.service"], timeout=600, check=False)
    return phone


def start_receivers(phone: Phone) -> None:
    """(Re)start the operator's webhook receiver and SMTP server (an empty inbox)."""
    ct = phone.ct
    ct.run(["rm", "-rf", INBOX])
    ct.systemctl("stop", "test-receivers.service", check=False)
    ct.systemctl("reset-failed", "test-receivers.service", check=False)
    ct.run(
        [
            "systemd-run",
            "--unit=test-receivers",
            "-p",
            "RuntimeMaxSec=1200",
            "-p",
            f"Environment=PYTHONPATH={REPO}",
            PYTHON,
            f"{REPO}/testbed/inside/receivers.py",
            INBOX,
            HOOK_KEY,
            str(WEBHOOK_PORT),
            str(SMTP_PORT),
        ]
    )
    ct.wait_for(lambda: (phone.inbox / "ready").exists(), timeout=20, what="receivers ready")


def tear_down_phone(ct: BootedSystemd) -> None:
    ct.systemctl("stop", "test-receivers.service", "test-proxy.service", check=False)
    ct.write_file("/etc/opsbot/opsbot.toml", TEST_CONFIG)
    opsbot(ct, "firewall", "--write")
    ct.systemctl("stop", "opsbot-web.service", "opsbot-approver.service", check=False)
    ct.systemctl("restart", "opsbot-web.socket", check=False)


def clean_slate(ct: BootedSystemd) -> None:
    """Reject what earlier stories on this shared host left waiting, and wait for an
    apply that runs now to end: a plan of theirs applied later would restart a unit a
    test's pinned plan expects untouched, and make it STALE."""
    waiting = opsbot(ct, "plans", "--state", "proposed,approved", "--limit", "5000", "--json")
    for plan in json.loads(waiting.stdout):
        opsbot(ct, "reject", plan["plan_id"], "--reason", "a clean slate for the next story")
    ct.wait_for(
        lambda: (
            ct.systemctl("show", "-P", "ActiveState", "opsbot-apply.service").stdout.strip()
            != "activating"
        ),
        timeout=120,
        what="no apply running",
    )


def propose(ct: BootedSystemd, goal: str, unit: str = "demo-web.service") -> dict[str, str]:
    """A plan stored as diagnosis stores one (restart ``unit``, pinned to its invocation):
    its id and sha256."""
    reply = submit(ct, restart_plan(unit, goal, invocation_id=invocation(ct, unit)))
    assert reply["verdict"] == "ACCEPT", reply
    return {"plan_id": str(reply["plan_id"]), "sha256": str(reply["sha256"])}
