"""The approver on a real Unix socket, served from a thread, for the approver's tests.

Two sockets share one ApproverService: on ``notify`` the test's own uid is the notify
relay's, on ``web`` it is the web relay's (the daemon resolves both by user name, so the
test names itself for one and a user that is not it for the other). The clock, the
journal witness, the live state and the apply's words are injected; the store, the
root-owned approvals directory, the 0700 state directory and the credentials are real
files in tmp_path.
"""

from __future__ import annotations

import os
import pwd
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyotp

from approver_svc.daemon import Server
from approver_svc.service import ApproverService
from approver_svc.state import StateFile
from plans import Accepted, Analyzer, PlanRecord, PlanStore, WindowState, state_text
from shared_io.framing import exchange
from shared_schema import ExecutorPolicy, OpsbotConfig
from shared_schema._model import Model
from shared_schema.approver_socket import (
    MAX_APPROVER_REPLY_BYTES,
    Announce,
    Announced,
    ApproverReply,
    Decide,
    Decided,
    Link,
    Refused,
    View,
    Viewed,
    parse_approver_reply,
)
from shared_schema.config import ApproverSettings
from tests.unit.plans.helpers import NOW, POLICY, Clock, root_reads_failed, submitted

SECRETS = {"alice": pyotp.random_base32(), "bob": pyotp.random_base32()}
ME = pwd.getpwuid(os.getuid()).pw_name
#: A user that is not the test's (its uid is someone else's, whoever connects).
OTHER = "nobody" if ME != "nobody" else "root"


@dataclass
class Witness:
    """The journal: the sha256 the executor logged accepting, per plan id."""

    logged: dict[str, set[str]] = field(default_factory=dict)

    def __call__(self, plan_id: str) -> Accepted:
        return Accepted(frozenset(self.logged.get(plan_id, set())), NOW - timedelta(days=1))


@dataclass
class Bench:
    store: PlanStore
    approvals_dir: Path
    state_dir: Path
    clock: Clock
    witness: Witness
    service: ApproverService
    notify_socket: Path
    web_socket: Path
    applies_started: list[bool] = field(default_factory=list)
    #: Where root's requests go (the rules, the policy report and switch): the
    #: test's uid is neither relay's there.
    root_socket: Path | None = None
    #: Every link announced so far: plan id -> (approver, decision) -> link.
    announced: dict[str, dict[tuple[str, str], Link]] = field(default_factory=dict)

    def submit(self, record: PlanRecord | None = None, **plan: object) -> PlanRecord:
        """A plan diagnosis submitted, as the executor logged accepting it."""
        from tests.unit.plans.helpers import plan_of, step

        if record is None:
            unit = str(plan.get("unit", "nginx.service"))
            record = submitted(self.store, plan_of(step("restart_unit", unit)), self.clock())
        self.witness.logged.setdefault(record.plan_id, set()).add(record.sha256)
        return record

    def as_root(self, request: Model) -> ApproverReply:
        """``request`` as root sends it (opsbot-rules.service, ``opsbot policy``)."""
        assert self.root_socket is not None
        return self.ask(self.root_socket, request)

    def ask(self, path: Path, request: Model) -> ApproverReply:
        line = exchange(
            path,
            request.model_dump_json().encode() + b"\n",
            limit=MAX_APPROVER_REPLY_BYTES,
            timeout=10,
        )
        return parse_approver_reply(line)

    def announce(self) -> Announced:
        reply = self.ask(self.notify_socket, Announce())
        assert isinstance(reply, Announced), reply
        return reply

    def links(self, plan_id: str) -> dict[tuple[str, str], Link]:
        """The links announced for ``plan_id`` (announcing what waits, if it was not yet):
        (approver, decision) -> link."""
        if plan_id not in self.announced:
            for notice in self.announce().notices:
                links = {(link.approver, link.decision): link for link in notice.links}
                self.announced[notice.plan.plan_id] = links
        assert plan_id in self.announced, f"{plan_id} was not announced"
        return self.announced[plan_id]

    def code(self, approver: str = "alice", ahead: int = 0) -> str:
        """``approver``'s code now (or ``ahead`` steps later) by the bench's clock."""
        totp = pyotp.TOTP(SECRETS[approver])
        return totp.at(self.clock() + timedelta(seconds=30 * ahead))

    def confirm_of(self, token: str) -> str:
        """The confirmation the message showed beside ``token``'s link ("AAAA" for a
        token never announced: a forged one)."""
        for links in self.announced.values():
            for link in links.values():
                if link.token == token:
                    return link.confirm
        return "AAAA"

    def decide(
        self,
        token: str,
        code: str,
        reason: str = "",
        source: str = "192.0.2.7",
        confirm: str | None = None,
    ) -> Decided | Refused:
        """What the page relays when the human typed ``code`` and (by default) the
        confirmation beside this token's link."""
        confirm = self.confirm_of(token) if confirm is None else confirm
        reply = self.ask(
            self.web_socket,
            Decide(token=token, code=code, confirm=confirm, reason=reason, source=source),
        )
        assert isinstance(reply, Decided | Refused), reply
        return reply

    def view(self, token: str) -> Viewed | Refused:
        reply = self.ask(self.web_socket, View(token=token))
        assert isinstance(reply, Viewed | Refused), reply
        return reply

    def state_bytes(self) -> bytes:
        path = self.state_dir / "state.json"
        return path.read_bytes() if path.exists() else b""


