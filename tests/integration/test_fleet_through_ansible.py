"""A fleet through Ansible: three hosts and a journal collector, each a booted systemd in a
network namespace of its own, reached by ansible-playbook over real SSH (testbed/fleet.py).

The operator's story: install opsbot everywhere from a wheelhouse (a second run changes
nothing); the same bad deploy kills the app on web1 and web2, the database dies on web3;
one review gathers every waiting plan into a report ("the same fix on 2 hosts"); a check run
of the approval changes nothing; approving the report rolls out canary first, then the
rest, each host applied and verified; the collector tells each host's story and ignores what
one host says about another's plan. The fleet's recorded diagnoses are replayed into one
report, with the host whose settings changed since named as the one that differs. A plan
changed after the review is refused and a host that goes STALE stops the rollout before the
next batch.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from shared_schema.canonical import canonical_json, sha256_hex
from testbed.container import REPO_MOUNT, REPO_ROOT, _exec, can_boot
from testbed.faults import Fault, inject_app_killed, inject_db_killed
from testbed.fleet import Fleet, FleetHost, PlaybookRun, can_make_netns
from testbed.skips import skip_unless
from testbed.stack import DEFAULT_STACK, install, reset

HOSTS = ("web1", "web2", "web3")
COLLECTOR = "collector"
OPSBOT = "/usr/local/bin/opsbot"
PLANS_DIR = "/var/lib/opsbot/plans"
APPROVALS_DIR = "/var/lib/opsbot-approvals"
RECORDS_DIR = "/var/lib/opsbot-diagnose/records"
CONFIG = "/etc/opsbot/opsbot.toml"
#: The unit each recorded diagnosis asked about, one a line (the host's own python3).
RECORDED_UNITS = """
import gzip, json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json.gz")):
    print(json.loads(gzip.decompress(path.read_bytes()))["unit"])
