"""An approver at their phone, played by a real browser (Debian's chromium, headless,
driven by Selenium through Debian's chromedriver) inside the booted container, at a
phone's 390x844: the link from the notification opens the plan page at what will change,
on which host and why, under a headline that says the action, its argv broken between
words only; a wrong code is said beside the code field, the confirmation kept; the TOTP code
approves the plan, the answer says what was approved and links to a status view that
follows the plan until it is VERIFIED. A visit without a click changes nothing; the used
link is refused with a clear page. The screenshots are saved under build/.

Then the page, behind the manual's nginx on its Unix socket, under a flood from one source
address: the approver, from another address, still gets through within 2 s, the page
stays small, and nothing is approved that no approver approved.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from testbed.host import PYTHON, REPO, plan_state, wait_state
from testbed.phone import PAGE, Phone, clean_slate, propose

BUILD = Path(__file__).resolve().parents[2] / "build"
SHOTS = "/srv/shots"
#: The phone the page is looked at on (testbed/inside/browser.py --phone), CSS pixels.
PHONE = (390, 844)
#: What will change, on which host, and why: on the first screen of the plan page.
ON_TOP = ("goal", "units", "host")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def _browse(phone: Phone, url: str, shot: str, *args: str, timeout: int = 120) -> dict[str, Any]:
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
        timeout=timeout,
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


def _off_screen(rects: dict[str, Any], ids: tuple[str, ...]) -> dict[str, Any]:
    """Those of ``ids`` not wholly inside the viewport (top >= 0 and bottom <= its
    height: a page scrolled past them has them above it), or missing from the page."""
    height = rects["height"]
    return {
        name: rects.get(name)
        for name in ids
        if name not in rects or rects[name]["top"] < 0 or rects[name]["bottom"] > height
    }


def test_an_approver_approves_on_a_phone_and_follows_the_plan(phone: Phone) -> None:
    """alice opens her link on her phone (chromium at 390x844). The page opens at its
    top: its headline says the action and the host ("Restart demo-web.service on ..."),
    the plan's goal, units and host are on the first screen, not scrolled away to the
    form, and no word of the argv is split over two lines. She mistypes the code: the
    error stands beside the code field, on that same first screen with the goal, units
    and host, and the confirmation she typed is still in its field. With her next code the plan is
    approved; the answer names its goal, units and argv and links to the status view,
    which she follows until it says VERIFIED. Her link, opened again, says it was used,
    in words (no raw ISO time, no backticks). Screenshots: build/phone-*.png; the
    measured rects: build/phone-rects.json."""
    ct = phone.ct
    clean_slate(ct)
    goal = "restart demo-web after it crashed (browser test)"
    plan = propose(ct, goal)
    notice = phone.notice_for(plan["plan_id"], "alice")
    url = notice["approve_url"]
    said = _browse(
        phone,
        url,
        f"{SHOTS}/phone.png",
        "--phone",
        "--wrong-code",
        phone.wrong_code("alice"),
        "--code",
        phone.code("alice"),
        "--reason",
        "on call",
        "--follow",
        "150",
        "--again",
        timeout=240,
    )
    rects = said["rects"]
    BUILD.mkdir(exist_ok=True)
    (BUILD / "phone-rects.json").write_text(json.dumps(rects, indent=2) + "\n")
    for page in ("plan", "wrong", "answer", "status", "again"):
        shot = "phone.png" if page == "plan" else f"phone-{page}.png"
        shutil.copyfile(ct.root / SHOTS.lstrip("/") / shot, BUILD / f"phone-{page}.png")
        assert (BUILD / f"phone-{page}.png").stat().st_size > 10_000
        assert (rects[page]["width"], rects[page]["height"]) == PHONE, rects[page]
    # The page as the link opens it, and after a wrong code.
    assert not _off_screen(rects["plan"], ON_TOP), rects["plan"]
    assert rects["plan"]["headline"] == f"Restart demo-web.service on {notice['host']}"
    assert rects["plan"]["broken"] == [], rects["plan"]  # e.g. --no-ask-passwo|rd
    assert rects["wrong"]["confirm"] == phone.confirm_for(url), rects["wrong"]
    assert not _off_screen(rects["wrong"], (*ON_TOP, "message")), rects["wrong"]
    code, message = rects["wrong"]["code"], rects["wrong"]["message"]
    assert 0 <= message["top"] - code["bottom"] < 40, rects["wrong"]  # beside the code field
    assert "That code is wrong" in said["wrong"], said["wrong"]
    assert plan["sha256"] in said["plan"] and "alice" in said["plan"]
    # The answer says what was approved, and links to the status view.
    argv = [shlex.join(step["argv"]) for step in notice["steps"]]
    answer = said["answer"]
    assert "approved" in answer.lower(), answer
    assert goal in answer and "demo-web.service" in answer, answer
    assert all(line in answer for line in argv), (argv, answer)
    assert said["follow_href"] == f"{url}/status", said["follow_href"]
    # The status view followed the plan to its outcome.
    assert said["state"] == "VERIFIED", said["status"]
    assert goal in said["status"] and all(line in said["status"] for line in argv)
    assert wait_state(ct, plan["plan_id"], {"VERIFIED", "UNRESOLVED"}, timeout=10) == "VERIFIED"
    # The same link again: refused, in words.
    again = said["again"]
    assert "used" in again.lower() or "no longer" in again.lower(), again
    assert "`" not in again and not ISO_TIME.search(again), again


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
