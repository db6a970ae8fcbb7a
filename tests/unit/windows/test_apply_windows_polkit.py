"""The apply windows as the polkit rule carries them: every window of the next 14 days as
an absolute UTC interval (the real ``systemd-analyze calendar``, clock injected), joined
where they touch, in the rule's JavaScript; and the grant of ``approve --now``. The rule's
answers themselves are polkitd's, tested in the booted container
(tests/attacks/test_attack_polkit.py); its JavaScript is evaluated here too, in node,
with the test's clock (polkit_stand_in.js).

2026-12-01 is a Tuesday."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from plans.polkit import (
    grants,
    plan_verbs,
    remove_grants,
    render_grant,
    render_rule,
    rule_horizon,
    rule_matches,
)
from plans.windows import intervals
from shared_schema import ExecutorPolicy
from shared_schema.config import ApplyWindow


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _host_zone_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")


def test_weekday_nights_for_fourteen_days_are_eleven_intervals() -> None:
    """Mon..Fri 02:00 for 2 h, seen on Tuesday the 1st at 03:00: the window open now (from
    02:00) and the ten weekday nights that open within 14 days (the last on Tuesday the
    15th); no weekend night."""
    found = intervals([ApplyWindow(start="Mon..Fri 02:00", duration="2h")], at(1, 3), 14)
    assert found[0] == (at(1, 2), at(1, 4))
    assert len(found) == 11 and found[-1][0] == at(15, 2)
    assert all(start.weekday() < 5 and (end - start).seconds == 7200 for start, end in found)


def test_windows_that_touch_are_one_interval() -> None:
    """01:00 for 1 h and 02:00 for 1 h every day: one interval 01:00 to 03:00 a day."""
    both = [
        ApplyWindow(start="*-*-* 01:00", duration="1h"),
        ApplyWindow(start="*-*-* 02:00", duration="1h"),
    ]
    found = intervals(both, at(1, 0), 2)
    assert found[:2] == [(at(1, 1), at(1, 3)), (at(2, 1), at(2, 3))]


def test_the_rule_says_yes_only_inside_the_intervals_it_carries() -> None:
    """With windows the YES needs ``inWindow``, computed from the intervals in ms; without
    windows the rule is as before (no clock read)."""
    policy = ExecutorPolicy(allow={"restart_unit": ["web.service"]})
    rule = render_rule(policy, windows=[(at(1, 2), at(1, 4))])
    assert f"[{int(at(1, 2).timestamp() * 1000)}, {int(at(1, 4).timestamp() * 1000)}]" in rule
    assert re.search(r"subject\.user === \"opsbot-executor\" && inWindow\)", rule), rule
    plain = render_rule(policy)
    assert "Date.now" not in plain and 'subject.user === "opsbot-executor") {' in plain
    # No window in 14 days: the list is empty, so the executor gets NO all along.
    assert "var windows = [\n\n    ];" in render_rule(policy, windows=[])


def test_a_grant_names_the_plans_pairs_until_its_approval_expires(tmp_path: Path) -> None:
    """`approve --now`'s grant: the plan's verbs and units only, until the expiry (ms);
    removed once its approval is no longer waiting."""
    verbs = plan_verbs([("restart_unit", "web.service"), ("start_unit", "db.service")])
    assert verbs == {"restart": ["web.service"], "start": ["db.service"]}
    grant = render_grant("20261201-020000-0123abcd", verbs, at(1, 3))
    assert f"Date.now() >= {int(at(1, 3).timestamp() * 1000)}" in grant
    assert '"restart": [\n        "web.service"\n    ]' in grant
    for plan_id in ("20261201-020000-0123abcd", "20261201-020000-4567abcd"):
        (tmp_path / f"59-opsbot-now-{plan_id}.rules").write_text(grant)
    (tmp_path / "60-opsbot.rules").write_text("rule")
    assert grants(tmp_path) == ["20261201-020000-0123abcd", "20261201-020000-4567abcd"]
    removed = remove_grants(lambda plan_id: plan_id.startswith("20261201-020000-4"), tmp_path)
    assert removed == ["20261201-020000-0123abcd"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "59-opsbot-now-20261201-020000-4567abcd.rules",
        "60-opsbot.rules",
    ]


def test_a_rule_written_yesterday_still_matches_but_not_for_other_windows() -> None:
    """check-config compares the rule with the policy apart from the intervals it carries
    (they move with the clock), and says until when it carries them; a rule written for
    other windows, or without the windows, does not match."""
    night = [ApplyWindow(start="*-*-* 02:00", duration="2h")]
    policy = ExecutorPolicy(allow={"restart_unit": ["web.service"]}, apply_window=night)
    yesterday = render_rule(policy, windows=intervals(night, at(1, 3), 14))
    today = intervals(night, at(2, 3), 14)
    assert rule_matches(yesterday, policy)
    assert rule_horizon(yesterday) == at(15, 4)
    assert rule_horizon(render_rule(policy, windows=today)) == at(16, 4)
    other = ExecutorPolicy(
        allow=policy.allow, apply_window=[ApplyWindow(start="*-*-* 03:00", duration="2h")]
    )
    assert not rule_matches(yesterday, other)
    assert not rule_matches(render_rule(ExecutorPolicy(allow=policy.allow)), policy)
    assert rule_matches(render_rule(ExecutorPolicy(allow=policy.allow)), other) is False


# -- the rule as polkitd runs it: its JavaScript, evaluated in node ---------------------------

STAND_IN = Path(__file__).with_name("polkit_stand_in.js")
MANAGE = "org.freedesktop.systemd1.manage-units"


def polkit_answers(
    rules: dict[str, str], now: datetime, queries: list[dict[str, str]], tmp: Path
) -> list[str]:
    """What polkitd would answer each query at ``now``, given the rule files ``rules``
    (name -> text): the files run in node (tests/unit/windows/polkit_stand_in.js)."""
    node = shutil.which("node")
    if node is None:
        assert os.environ.get("CI") != "true", "node is missing (scripts/setup installs it)"
        pytest.skip("node is missing (scripts/setup installs it)")
    paths = []
    for name, text in rules.items():
        (tmp / name).write_text(text)
        paths.append(str(tmp / name))
    done = subprocess.run(
        [node, str(STAND_IN), str(int(now.timestamp() * 1000)), *paths],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answers: list[str] = json.loads(done.stdout)
    return answers


def ask(user: str, verb: str, unit: str, action: str = MANAGE) -> dict[str, str]:
    return {"user": user, "action": action, "verb": verb, "unit": unit}


#: The executor restarting its allowed unit, one it may not touch, the diagnose user
#: asking the same, and someone else (polkit's defaults decide for them).
QUERIES = [
    ask("opsbot-executor", "restart", "web.service"),
    ask("opsbot-executor", "restart", "db.service"),
    ask("opsbot-executor", "stop", "web.service"),
    ask("opsbot-diagnose", "restart", "web.service"),
    ask("alice", "restart", "web.service"),
]


def test_polkit_says_yes_to_the_executor_only_inside_an_apply_window(tmp_path: Path) -> None:
    """The rule for Tuesday 02:00-04:00, as polkitd evaluates it: at 03:00 the executor
    may restart web.service, and nothing else; at 01:59, at 04:00 (the end is not in the
    window) and after the last window it carries, NO; the diagnose user NO always; anyone
    else is polkit's defaults' to decide."""
    policy = ExecutorPolicy(allow={"restart_unit": ["web.service"]})
    rule = {"60-opsbot.rules": render_rule(policy, windows=[(at(1, 2), at(1, 4))])}
    inside = polkit_answers(rule, at(1, 3), QUERIES, tmp_path)
    assert inside == ["yes", "no", "no", "no", "not handled"]
    for outside in (at(1, 1, 59), at(1, 4), at(9, 3)):
        answers = polkit_answers(rule, outside, QUERIES, tmp_path)
        assert answers == ["no", "no", "no", "no", "not handled"], outside


def test_without_windows_the_rule_says_yes_at_any_hour(tmp_path: Path) -> None:
    """No [executor.apply_window]: the allowed pair is YES whatever the clock says."""
    policy = ExecutorPolicy(allow={"restart_unit": ["web.service"]})
    rule = {"60-opsbot.rules": render_rule(policy)}
    for now in (at(1, 3), at(6, 23, 30)):
        assert polkit_answers(rule, now, QUERIES, tmp_path)[:2] == ["yes", "no"]


def test_an_approve_now_grant_opens_its_plan_s_pairs_until_it_expires(tmp_path: Path) -> None:
    """`approve --now` at 05:00 for a restart of web.service, approval until 06:00: the
    grant (read before the rule) says YES to that pair outside the window until 06:00,
    and to nothing else; from 06:00 the rule's NO stands again."""
    policy = ExecutorPolicy(allow={"restart_unit": ["web.service"], "start_unit": ["db.service"]})
    grant = render_grant("20261201-050000-0123abcd", {"restart": ["web.service"]}, at(1, 6))
    rules = {
        "59-opsbot-now-20261201-050000-0123abcd.rules": grant,
        "60-opsbot.rules": render_rule(policy, windows=[(at(1, 2), at(1, 4))]),
    }
    queries = [
        ask("opsbot-executor", "restart", "web.service"),
        ask("opsbot-executor", "start", "db.service"),
    ]
    assert polkit_answers(rules, at(1, 5), queries, tmp_path) == ["yes", "no"]
    assert polkit_answers(rules, at(1, 6), queries, tmp_path) == ["no", "no"]