"""
PKI = REPO_ROOT / "packaging" / "ansible" / "journal-pki.sh"
WHEELHOUSE = REPO_ROOT / "packaging" / "ansible" / "build-wheelhouse.sh"
ENDED = ("VERIFIED", "UNRESOLVED", "FAILED", "STALE", "EXPIRED", "REJECTED", "INTERRUPTED")
#: What the figures of the closing note are made of (printed at the end of the module).
FIGURES: dict[str, Any] = {}


def stack_vars() -> dict[str, Any]:
    """The role's variables for a host running the scenario stack: what opsbot may do to its
    three units and the health endpoints it may probe, from the stack itself."""
    units = list(DEFAULT_STACK.units)
    return {
        "opsbot_allow": {
            tool: units
            for tool in ("restart_unit", "start_unit", "reload_unit", "reset_failed_unit")
        },
        "opsbot_health": {
            name: {"url": url, "unit": unit, "timeout_seconds": 2}
            for name, (url, unit) in DEFAULT_STACK.health.items()
        },
        "opsbot_executor": {
            "restart_budget": 100,
            "settle_seconds": 3,
            "approval_ttl_seconds": 600,
            "step_timeout_seconds": 30,
        },
    }


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    ok, why = can_boot()
    skip_unless(ok, f"cannot boot the systemd container bench: {why}")
    ok, why = can_make_netns()
    skip_unless(ok, f"cannot make the fleet's network: {why}")
    work = tmp_path_factory.mktemp("fleet")
    wheelhouse = work / "wheelhouse"
    started = time.monotonic()
    _exec(["bash", str(WHEELHOUSE), str(wheelhouse)], timeout=600)
    FIGURES["wheelhouse_seconds"] = round(time.monotonic() - started, 1)
    with Fleet(HOSTS, collector=COLLECTOR) as booted:
        pki = booted.dir / "pki"
        _exec(["bash", str(PKI), str(pki), COLLECTOR, *HOSTS], timeout=120)
        for host in booted.hosts.values():
            # The hosts have no package index and no opsbot: the role brings both.
            host.run(["rm", "-rf", "/opt/opsbot/venv", "/usr/local/bin/opsbot"])
        for name in HOSTS:
            install(booted[name].ct, DEFAULT_STACK)
        booted.vars = {
            **stack_vars(),
            "opsbot_wheelhouse": str(wheelhouse),
            # Ansible logs in as root: no sudo on the hosts.
            "opsbot_become": False,
            "opsbot_journal_collector_url": f"https://{COLLECTOR}:19532",
            "opsbot_journal_pki": str(pki),
            "opsbot_journal_allow": [booted[name].address for name in HOSTS],
        }
        run = booted.install_collection()
        assert run.returncode == 0, run
        yield booted
        # The figures and trimmed transcripts, for whoever reads the run (build/fleet.json).
        out = REPO_ROOT / "build" / "fleet.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(FIGURES, indent=2) + "\n")


def play(fleet: Fleet, name: str, *args: str, **extra: Any) -> PlaybookRun:
    return fleet.playbook(name, *args, extra=extra)


def cli(host: FleetHost, *args: str, check: bool = True) -> Any:
    return json.loads(host.run([OPSBOT, *args, "--json"], check=check).stdout)


def plan_of(host: FleetHost, plan_id: str) -> dict[str, Any]:
    detail: dict[str, Any] = cli(host, "show", plan_id)
    return detail


def state_of(host: FleetHost, plan_id: str) -> str:
    return str(plan_of(host, plan_id)["summary"]["state"])


def approvals(host: FleetHost, plan_id: str) -> list[str]:
    """Every approval file of ``plan_id`` on ``host``, waiting or used."""
    out = host.run(
        ["find", APPROVALS_DIR, "-name", f"{plan_id}*", "-type", "f"], check=False
    ).stdout
    return sorted(line for line in out.splitlines() if line.strip())


def proposed(host: FleetHost) -> list[dict[str, Any]]:
    return list(cli(host, "plans", "--state", "proposed"))


def transition_at(detail: dict[str, Any], state: str) -> datetime:
    for item in detail["history"]:
        if item["state"] == state:
            return datetime.fromisoformat(item["at"])
    plan_id = detail["summary"]["plan_id"]
    raise AssertionError(f"plan {plan_id} never was {state}: {detail['history']}")


def diagnose_faults(fleet: Fleet, faults: dict[str, Fault]) -> dict[str, dict[str, Any]]:
    """Each broken host diagnosed through the opsbot_diagnose module (one ad-hoc run); the
    verdicts, by host, checked against the fault's expected steps."""
    path = fleet.dir / "faults.json"
    path.write_text(
        json.dumps(
            {
                "faults": {
                    h: {"unit": f.asked_about, "symptom": f.symptom} for h, f in faults.items()
                }
            }
        )
    )
    run = fleet.adhoc(
        ",".join(faults),
        "opsbot.fleet.opsbot_diagnose",
        "unit={{ faults[inventory_hostname].unit }} "
        "symptom='{{ faults[inventory_hostname].symptom }}'",
        "-e",
        f"@{path}",
        "--one-line",
    )
    verdicts: dict[str, dict[str, Any]] = {}
    for host, fault in faults.items():
        plans = proposed(fleet[host])
        assert len(plans) == 1, f"{host}: {plans}\n{run}"
        detail = plan_of(fleet[host], plans[0]["plan_id"])
        problems = fault.plan_problems(detail["plan"]["steps"])
        assert not problems, (host, problems, detail)
        verdicts[host] = detail["summary"]
    return verdicts


# -- the story ----------------------------------------------------------------------------------


