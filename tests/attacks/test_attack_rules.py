"""Attack round four: a standing rule acts on what root's side reads, never on the words
of the plan the diagnose user wrote.

The attacker is the diagnose user (a subverted diagnosis): it may submit any plan the
executor accepts, with any symptom, cause and precondition. Root's config has an enforce
rule that restarts a unit; the unit runs and answers its health target. Before this
round the rule approved a restart of it, since the precondition (``active``) held and the
symptom said it was killed; and a second rule reaching it gave twice the budget.

The unit, its port and the rules are made here; no product code knows them.
"""

from __future__ import annotations

import json
import secrets
import socket
from collections.abc import Iterator

import pytest

from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, restart_plan, submit, wait_state
from tests.attacks.inside import (
    CONFIG,
    approval_path,
    cli,
    edited_file,
    invocation,
    retire_plans_of,
    ruled,
)

#: A plan that will not change by itself any more, once its steps ran.
JUDGED = {"VERIFIED", "UNRESOLVED", "FAILED", "STALE"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Victim:
    """A unit that serves HTTP on loopback, its health target, and two enforce rules that
    reach it with one restart each."""

    def __init__(self) -> None:
        self.unit = f"ledger-{secrets.token_hex(3)}.service"
        self.port = _free_port()
        self.config = (
            TEST_CONFIG.replace(
                'restart_unit = ["demo-web.service", "demo-db.service"]',
                f'restart_unit = ["demo-web.service", "demo-db.service", "{self.unit}"]',
            )
            + f"""
[diagnose.health.ledger]
url = "http://127.0.0.1:{self.port}/"
unit = "{self.unit}"
timeout_seconds = 1

[[approve.rule]]
name = "ledger-restarts"
mode = "enforce"
tools = ["restart_unit"]
units = ["{self.unit}"]
max_per_unit = 1
period = "24h"

[[approve.rule]]
name = "ledger-again"
mode = "enforce"
tools = ["restart_unit"]
units = ["ledger-*.service"]
max_per_unit = 1
period = "24h"
"""
        )
        assert self.unit in self.config.split("[diagnose")[0]

    def unit_file(self) -> str:
        return (
            "[Unit]\nDescription=an app the attacker wants restarted\n[Service]\n"
            f"ExecStart=/usr/bin/python3 -m http.server {self.port} --bind 127.0.0.1 "
            "--directory /usr/share/doc\n"
        )


@pytest.fixture
def victim(opsbot: BootedSystemd) -> Iterator[tuple[BootedSystemd, Victim]]:
    ct, v = opsbot, Victim()
    path = f"/etc/systemd/system/{v.unit}"
    ct.write_file(path, v.unit_file())
    ct.systemctl("daemon-reload")
    ct.systemctl("start", v.unit)
    ct.wait_for(lambda: answers(ct, v), timeout=30, interval=0.2, what=f"{v.unit} answering")
    with edited_file(ct, CONFIG, v.config):
        cli(ct, "polkit-rule", "--write")
        try:
            yield ct, v
        finally:
            waiting = json.loads(cli(ct, "plans", "--state", "proposed", "--json").stdout)
            for plan in waiting:
                if v.unit in plan["units"]:
                    cli(ct, "reject", plan["plan_id"], "--reason", "the attack is over")
            retire_plans_of(ct, v.unit)
    cli(ct, "polkit-rule", "--write")
    ct.systemctl("stop", v.unit, check=False)
    ct.run(["rm", "-f", path])
    ct.systemctl("daemon-reload")


def answers(ct: BootedSystemd, v: Victim) -> bool:
    got = ct.run(
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-m",
            "1",
            "-w",
            "%{http_code}",
            f"http://127.0.0.1:{v.port}/",
        ],
        check=False,
    )
    return got.stdout.strip() == "200"


def bait(ct: BootedSystemd, v: Victim) -> str:
    """As the diagnose user: a restart of the unit, whose precondition holds while it runs
    (``active``), with a symptom that says it was killed. The plan's id."""
    plan = restart_plan(v.unit, f"restart {v.unit} {secrets.token_hex(3)}", active_state=["active"])
    plan["symptom"] = {"unit": v.unit, "health": ["ledger"], "result": "signal"}
    reply = submit(ct, plan)
    assert reply["verdict"] == "ACCEPT", reply
    return str(reply["plan_id"])


def hang(ct: BootedSystemd, v: Victim) -> None:
    """The app hangs while systemd still says it runs: its server stops answering."""
    ct.systemctl("kill", "--kill-who=main", "-s", "STOP", v.unit)
    ct.wait_for(lambda: not answers(ct, v), timeout=30, interval=0.2, what=f"{v.unit} hung")


def test_a_rule_restarts_a_unit_only_when_root_reads_it_failing_within_one_budget(
    victim: tuple[BootedSystemd, Victim],
) -> None:
    """1. The unit runs and answers: the bait waits for a human, no approval is written,
    the unit is not restarted, and the record says what root read.
    2. The unit hangs (root's own probe of its health target times out): a rule approves
    the restart, which runs and holds.
    3. It hangs again: the first rule used the unit's one restart, and the second rule
    that reaches it does not add one: the plan waits for a human."""
    ct, v = victim
    before = invocation(ct, v.unit)

    first = bait(ct, v)
    decision = ruled(ct, first)
    assert decision["outcome"] == "for humans", decision
    assert decision["read"] == [
        f"{v.unit} is active/running (Result=success), health target ledger: ok"
    ], decision
    assert all("root reads no failure" in line for line in decision["refused"]), decision
    assert not (ct.root / approval_path(first).lstrip("/")).exists()
    assert invocation(ct, v.unit) == before
    assert wait_state(ct, first, {"PROPOSED"}) == "PROPOSED"

    hang(ct, v)
    second = bait(ct, v)
    decision = ruled(ct, second)
    assert (decision["outcome"], decision["rule"]) == ("approved", "ledger-restarts"), decision
    assert "health target ledger: timeout" in decision["read"][0], decision
    assert wait_state(ct, second, JUDGED, timeout=90) == "VERIFIED"
    assert invocation(ct, v.unit) != before and answers(ct, v)

    hang(ct, v)
    third = bait(ct, v)
    decision = ruled(ct, third)
    assert decision["outcome"] == "for humans", decision
    assert decision["refused"] == [
        f"{name}: the rules approved 1 plans of {v.unit} in the last 24h (max_per_unit 1, "
        "shared by every rule)"
        for name in ("ledger-restarts", "ledger-again")
    ], decision
    ct.systemctl("kill", "--kill-who=main", "-s", "CONT", v.unit)
