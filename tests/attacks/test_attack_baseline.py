"""Attack round five (issue 39): a poisoned last-known-good baseline.

The attacker is the diagnose user (a subverted diagnosis, cleaned up since or not). The
baseline directory, /var/lib/opsbot-diagnose/baseline, is its own: it leaves there a
snapshot in the very shape a healthy host leaves, which says that, while the host was
healthy, orders-api reached ledger-export. Nothing else links them: ledger-export is a
batch job the operator stopped on purpose (inactive, Result=success; starting it during
the migration it waits for would write into a half-migrated database).

Then a real fault: orders-api is killed. An honest diagnosis, of the honest code, reads
the poison as memory: ledger-export, "down" and reached by orders-api when healthy, is
the deepest failing unit, so it blames it and proposes to start it first. That is the
bite, asserted here. A standing rule in enforce that reaches both units does not approve
that plan: root reads ledger-export itself (inactive after a clean stop, no health
target of its own: no failure), whatever the plan says; the plan waits for a human, and
ledger-export stays stopped.

What the poison cannot be kept from doing: a forged edge to a unit that really failed
puts that unit in the plan (the honest baseline's very use: a backend down now, linked to
its client by memory alone). A rule then approves only what it would approve of a plan
the diagnose user wrote itself: a step on a unit root reads failing, within the unit's
budget. The units, the poison and the rule are made here; no product code knows them.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, diagnose
from tests.attacks.inside import (
    CONFIG,
    approval_path,
    cli,
    detail,
    edited_file,
    invocation,
    reject_quietly,
    retire_plans_of,
    ruled,
)

BASELINE_DIR = "/var/lib/opsbot-diagnose/baseline"
DIAGNOSE_USER = "opsbot-diagnose"
UNIT = "[Unit]\nDescription={what}\n[Service]\nExecStart=/bin/sleep infinity\n"
ALLOWED = 'start_unit = ["demo-web.service", "demo-db.service", "demo-flaky.service"]'


@dataclass(frozen=True)
class Shop:
    """orders-api (the app that fails), ledger-export (stopped on purpose) and the
    poison that links them."""

    app: str
    paused: str
    port: int
    #: When the forged snapshot says the host was healthy: ten minutes before the test.
    taken_at: datetime

    @property
    def poison_path(self) -> str:
        return f"{BASELINE_DIR}/snapshot-{self.taken_at:%Y%m%dT%H%M%S%fZ}.json"

    @property
    def allowed(self) -> str:
        """TEST_CONFIG with both units in [executor.allow] start_unit."""
        config = TEST_CONFIG.replace(
            ALLOWED, ALLOWED.replace("]", f', "{self.app}", "{self.paused}"]')
        )
        assert config != TEST_CONFIG, "the tests' allowlist changed"
        return config

    @property
    def ruled(self) -> str:
        """With an enforce rule that starts either unit."""
        return (
            self.allowed
            + f"""