def test_install_everywhere_then_a_second_run_changes_nothing(fleet: Fleet) -> None:
    """The install playbook sets up every host and the collector without a failure: each
    host's config checks clean and its executor, diagnose and journal upload are active, the
    collector's journal receiver too; a second run changes nothing."""
    started = time.monotonic()
    first = play(fleet, "fleet-install.yml")
    FIGURES["install_seconds"] = round(time.monotonic() - started, 1)
    assert first.returncode == 0, first
    for name in fleet.all_names:
        assert first.recap[name]["changed"] > 0, first
        assert first.recap[name]["failed"] == 0, first
    for name in HOSTS:
        host = fleet[name]
        check = host.run([OPSBOT, "check-config"], check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        active = host.run(
            [
                "systemctl",
                "is-active",
                "opsbot-executor.socket",
                "opsbot-diagnose.socket",
                "systemd-journal-upload.service",
            ]
        )
        assert active.stdout.split() == ["active"] * 3
    assert (
        fleet[COLLECTOR]
        .run(["systemctl", "is-active", "systemd-journal-remote.socket"])
        .stdout.strip()
        == "active"
    )

    started = time.monotonic()
    second = play(fleet, "fleet-install.yml")
    FIGURES["install_again_seconds"] = round(time.monotonic() - started, 1)
    assert second.returncode == 0, second
    assert second.changed() == 0, second
    FIGURES["install_recaps"] = {"first": first.recap, "second": second.recap}
    FIGURES["install_transcript"] = first.stdout[-3000:]


@pytest.fixture(scope="module")
def broken(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """The same bad deploy on web1 and web2 (the app killed), the database dead on web3;
    each diagnosed by opsbot_diagnose."""
    faults = {
        "web1": inject_app_killed(fleet["web1"].ct, DEFAULT_STACK),
        "web2": inject_app_killed(fleet["web2"].ct, DEFAULT_STACK),
        "web3": inject_db_killed(fleet["web3"].ct, DEFAULT_STACK),
    }
    return diagnose_faults(fleet, faults)


@pytest.fixture(scope="module")
def report(fleet: Fleet, broken: dict[str, dict[str, Any]]) -> Path:
    path = fleet.dir / "fleet-report.json"
    started = time.monotonic()
    run = play(fleet, "fleet-review.yml", report=str(path))
    FIGURES["review_started"] = started
    assert run.returncode == 0, run
    FIGURES["review_transcript"] = run.stdout[-4000:]
    return path


def test_review_gathers_every_waiting_plan_and_groups_the_same_fix(
    fleet: Fleet, broken: dict[str, dict[str, Any]], report: Path
) -> None:
    """The review report lists each host's waiting plan with its sha256, groups the same fix
    on web1 and web2 apart from web3's, and its Markdown names every plan."""
    data = json.loads(report.read_text())
    listed = {host: [p["plan_id"] for p in plans] for host, plans in data["hosts"].items()}
    assert listed == {host: [detail["plan_id"] for detail in [broken[host]]] for host in HOSTS}
    for host in HOSTS:
        assert data["hosts"][host][0]["sha256"] == broken[host]["sha256"]
    groups = sorted(data["groups"], key=lambda g: -g["count"])
    assert [g["count"] for g in groups] == [2, 1], groups
    assert sorted(h["host"] for h in groups[0]["hosts"]) == ["web1", "web2"]
    assert [h["host"] for h in groups[1]["hosts"]] == ["web3"]
    markdown = report.with_suffix(".md").read_text()
    for host in HOSTS:
        assert broken[host]["plan_id"] in markdown


def test_check_mode_changes_nothing_anywhere(
    fleet: Fleet, broken: dict[str, dict[str, Any]], report: Path
) -> None:
    """A check run of the approval succeeds and changes nothing: every plan is still
    PROPOSED and no host has an approval file."""
    run = play(fleet, "fleet-approve.yml", "--check", report=str(report))
    assert run.returncode == 0, run
    for host in HOSTS:
        assert state_of(fleet[host], broken[host]["plan_id"]) == "PROPOSED"
        assert approvals(fleet[host], broken[host]["plan_id"]) == []


def test_a_plan_changed_after_the_review_is_refused_and_nothing_runs(
    fleet: Fleet, broken: dict[str, dict[str, Any]], report: Path
) -> None:
    """Someone on web3 swaps the stored plan for another (a consistent record: its own bytes
    and fingerprint) after the review: the canary web3 is refused, and the rollout stops."""
    web3 = fleet["web3"]
    plan_id = broken["web3"]["plan_id"]
    path = f"{PLANS_DIR}/{plan_id}.json"
    original = web3.run(["cat", path]).stdout
    record = json.loads(original)
    plan = json.loads(record["plan"])
    plan["goal"] = plan["goal"] + " (and something else)"
    raw = canonical_json(plan)
    record.update(plan=raw.decode(), sha256=sha256_hex(raw))
    web3.ct.write_file(path, json.dumps(record), 0o640)
    web3.run(["chown", "--reference", PLANS_DIR, path])
    try:
        assert plan_of(web3, plan_id)["summary"]["sha256"] != broken["web3"]["sha256"]
        run = play(fleet, "fleet-approve.yml", report=str(report), canary="web3")
        assert run.returncode != 0, run
        assert "sha256" in run.stdout, run
        for host in HOSTS:
            assert approvals(fleet[host], broken[host]["plan_id"]) == [], host
            assert state_of(fleet[host], broken[host]["plan_id"]) == "PROPOSED", host
    finally:
        web3.ct.write_file(path, original, 0o640)
        web3.run(["chown", "--reference", PLANS_DIR, path])
    assert plan_of(web3, plan_id)["summary"]["sha256"] == broken["web3"]["sha256"]


def test_the_reviewed_report_rolls_out_canary_first_and_every_host_verifies(
    fleet: Fleet, broken: dict[str, dict[str, Any]], report: Path
) -> None:
    """Approving the reviewed report with web1 as canary ends every host's plan VERIFIED,
    web2 and web3 approved only after web1 verified, and every host's site answers 200
    again."""
    run = play(fleet, "fleet-approve.yml", report=str(report), canary="web1")
    assert run.returncode == 0, run
    FIGURES["review_to_all_verified_seconds"] = round(
        time.monotonic() - FIGURES.pop("review_started"), 1
    )
    FIGURES["approve_seconds"] = round(run.seconds, 1)
    FIGURES["approve_transcript"] = run.stdout[-4000:]
    details = {host: plan_of(fleet[host], broken[host]["plan_id"]) for host in HOSTS}
    for host, detail in details.items():
        state = detail["summary"]["state"]
        assert state == "VERIFIED", (host, state, detail["history"])
    canary_done = transition_at(details["web1"], "VERIFIED")
    for host in ("web2", "web3"):
        assert transition_at(details[host], "APPROVED") > canary_done, host
    for name in HOSTS:
        got = fleet[name].run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", DEFAULT_STACK.proxy_url]
        )
        assert got.stdout == "200", name


def test_the_collector_tells_each_hosts_story_and_no_host_speaks_for_another(
    fleet: Fleet, broken: dict[str, dict[str, Any]]
) -> None:
    """The collector's audit shows each host's plan approved and verified; entries web2
    sends about web1's plan, posing as web1 or as itself, are set aside as forged by web2
    and stay out of web1's story."""
    collector = fleet[COLLECTOR]
    web1_plan = broken["web1"]["plan_id"]

    def story(plan_id: str, host: str) -> list[dict[str, Any]]:
        proc = collector.run([OPSBOT, "audit", plan_id, "--json"], check=False)
        if proc.returncode != 0:
            return []
        return list(json.loads(proc.stdout)["hosts"].get(host, {}).get("entries", []))

    for host in HOSTS:
        plan_id = broken[host]["plan_id"]
        entries = collector.ct.wait_for(
            lambda p=plan_id, h=host: (e := story(p, h)) and "plan.verified" in _events(e) and e,
            timeout=60,
            what=f"{host}'s verified plan on the collector",
        )
        events = _events(entries)
        assert events[0] in ("plan.accepted", "diagnose.start") or "plan.accepted" in events
        assert "plan.approved" in events

    # web2 (its root, its own certificate) sends entries about web1's plan: once claiming to
    # be web1, once as itself. The collector files them under web2; the audit ignores both.
    forged = "\n".join(
        [
            _export_entry(web1_plan, "web1", "plan.rejected"),
            _export_entry(web1_plan, "web2", "plan.failed"),
        ]
    )
    web2 = fleet["web2"]
    web2.ct.write_file("/root/forged.export", forged)
    pki = fleet.dir / "pki"
    for name in ("ca.crt", "web2.crt", "web2.key"):
        web2.ct.write_file(f"/root/{name}", (pki / name).read_text(), 0o600)
    sent = web2.run(
        [
            "curl",
            "-sS",
            "--fail",
            "--max-time",
            "20",
            "--cacert",
            "/root/ca.crt",
            "--cert",
            "/root/web2.crt",
            "--key",
            "/root/web2.key",
            "-H",
            "Content-Type: application/vnd.fdo.journal",
            "--data-binary",
            "@/root/forged.export",
            f"https://{COLLECTOR}:19532/upload",
        ],
        check=False,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stderr

    def forged_seen() -> dict[str, Any] | None:
        proc = collector.run([OPSBOT, "audit", web1_plan, "--json"], check=False)
        data = json.loads(proc.stdout)
        return data if len(data.get("ignored_forged", [])) >= 2 else None

    data = collector.ct.wait_for(forged_seen, timeout=60, what="the forged entries arrived")
    events = _events(data["hosts"]["web1"]["entries"])
    assert "plan.rejected" not in events and "plan.failed" not in events
    assert {f["source"] for f in data["ignored_forged"]} == {"web2"}
    text = collector.run([OPSBOT, "audit", web1_plan, "--no-pager"]).stdout
    assert "web1" in text and "plan.rejected" not in text
    FIGURES["collector_story"] = text[-3000:]


def test_the_replay_report_gives_each_hosts_agreement_and_the_fleets(
    fleet: Fleet, broken: dict[str, dict[str, Any]]
) -> None:
    """web1's and web2's diagnoses of the proxy, recorded, replayed by fleet-replay.yml after
    web2's ``[diagnose] max_steps`` was cut to 1: web2's now end in a note where a plan was
    (its ``opsbot replay`` exits 4, a result, not a failure), web1's agree; the report (JSON
    and the table) gives each host its own figures and adds them up."""
    proxy = DEFAULT_STACK.proxy_unit
    recorded = {
        name: fleet[name]
        .run(["python3", "-c", RECORDED_UNITS, RECORDS_DIR])
        .stdout.split()
        .count(proxy)
        for name in ("web1", "web2")
    }
    assert recorded["web1"] >= 1 and recorded["web2"] >= 1, recorded
    web2 = fleet["web2"]
    config = web2.run(["cat", CONFIG]).stdout
    assert "\n[diagnose]\n" in config, config
    web2.ct.write_file(CONFIG, config.replace("\n[diagnose]\n", "\n[diagnose]\nmax_steps = 1\n", 1))
    path = fleet.dir / "fleet-replay.json"
    try:
        run = play(
            fleet,
            "fleet-replay.yml",
            opsbot_hosts="web1:web2",
            replay_unit=proxy,
            replay_report=str(path),
        )
    finally:
        web2.ct.write_file(CONFIG, config)
    assert run.returncode == 0, run
    FIGURES["replay_seconds"] = round(run.seconds, 1)
    FIGURES["replay_transcript"] = run.stdout[-3000:]
    data = json.loads(path.read_text())
    assert list(data["hosts"]) == ["web1", "web2"] and data["unread"] == {}, data
    web1_said, web2_said = data["hosts"]["web1"], data["hosts"]["web2"]
    assert (web1_said["exit_status"], web2_said["exit_status"]) == (0, 4), data
    n1, n2 = recorded["web1"], recorded["web2"]
    figures = ("replayed", "agree", "differ", "failed", "note_where_plan")
    assert [web1_said["summary"][k] for k in figures] == [n1, n1, 0, 0, 0], web1_said
    assert [web2_said["summary"][k] for k in figures] == [n2, 0, n2, 0, n2], web2_said
    for said in web2_said["differing"]:
        assert said["then"].startswith("plan: ") and said["now"].startswith("note: "), said
    assert (web1_said["agreement"], web2_said["agreement"]) == (100.0, 0.0)
    total = data["total"]
    assert [total[k] for k in ("hosts", *figures)] == [2, n1 + n2, n1, n2, 0, n2], total
    assert total["not_recorded_calls"] == sum(
        h["summary"]["not_recorded_calls"] for h in data["hosts"].values()
    )
    assert total["agreement"] == round(100 * n1 / (n1 + n2), 1)
    table = run.stdout.split("TASK [Show the report]")[1]
    assert f"{n1} of {n1 + n2} agree" in table, table
    # host, replayed, agree, differ, failed
    rows = {row[0]: row[1:5] for row in _table_rows(table)}
    assert rows == {
        "web1": [n1, n1, 0, 0],
        "web2": [n2, 0, n2, 0],
        "all": [n1 + n2, n1, n2, 0],
    }, table


def _table_rows(shown: str) -> list[list[Any]]:
    """The rows of fleet-replay.yml's table (host, then its counts) in what Ansible's debug
    printed (one JSON string a line)."""
    rows = []
    for line in shown.splitlines():
        words = line.strip().rstrip(",").strip('"').split()
        if len(words) >= 8 and all(w.isdigit() for w in words[1:7]):
            rows.append([words[0], *(int(w) for w in words[1:7])])
    return rows


def test_a_host_gone_stale_stops_the_rollout_before_the_next_batch(fleet: Fleet) -> None:
    """The app started by hand on the canary web1 between the review and the approval:
    web1's plan ends STALE, the rollout fails, and web2's plan stays PROPOSED with no
    approval."""
    for name in ("web1", "web2"):
        reset(fleet[name].ct, DEFAULT_STACK)
    faults = {name: inject_app_killed(fleet[name].ct, DEFAULT_STACK) for name in ("web1", "web2")}
    plans = diagnose_faults(fleet, faults)
    path = fleet.dir / "fleet-report-2.json"
    run = play(fleet, "fleet-review.yml", report=str(path))
    assert run.returncode == 0, run
    # Between the review and the approval, someone starts the app on web1 by hand: its plan's
    # precondition (the app failed) no longer holds, so its apply refuses it as STALE.
    fleet["web1"].run(["systemctl", "start", DEFAULT_STACK.app_unit])
    run = play(fleet, "fleet-approve.yml", report=str(path), canary="web1")
    assert run.returncode != 0, run
    assert state_of(fleet["web1"], plans["web1"]["plan_id"]) == "STALE"
    assert state_of(fleet["web2"], plans["web2"]["plan_id"]) == "PROPOSED"
    assert approvals(fleet["web2"], plans["web2"]["plan_id"]) == []


def _events(entries: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("event", "")) for e in entries]


def _export_entry(plan_id: str, hostname: str, event: str) -> str:
    """One journal entry in systemd's export format, with every trusted field a host's
    journald would set, as a subverted host can send them."""
    now = int(time.time() * 1_000_000)
    fields = {
        "__REALTIME_TIMESTAMP": str(now),
        "__MONOTONIC_TIMESTAMP": "1",
        "_BOOT_ID": "0" * 32,
        "_HOSTNAME": hostname,
        "_UID": "0",
        "_SYSTEMD_UNIT": "opsbot-executor.service",
        "SYSLOG_IDENTIFIER": "opsbot-executor",
        "PLAN_ID": plan_id,
        "EVENT": event,
        "MESSAGE": event,
        "PRIORITY": "6",
    }
    return "".join(f"{k}={v}\n" for k, v in fields.items()) + "\n"


def test_a_single_host_without_an_index_installs_from_the_wheelhouse(fleet: Fleet) -> None:
    """One host, no Ansible and no package index: the operator copies the wheelhouse over
    and runs ``install.sh --wheelhouse DIR`` from the checkout; opsbot and every dependency
    come from the wheels, and the console and the executor answer from the new venv.
    (Last in the module: it reinstalls web3.)"""
    host = fleet["web3"]
    host.run(["rm", "-rf", "/opt/opsbot/venv", "/root/wheelhouse"])
    # The copy an operator makes with scp -r, through the container's root on this side.
    shutil.copytree(fleet.vars["opsbot_wheelhouse"], host.ct.root / "root" / "wheelhouse")
    done = host.run(
        ["bash", f"{REPO_MOUNT}/packaging/install.sh", "--wheelhouse", "/root/wheelhouse"],
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = host.run(["/opt/opsbot/venv/bin/pip", "show", "--files", "opsbot"]).stdout
    assert "Location: /opt/opsbot/venv/lib/" in shown, shown  # a wheel, not a source link
    host.run(["systemctl", "restart", "opsbot-executor.socket"])
    assert isinstance(cli(host, "plans"), list)
