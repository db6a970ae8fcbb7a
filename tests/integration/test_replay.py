"""Replay on a real systemd: the operator's question before an upgrade or a settings
change, "what would it have done on my incidents?", answered from the record alone.

Three real diagnoses are recorded by opsbot-diagnose: a killed service whose start plan
is approved and ends VERIFIED; a service that is killed again two seconds after each
start, whose start plan ends UNRESOLVED; and a service whose program is gone, a note.
Replayed through the same settings, all three agree. Then ``[diagnose] max_steps = 2``
(too few steps for the runbook to reach a plan): ``opsbot replay --since 1h`` says which
differ and what became of the plans then (exit 4). The units are then removed (unit files
deleted, daemon-reload) and the replay says the same: it read nothing live. And it wrote
nothing: the executor's store and the records are as they were.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.container import BootedSystemd
from testbed.host import TEST_CONFIG, approve, diagnose, opsbot as cli, wait_state

KILLED = "replay-killed.service"
RELAPSE = "replay-relapse.service"
GONE = "replay-gone.service"
UNITS = {
    KILLED: "[Service]\nExecStart=/bin/sleep infinity\n",
    # Its main process kills itself two seconds after each start: a start cannot hold.
    RELAPSE: "[Service]\nExecStart=/bin/sh -c 'sleep 2; kill -KILL $$$$'\n",
    GONE: "[Service]\nExecStart=/opt/replay-app/bin/replay-app\n",
}
#: The tests' config, with these units allowlisted for a start (and so in the scope).
CONFIG = TEST_CONFIG.replace(
    'start_unit = ["demo-web.service", "demo-db.service", "demo-flaky.service"]',
    'start_unit = ["demo-web.service", "demo-db.service", "demo-flaky.service", '
    f'"{KILLED}", "{RELAPSE}", "{GONE}"]',
)
#: The same, with too few steps for the runbook to reach a plan.
FEWER_STEPS = CONFIG.replace("[diagnose]\n", "[diagnose]\nmax_steps = 2\n")
RECORDS = "/var/lib/opsbot-diagnose/records"
FINAL = {"VERIFIED", "UNRESOLVED", "FAILED", "STALE"}


def listing(ct: BootedSystemd, *where: str) -> list[str]:
    """Every file under ``where``: path, size, modification time (what a write changes)."""
    found = ct.run(["find", *where, "-printf", "%p %s %T@\\n"]).stdout
    return sorted(found.splitlines())


def failed(ct: BootedSystemd, unit: str) -> None:
    ct.wait_for(
        lambda: ct.systemctl("is-failed", unit, check=False).returncode == 0,
        timeout=20,
        what=f"{unit} failed",
    )


def diagnosed(ct: BootedSystemd, unit: str) -> dict[str, Any]:
    """``opsbot diagnose UNIT --json``'s verdict, once its record is kept."""
    verdict: dict[str, Any] = json.loads(diagnose(ct, unit, "--json").stdout)["verdict"]
    record = f"{RECORDS}/{verdict['run_id']}.json.gz"
    ct.wait_for(
        lambda: ct.run(["test", "-f", record], check=False).returncode == 0,
        timeout=20,
        what=f"the record of {verdict['run_id']}",
    )
    return verdict


def replay(ct: BootedSystemd, *args: str) -> tuple[int, str, str]:
    done = cli(ct, "replay", *args, check=False, timeout=300)
    return done.returncode, done.stdout, done.stderr