def no_calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    raise AssertionError("a policy without apply windows asks systemd-analyze nothing")


@contextmanager
def serving(server: Server) -> Iterator[None]:
    thread = threading.Thread(target=server.serve, name="approver", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.stopping.set()
        thread.join(timeout=10)
        server.listener.close()
    assert not thread.is_alive(), "the approver did not stop"


def listening(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    return listener


@contextmanager
def bench(
    tmp_path: Path,
    store: PlanStore,
    approvals_dir: Path,
    approvers: tuple[str, ...] = ("alice", "bob"),
    policy: ExecutorPolicy = POLICY,
    analyze: Analyzer | None = None,
    config: OpsbotConfig | None = None,
) -> Iterator[Bench]:
    """The approver serving ``policy`` (the executor tests' one by default); ``analyze``
    stands in for systemd-analyze where the policy has apply windows."""
    state_dir = tmp_path / "approver-state"
    state_dir.mkdir(mode=0o700)
    os.chmod(state_dir, 0o700)
    credentials = tmp_path / "credentials"
    credentials.mkdir(mode=0o700)
    for name, secret in SECRETS.items():
        (credentials / f"totp_{name}").write_text(secret + "\n")
        (credentials / f"totp_{name}").chmod(0o400)  # as systemd writes a credential
    clock = Clock(NOW)
    witness = Witness()
    started: list[bool] = []

    def start_apply(busy: bool) -> tuple[str, bool]:
        started.append(busy)
        return "opsbot-apply.service starts now (opsbot-apply.path is active)", True

    def window_apply(window: WindowState, now: datetime) -> tuple[str, bool]:
        return f"applies {state_text(window, now)}: opsbot-apply.timer runs it then", True

    service = ApproverService(
        config=config
        or OpsbotConfig(
            executor=policy, approvers={name: ApproverSettings() for name in approvers}
        ),
        store=store,
        approvals_dir=approvals_dir,
        state=StateFile(state_dir),
        credentials=credentials,
        start_apply=start_apply,
        window_apply=window_apply,
        now=clock,
        witness=witness,
        apply_busy=lambda: False,
        read_state=lambda unit: f"{unit} is failed/failed (load: loaded)",
        read_units=root_reads_failed,
        host="testhost",
        analyze=analyze or no_calendar,
    )
    notify_path, web_path = tmp_path / "approver-notify.sock", tmp_path / "approver-web.sock"
    as_notify = Server(
        listening(notify_path),
        service,
        idle_timeout=0,
        notify_user=ME,
        web_user=OTHER,
        notify=False,
    )
    as_web = Server(
        listening(web_path),
        service,
        idle_timeout=0,
        notify_user=OTHER,
        web_user=ME,
        notify=False,
    )
    root_path = tmp_path / "approver-root.sock"
    as_root = Server(
        listening(root_path),
        service,
        idle_timeout=0,
        notify_user=OTHER,
        web_user=OTHER,
        notify=False,
    )
    with serving(as_notify), serving(as_web), serving(as_root):
        yield Bench(
            store,
            approvals_dir,
            state_dir,
            clock,
            witness,
            service,
            notify_path,
            web_path,
            started,
            root_socket=root_path,
        )
