"""Apply vs Ansible: restart three running units with an approved opsbot plan, with
ansible-playbook, and with a bare ``systemctl restart`` loop (the floor).

    sudo /opt/opsbot/venv/bin/python -m bench.apply_vs_ansible [--runs N] [--quick]

In a booted container with three ``sleep infinity`` services and opsbot installed
(opsbot-apply.path and .timer stopped so they do not race): each opsbot run submits a new
plan over the socket as opsbot-diagnose, approves it with ``opsbot approve``, and times
only ``opsbot apply``, which since verification landed waits for opsbot-verify's verdict
(the settle window is 1 s here), and separately ``opsbot-apply.service``, the apply alone:
the targets are the apply's. Each round restarts the same three units with the same
steps, which opsbot's history would refuse from the second round on (the restart budget;
the refusal of steps that ended UNRESOLVED, as the next method's restarts make them): so
each opsbot run starts from an empty plan history (bench/inside/apply_runs.py), said in
the output; what the history refuses is tested in tests/, not timed here. Ansible
is the tests' ansible-core (/opt/opsbot/venv), or else ansible-core from PyPI in a venv of
its own, /opt/opsbot-bench/ansible-venv, installed on the host (so the container sees it)
on the first run: ``connection: local``,
``gather_facts: false``, three ``ansible.builtin.systemd_service`` restarts. The floor is
``bash -c 'for u in A B C; do systemctl restart $u; done'``. Runs are interleaved
(rotating order), one warm-up round is not counted; medians and ratios are reported.

Between rounds, with every plan ended, ``opsbot apply`` is timed with nothing approved:
it must say so without starting the unit (a run that starts it is a problem in the
output), against ``python -c pass`` and ``systemctl is-active`` timed in the same rounds.

Targets (issue): opsbot <= 0.12 x Ansible and <= 3 x the bare floor; ``opsbot apply``
with nothing approved <= 300 ms (issue 40).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench._common import (
    Figure,
    Report,
    booted,
    inside,
    install_opsbot,
    median,
    ms,
    parser,
    ratio,
    setup_logging,
    summary,
)

ANSIBLE_VENV = Path("/opt/opsbot-bench/ansible-venv")
ANSIBLE_PLAYBOOK = ANSIBLE_VENV / "bin" / "ansible-playbook"
TEST_PLAYBOOK = Path("/opt/opsbot/venv/bin/ansible-playbook")
UNITS = ["bench-a.service", "bench-b.service", "bench-c.service"]
#: ``opsbot apply`` with nothing approved, at most (issue 40).
NOTHING_TARGET_MS = 300
CONFIG = """\
[executor]
step_timeout_seconds = 30
settle_seconds = 1
# The bench stores thousands of plans nobody decides.
max_waiting_plans_per_submitter = 100000
max_waiting_plans = 100000

[executor.allow]
restart_unit = ["bench-a.service", "bench-b.service", "bench-c.service"]
"""


def ensure_ansible() -> Path:
    """ansible-playbook: the one the tests installed (/opt/opsbot/venv, ansible-core), or
    else ansible-core in a venv of its own on the host (before the container boots: the
    overlay's lower layer is the host's /, which must not change under a mounted
    overlay)."""
    if TEST_PLAYBOOK.exists():
        return TEST_PLAYBOOK
    if ANSIBLE_PLAYBOOK.exists():
        return ANSIBLE_PLAYBOOK
    print(f"installing ansible-core into {ANSIBLE_VENV} (once)")
    ANSIBLE_VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(ANSIBLE_VENV)], check=True)
    subprocess.run(
        [str(ANSIBLE_VENV / "bin" / "pip"), "install", "--quiet", "ansible-core"], check=True
    )
    return ANSIBLE_PLAYBOOK


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=None, help="timed runs per method (default 15)")
    args = p.parse_args()
    setup_logging(args.verbose)
    runs = args.runs or (2 if args.quick else 15)
    playbook = ensure_ansible()
    report = Report("apply_vs_ansible", "Apply vs Ansible: restart three running units")
    with booted() as ct:
        install_opsbot(ct, CONFIG, UNITS)
        ct.systemctl("stop", "opsbot-apply.path", "opsbot-apply.timer")
        result = inside(
            ct, "apply_runs.py", "--runs", str(runs), "--ansible", str(playbook), *UNITS
        )
    t = {name: ms(values) for name, values in result["times"].items()}
    opsbot, ansible, floor = median(t["opsbot_apply"]), median(t["ansible"]), median(t["bare_loop"])
    service = median(t["opsbot_apply_service"])
    apply_alone = "opsbot-apply.service (the apply alone)"
    report.add(
        Figure(
            apply_alone,
            service,
            "ms",
            ansible,
            "ansible-playbook",
            ratio(service, ansible),
            "<= 0.12",
            ratio(service, ansible) <= 0.12,
        )
    )
    report.add(
        Figure(
            apply_alone,
            service,
            "ms",
            floor,
            "bare loop",
            ratio(service, floor),
            "<= 3",
            ratio(service, floor) <= 3,
        )
    )
    report.add(
        Figure(
            "opsbot apply (and its verification)",
            opsbot,
            "ms",
            ansible,
            "ansible-playbook",
            ratio(opsbot, ansible),
            "(info)",
        )
    )
    report.add(Figure("ansible-playbook (3 restarts)", ansible, "ms"))
    report.add(Figure("bare systemctl loop (floor)", floor, "ms"))
    nothing, python = median(t["opsbot_apply_nothing_open"]), median(t["python_startup"])
    report.add(
        Figure(
            "opsbot apply, nothing approved",
            nothing,
            "ms",
            python,
            "python -c pass",
            ratio(nothing, python),
            f"<= {NOTHING_TARGET_MS} ms",
            nothing <= NOTHING_TARGET_MS,
        )
    )
    is_active = median(t["systemctl_is_active"])
    report.add(
        Figure(
            "opsbot apply, nothing approved",
            nothing,
            "ms",
            is_active,
            "systemctl is-active",
            ratio(nothing, is_active),
            "(info)",
        )
    )
    for name, label in (
        ("python_startup", "python -c pass"),
        ("systemctl_is_active", "systemctl is-active"),
        ("import_opsbot_cli", "python -c 'import opsbot_cli.main'"),
    ):
        report.add(Figure(label, median(t[name]), "ms", note="where opsbot's time goes"))
    report.raw = {
        "runs": runs,
        "units": UNITS,
        "ms": {name: summary(values) for name, values in t.items()},
        "samples_ms": t,
        "problems": result["problems"],
        "plans_in_store_at_end": result["plans_in_store"],
        "ansible_version": result["ansible_version"],
    }
    report.note(
        f"{runs} timed runs per method, interleaved, after one warm-up round; "
        f"{result['ansible_version']}"
    )
    report.note(
        "each opsbot run starts from an empty plan history (the same steps every round); "
        "`opsbot apply` includes waiting for opsbot-verify (settle window 1 s)"
    )
    for problem in result["problems"]:
        report.note(f"PROBLEM: {problem}")
    report.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
