"""Plan submit latency and throughput: submit -> validated -> durably stored -> ACCEPT over
the executor's real socket, against a floor of the same bytes echoed by a bare threaded
Unix-socket server that fsyncs one file of that size per message.

    sudo /opt/opsbot/venv/bin/python -m bench.submit_latency [--quick]

In a booted container with opsbot installed (executor socket-activated, a drop-in with
``--idle-timeout 0`` so it stays up between rounds). /var/lib/opsbot (and the floor's
directory) are bound from a directory on the host's disk under /var/tmp, so fsync costs
what it costs on a real file system (the container's own root is a tmpfs overlay).
Clients are opsbot-diagnose, one connection per submit, every plan distinct.
2,000 single-client submits (10 blocks) and 16 clients x 150 (3 rounds), each alternating
with the floor; p50/p99 and throughput. Afterwards every ACCEPT's plan_id must be unique,
none a duplicate, and every plan file present.

Targets (issue 40): p99 <= 3 x the floor's p99; >= 700 accepted plans/s with 16 clients
(500 before); zero lost or duplicated.
"""

from __future__ import annotations

import shutil
import tempfile
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
    percentile,
    ratio,
    setup_logging,
    summary,
)

UNIT = "bench-a.service"
CONFIG = """\
[executor]
# The bench stores thousands of plans nobody decides.
max_waiting_plans_per_submitter = 100000
max_waiting_plans = 100000

[executor.allow]
restart_unit = ["bench-a.service"]
"""
#: Accepted plans a second with 16 clients, at least (issue 40).
THROUGHPUT_TARGET = 700
EXECUTOR_DROPIN = """\
[Service]
ExecStart=
ExecStart=/opt/opsbot/venv/bin/opsbot-executor --idle-timeout 0
"""


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    setup_logging(args.verbose)
    single, clients, per_client = (200, 16, 15) if args.quick else (2000, 16, 150)
    report = Report("submit_latency", "Plan submit latency and throughput")
    disk = Path(tempfile.mkdtemp(prefix="opsbot-bench-disk-", dir="/var/tmp"))
    try:
        (disk / "state").mkdir()
        (disk / "floor").mkdir()
        binds = [(disk / "state", "/var/lib/opsbot"), (disk / "floor", "/var/lib/opsbot-bench")]
        with booted(bind=binds) as ct:
            install_opsbot(ct, CONFIG, [UNIT], {"opsbot-executor.service": EXECUTOR_DROPIN})
            fs = ct.run(["findmnt", "-no", "FSTYPE", "--target", "/var/lib/opsbot"]).stdout
            result = inside(
                ct,
                "submit_runs.py",
                "--single",
                str(single),
                "--clients",
                str(clients),
                "--per-client",
                str(per_client),
                "--unit",
                UNIT,
                "--echo-dir",
                "/var/lib/opsbot-bench/echo",
                timeout=3600,
            )
    finally:
        shutil.rmtree(disk, ignore_errors=True)

    raw: dict[str, object] = {"fs_type": fs.strip(), "check": result["check"]}
    for mode in ("single", "concurrent"):
        ex, fl = result[f"{mode}_executor"], result[f"{mode}_floor"]
        ex_ms, fl_ms = ms(ex["latencies"]), ms(fl["latencies"])
        label = "1 client" if mode == "single" else f"{clients} clients"
        for q in (50, 99):
            value, base = percentile(ex_ms, q), percentile(fl_ms, q)
            is_target = q == 99 and mode == "single"
            report.add(
                Figure(
                    f"submit p{q}, {label} (n={len(ex_ms)})",
                    value,
                    "ms",
                    base,
                    "echo+fsync",
                    ratio(value, base),
                    "<= 3" if is_target else "(info)",
                    ratio(value, base) <= 3 if is_target else None,
                )
            )
        ex_rate = ex["count"] / sum(ex["walls"])
        fl_rate = fl["count"] / sum(fl["walls"])
        is_target = mode == "concurrent"
        report.add(
            Figure(
                f"throughput, {label}",
                ex_rate,
                "plans/s",
                fl_rate,
                "echo+fsync",
                ratio(ex_rate, fl_rate),
                f">= {THROUGHPUT_TARGET}/s" if is_target else "(info)",
                ex_rate >= THROUGHPUT_TARGET if is_target else None,
            )
        )
        raw[mode] = {
            "executor_ms": summary(ex_ms),
            "floor_ms": summary(fl_ms),
            "executor_walls_s": ex["walls"],
            "floor_walls_s": fl["walls"],
            "executor_per_s": ex_rate,
            "floor_per_s": fl_rate,
            "executor_round_rates": [len(ex_ms) / len(ex["walls"]) / w for w in ex["walls"]],
        }
    check = result["check"]
    lost_or_dup = (
        (check["accepted"] - check["unique_ids"]) + check["missing_files"] + check["bad_replies"]
    )
    report.add(
        Figure(
            "lost or duplicated plans",
            lost_or_dup,
            "plans",
            target="0",
            met=lost_or_dup == 0,
            note=f"{check['accepted']} accepted, {check['unique_ids']} unique ids, "
            f"{check['missing_files']} files missing, "
            f"{check['bad_replies']} non-ACCEPT replies",
        )
    )
    report.raw = raw
    report.note(
        f"state on {fs.strip()} (host disk, bound in); {check['accepted']} plans "
        f"accepted in all, {check['plan_files']} plan files in the store; median of the "
        f"per-round {clients}-client rates: "
        f"{median(raw['concurrent']['executor_round_rates']):.0f}/s"
    )  # type: ignore[index]
    report.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
