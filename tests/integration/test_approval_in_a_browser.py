"""An approver at their phone, played by a real browser (Debian's chromium, headless,
driven by Selenium through Debian's chromedriver) inside the booted container: the link
from the notification opens the plan page (argv, the whole sha256), the TOTP code approves
it, and the plan is applied and verified. A visit without a click changes nothing; the
used link is refused with a clear page. The plan page's screenshot is saved under build/.

Then the page, behind the manual's nginx on its Unix socket, under a flood from one source
address: the approver, from another address, still gets through within 2 s, the page
stays small, and nothing is approved that no approver approved.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from testbed.host import PYTHON, REPO, plan_state, wait_state
from testbed.phone import PAGE, Phone, propose

BUILD = Path(__file__).resolve().parents[2] / "build"
SHOTS = "/srv/shots"


def _browse(phone: Phone, url: str, shot: str, *args: str) -> dict[str, Any]:
    phone.ct.run(["mkdir", "-p", SHOTS])
    done = phone.ct.run(
        [
            PYTHON,
            f"{REPO}/testbed/inside/browser.py",
            url,
            "--screenshot",
            shot,
            *phone.typed(url, args),
        ],
        env={"HOME": "/root", "SE_OFFLINE": "true"},
        timeout=120,
    )
    said: dict[str, Any] = json.loads(done.stdout)
    return said


def _approval_exists(phone: Phone, plan_id: str) -> bool:
    found = phone.ct.run(
        [
            "sh",
            "-c",
            f"ls /var/lib/opsbot-approvals/{plan_id}.approval "
            f"/var/lib/opsbot-approvals/used/{plan_id}*.approval",
        ],
        check=False,
    )
    return bool(found.stdout.strip())


def test_an_approver_approves_in_a_real_browser(phone: Phone) -> None:
    """The notification's link in chromium: the page shows the step's argv and the whole
    sha256; the approver types the code and presses Approve; the answer page says it is
    approved, and the plan goes on to VERIFIED. The screenshot of the plan page is
    build/approval-page.png."""
    ct = phone.ct
    plan = propose(ct, "restart demo-web after it crashed (browser test)")
    url = phone.notice_for(plan["plan_id"], "alice")["approve_url"]
    shot = f"{SHOTS}/plan.png"
    said = _browse(phone, url, shot, "--code", phone.code("alice"), "--reason", "on call")
    page = said["plan"]
    assert plan["sha256"] in page, page
    assert "demo-web.service" in page and "restart" in page
    assert "alice" in page
    assert "approved" in said["answer"].lower(), said["answer"]
    BUILD.mkdir(exist_ok=True)
    shutil.copyfile(ct.root / shot.lstrip("/"), BUILD / "approval-page.png")
    assert (BUILD / "approval-page.png").stat().st_size > 10_000
    assert wait_state(ct, plan["plan_id"], {"VERIFIED", "UNRESOLVED"}, timeout=90) == "VERIFIED"
    # The same link again, in the browser: refused, with a page that says so.
    again = _browse(phone, url, f"{SHOTS}/used.png")
    assert "used" in again["plan"].lower() or "no longer" in again["plan"].lower(), again


def test_opening_a_link_without_a_click_changes_nothing(phone: Phone) -> None:
    """The browser opens the approve link (as a chat's preview would) and does nothing
    more: the plan is still PROPOSED, no approval exists, and the link still works."""
    ct = phone.ct
    plan = propose(ct, "restart demo-web (browser visit test)")
    url = phone.notice_for(plan["plan_id"], "bob")["approve_url"]
    said = _browse(phone, url, f"{SHOTS}/visit.png")
    assert plan["sha256"] in said["plan"]
    assert plan_state(ct, plan["plan_id"]) == "PROPOSED"
    assert not _approval_exists(phone, plan["plan_id"])
    assert phone.click(url)["get"]["status"] == 200


def test_a_flood_from_one_source_does_not_keep_the_approver_out(phone: Phone) -> None:
    """500 new connections a second for 20 s from 127.0.0.66 (unknown links, random codes
    on a real link of erin's, garbage, slow clients), bounded, while the approver approves
    from 127.0.0.2: their click goes through within 2 s, the page's RSS stays under 80 MB,
    the plan the flood aimed codes at is not approved and its link is burned. The figures
    go to build/flood.json."""
    ct = phone.ct
    victim = propose(ct, "restart demo-web (flood victim)")
    wanted = propose(ct, "restart demo-web (flood, the approver's plan)", unit="demo-db.service")
    victim_url = phone.notice_for(victim["plan_id"], "erin")["approve_url"]
    wanted_url = phone.notice_for(wanted["plan_id"], "bob")["approve_url"]
    assert phone.click(f"{PAGE}/p/{'C' * 22}")["get"]["status"] in (404, 410)
    pid = ct.run(["systemctl", "show", "-P", "MainPID", "opsbot-web.service"]).stdout.strip()
    done = ct.run(
        [
            PYTHON,
            f"{REPO}/testbed/inside/flood.py",
            "--page",
            PAGE,
            "--legit",
            wanted_url,
            "--code",
            phone.code("bob"),
            "--confirm",
            phone.confirm_for(wanted_url),
            "--victim",
            victim_url,
            "--pid",
            pid,
            "--rate",
            "500",
            "--seconds",
            "20",
        ],
        timeout=120,
    )
    figures = json.loads(done.stdout)
    BUILD.mkdir(exist_ok=True)
    (BUILD / "flood.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    legit = figures["legit"]
    if legit.get("post_status") != 200:  # say why: the approver's own words
        print(ct.journal("-u", "opsbot-approver.service", "-n", "40", "-o", "verbose"))
    assert legit["get_status"] == 200 and legit["post_status"] == 200, figures
    assert "approved" in legit["text"].lower(), figures
    assert legit["seconds"] < 2.0, figures
    assert figures["rss_max_kib"] < 80 * 1024, figures
    # The flood was really sent (its achieved rate is in the figures; the bound is far
    # below it, so that a busy machine does not fail the test for being slow).
    assert figures["started"] >= 2000, figures
    assert any(k.endswith(":429") for k in figures["statuses"]), figures
    assert plan_state(ct, victim["plan_id"]) == "PROPOSED"
    assert not _approval_exists(phone, victim["plan_id"])
    # The random codes that got past the proxy's and the page's rate limits reached the
    # approver (400: the code was wrong, the form again; 410: the link is used up), and
    # once five had, the link they were aimed at is burned, not guessed.
    wrong = figures["statuses"].get("wrong-code:400", 0)
    assert wrong >= 1, figures
    if wrong + figures["statuses"].get("wrong-code:410", 0) >= 5:
        burned = phone.click(victim_url)["get"]
        assert burned["status"] in (404, 410), burned
    assert wait_state(ct, wanted["plan_id"], {"APPLIED", "VERIFIED", "UNRESOLVED"}, timeout=90)