def ours(report: dict[str, Any], run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """The replays of this test's diagnoses, without their timing."""
    return {
        r["run_id"]: {k: v for k, v in r.items() if k != "seconds"}
        for r in report["replays"]
        if r["run_id"] in run_ids
    }


@pytest.fixture
def host(opsbot: BootedSystemd) -> Iterator[BootedSystemd]:
    """The three units allowlisted and installed; the tests' config and no unit after."""
    ct = opsbot
    ct.write_file("/etc/opsbot/opsbot.toml", CONFIG)
    cli(ct, "polkit-rule", "--write")
    ct.systemctl("stop", "opsbot-executor.service", "opsbot-diagnose.service")  # re-read
    for unit, text in UNITS.items():
        ct.write_file(f"/etc/systemd/system/{unit}", text)
    ct.systemctl("daemon-reload")
    try:
        yield ct
    finally:
        ct.systemctl("stop", *UNITS, check=False)
        ct.run(["rm", "-f", *(f"/etc/systemd/system/{unit}" for unit in UNITS)])
        ct.systemctl("daemon-reload")
        ct.systemctl("reset-failed", *UNITS, check=False)
        ct.write_file("/etc/opsbot/opsbot.toml", TEST_CONFIG)
        cli(ct, "polkit-rule", "--write")
        ct.systemctl("stop", "opsbot-executor.service", "opsbot-diagnose.service")


def test_a_replay_says_what_would_differ_from_the_record_alone(host: BootedSystemd) -> None:
    """Recorded: a plan VERIFIED, a plan UNRESOLVED, a note. Same settings: all agree
    (exit 0). Fewer steps: the plans differ, said with their outcome then (exit 4). Units
    gone: the same report. Nothing written by any replay."""
    ct = host
    ct.systemctl("start", KILLED)
    ct.systemctl("kill", "--kill-who=main", "-s", "KILL", KILLED)
    failed(ct, KILLED)
    ct.systemctl("start", RELAPSE)
    failed(ct, RELAPSE)
    ct.systemctl("start", GONE, check=False)
    failed(ct, GONE)

    verdicts = {unit: diagnosed(ct, unit) for unit in UNITS}
    assert verdicts[KILLED]["kind"] == "plan", verdicts[KILLED]
    assert verdicts[RELAPSE]["kind"] == "plan", verdicts[RELAPSE]
    assert verdicts[GONE]["kind"] == "note", verdicts[GONE]
    plan_ids = {verdicts[unit]["plan_id"]: unit for unit in (KILLED, RELAPSE)}
    for plan_id in plan_ids:
        approve(ct, plan_id)
    states = {unit: wait_state(ct, plan_id, FINAL, 90) for plan_id, unit in plan_ids.items()}
    assert states == {KILLED: "VERIFIED", RELAPSE: "UNRESOLVED"}
    ct.wait_for(
        lambda: all(
            ct.run(["test", "-f", f"{RECORDS}/outcomes/{p}"], check=False).returncode == 0
            for p in plan_ids
        ),
        timeout=30,
        what="opsbot-verify's outcomes beside the records",
    )
    run_ids = {v["run_id"]: unit for unit, v in verdicts.items()}

    # The same opsbot, the same settings: each of ours agrees.
    status, out, err = replay(ct, *sorted(run_ids))
    assert status == 0, (out, err)
    assert out.count("  agree\n") == 3 and "DIFFERS" not in out, out
    assert f"then: plan: start_unit {RELAPSE} (then UNRESOLVED)" in out
    assert f"then: plan: start_unit {KILLED} (then VERIFIED)" in out

    # Too few steps to reach a plan: the plans differ; each line says its outcome then.
    ct.write_file("/etc/opsbot/opsbot.toml", FEWER_STEPS)
    # (The plans themselves: the apply timer's own bookkeeping may run meanwhile.)
    executors_store = listing(ct, "/var/lib/opsbot/plans")
    records = listing(ct, RECORDS)
    status, out, err = replay(ct, "--since", "1h")
    assert status == 4, (out, err)
    lines = out.splitlines()
    for run_id, unit in run_ids.items():
        [at] = [n for n, line in enumerate(lines) if line.startswith(f"{run_id}  {unit}  ")]
        assert lines[at].endswith("  DIFFERS"), out
        if unit == GONE:  # two steps are too few to find the program gone: another note
            assert lines[at + 1] == f"  then: note: missing_file {GONE}", out
            assert lines[at + 2].startswith("  now:  note: "), out
        else:
            assert lines[at + 1].startswith(f"  then: plan: start_unit {unit} (then "), out
            assert lines[at + 2].startswith("  now:  note: "), out
    summary = [line.split(None, 1) for line in lines if line.startswith("     ")]
    assert int(dict((w, n) for n, w in summary)["now a note where a plan was"]) >= 2, out
    assert "differ where the plan then was UNRESOLVED" in out
    status, before_removal, err = replay(ct, "--since", "1h", "--json")
    assert status == 4, err
    first = ours(json.loads(before_removal), set(run_ids))
    assert {r["outcome"] for r in first.values()} == {"VERIFIED", "UNRESOLVED", None}
    assert all(r["not_recorded"] == [] for r in first.values()), first

    # The units gone from the host: the same report, from the record alone.
    ct.systemctl("stop", *UNITS, check=False)
    ct.run(["rm", "-f", *(f"/etc/systemd/system/{unit}" for unit in UNITS)])
    ct.systemctl("daemon-reload")
    ct.systemctl("reset-failed", *UNITS, check=False)
    assert "not-found" in ct.systemctl("show", "-P", "LoadState", KILLED).stdout
    status, after_removal, err = replay(ct, "--since", "1h", "--json")
    assert status == 4, err
    assert ours(json.loads(after_removal), set(run_ids)) == first

    # Nothing written: the executor's plans as they were, no record added or changed.
    assert listing(ct, "/var/lib/opsbot/plans") == executors_store
    assert listing(ct, RECORDS) == records

    # Anyone but root and the diagnose user: one line naming who may.
    done = cli(ct, "replay", user="olivia", check=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "run as root or opsbot-diagnose" in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr
    as_diagnose = ct.run(
        ["runuser", "-u", "opsbot-diagnose", "--", "/opt/opsbot/venv/bin/opsbot", "replay"]
        + ["--since", "1h", *sorted(run_ids)],
        check=False,
    )
    assert as_diagnose.returncode == 4, shlex.join([as_diagnose.stdout, as_diagnose.stderr])