[[approve.rule]]
name = "shop-starts"
mode = "enforce"
tools = ["start_unit"]
units = ["{self.app}", "{self.paused}"]
max_per_unit = 3
period = "24h"
"""
        )

    def poison(self) -> str:
        """A snapshot as a healthy host leaves one, but for the edge no one ever saw."""
        endpoint = f"127.0.0.1:{self.port}"
        return json.dumps(
            {
                "taken_at": self.taken_at.isoformat(),
                "units": {self.app: "active/running", self.paused: "active/running"},
                "listeners": [{"unit": self.paused, "endpoint": endpoint}],
                "edges": [
                    {
                        "client": self.app,
                        "server": self.paused,
                        "endpoint": endpoint,
                        "source": "observed",
                    }
                ],
                "health": {},
            }
        )


@pytest.fixture
def shop(opsbot: BootedSystemd) -> Iterator[tuple[BootedSystemd, Shop]]:
    ct = opsbot
    tag = secrets.token_hex(3)
    s = Shop(
        app=f"orders-api-{tag}.service",
        paused=f"ledger-export-{tag}.service",
        port=47000 + secrets.randbelow(1000),
        taken_at=datetime.now(UTC) - timedelta(minutes=10),
    )
    paths = [f"/etc/systemd/system/{unit}" for unit in (s.app, s.paused)]
    ct.write_file(paths[0], UNIT.format(what="the shop's orders API"))
    ct.write_file(paths[1], UNIT.format(what="the nightly ledger export, paused for a migration"))
    ct.systemctl("daemon-reload")
    ct.systemctl("start", s.app, s.paused)
    ct.systemctl("stop", s.paused)  # the operator pauses it: inactive, Result=success
    try:
        with edited_file(ct, CONFIG, s.allowed):
            yield ct, s
    finally:
        waiting = json.loads(cli(ct, "plans", "--state", "proposed,approved", "--json").stdout)
        reject_quietly(ct, *(p["plan_id"] for p in waiting if {s.app, s.paused} & set(p["units"])))
        retire_plans_of(ct, s.app, s.paused)
        ct.run(["rm", "-f", s.poison_path, *paths])
        ct.systemctl("stop", s.app, s.paused, check=False)
        ct.systemctl("reset-failed", s.app, s.paused, check=False)
        ct.systemctl("daemon-reload")


def write_poison(ct: BootedSystemd, s: Shop) -> None:
    """As the diagnose user, with nothing but its own rights: the forged snapshot, 0600 in
    its 0700 directory, as the baseline verb writes one."""
    ct.run(["mkdir", "-p", "-m", "0700", BASELINE_DIR], user=DIAGNOSE_USER)
    ct.run(["tee", s.poison_path], user=DIAGNOSE_USER, input=s.poison())
    ct.run(["chmod", "0600", s.poison_path], user=DIAGNOSE_USER)


def kill(ct: BootedSystemd, unit: str) -> None:
    ct.systemctl("kill", "--kill-who=main", "-s", "KILL", unit)
    ct.wait_for(
        lambda: ct.systemctl("is-failed", unit, check=False).returncode == 0,
        timeout=15,
        interval=0.2,
        what=f"{unit} failed",
    )


def diagnosed(ct: BootedSystemd, unit: str) -> tuple[str, list[tuple[str, str, str]]]:
    """An operator's ``opsbot diagnose UNIT``: the plan it proposed, and its steps as
    (tool, unit, reason)."""
    result = json.loads(diagnose(ct, unit, "--json", user="olivia").stdout)
    verdict = result["verdict"]
    assert verdict["kind"] == "plan", verdict
    plan_id = str(verdict["plan_id"])
    steps = detail(ct, plan_id)["plan"]["steps"]
    return plan_id, [(s["tool"], s["args"]["unit"], s.get("reason") or "") for s in steps]


def test_a_poisoned_baseline_misleads_the_diagnosis_but_no_rule_approves_what_it_built(
    shop: tuple[BootedSystemd, Shop],
) -> None:
    """1. Without the poison (no rule yet), orders-api killed: the diagnosis proposes to
    start orders-api alone.
    2. The diagnose user writes the poison; a rule in enforce reaches both units; the
    same fault, diagnosed again by the honest code: the plan blames ledger-export and
    starts it first, on the poison's word (its reason quotes the forged edge).
    3. The rule does not approve it: root reads ledger-export inactive after a clean
    stop; the plan waits for a human, no approval is written, ledger-export stays
    stopped."""
    ct, s = shop
    kill(ct, s.app)
    honest_id, honest = diagnosed(ct, s.app)
    assert [(tool, unit) for tool, unit, _ in honest] == [("start_unit", s.app)], honest
    reject_quietly(ct, honest_id)

    write_poison(ct, s)
    ct.write_file(CONFIG, s.ruled)
    plan_id, steps = diagnosed(ct, s.app)
    assert [(tool, unit) for tool, unit, _ in steps] == [
        ("start_unit", s.paused),
        ("start_unit", s.app),
    ], steps
    said = (
        f"{s.paused} was active/running, listening on 127.0.0.1:{s.port}, reached by {s.app}; "
        "now it is inactive/dead."
    )
    assert said in steps[0][2], steps[0][2]

    before = invocation(ct, s.paused)
    decision = ruled(ct, plan_id)
    assert decision["outcome"] == "for humans", decision
    assert decision["refused"] == [
        f"shop-starts: root reads no failure of {s.paused} now ({s.paused} is inactive/dead "
        "(Result=success), no health target of its own): the plan's own words are not "
        "evidence; it waits for a human"
    ], decision
    assert not (ct.root / approval_path(plan_id).lstrip("/")).exists()
    assert detail(ct, plan_id)["summary"]["state"] == "PROPOSED"
    assert ct.systemctl("is-active", s.paused, check=False).stdout.strip() == "inactive"
    assert invocation(ct, s.paused) == before
