"""Start-up and memory: the executor's cold start, and each daemon's RSS idle and after
many requests.

    sudo /opt/opsbot/venv/bin/python -m bench.startup_memory [--quick]

In a booted container with opsbot installed. Cold start: opsbot-executor.service is
stopped (its socket keeps listening), then the time from connect() until the reply to a
``list`` is taken; 12 times (plus one not counted), median. The page cache is warm: this
is a process cold start, not a disk one. Baseline: the same request to the running
executor. Memory: VmRSS from /proc/<MainPID>/status, one second after the last request.
The executor is started with no request (idle), then serves 1,000 requests (4 submits to
1 list; before that, as information, a fresh executor serves 1,000 submits only); the
diagnose service is started idle, then diagnoses a healthy unit, one request after
another, for two minutes (same request `opsbot diagnose` sends, over
/run/opsbot/diagnose.sock). Drop-ins give both a long --idle-timeout so they do not exit
between measurements, and the executor no start rate limit (it is started 13 times).

Then the store grows to 10,000 plans (--quick: 1,000): the executor started again over
it, its idle RSS, its list (the 200 newest, as `opsbot plans` asks) against the same list
over the few hundred plans the mix stored, and its RSS after 100 lists and 100 submits more.

Targets (issue): cold start <= 300 ms; idle RSS <= 45 MB diagnose, <= 35 MB executor, also
over 10,000 stored plans; growth over the requests <= 2 MB; list time flat in the store.
"""

from __future__ import annotations

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

UNIT = "bench-a.service"
CONFIG = """\
[executor]
# The bench stores thousands of plans nobody decides.
max_waiting_plans_per_submitter = 100000
max_waiting_plans = 100000

[executor.allow]
restart_unit = ["bench-a.service"]
"""
DROPINS = {
    "opsbot-executor.service": (
        "[Unit]\nStartLimitIntervalSec=0\n\n[Service]\nExecStart=\n"
        "ExecStart=/opt/opsbot/venv/bin/opsbot-executor --idle-timeout 3600\n"
    ),
    "opsbot-diagnose.service": (
        "[Service]\nExecStart=\n"
        "ExecStart=/opt/opsbot/venv/bin/opsbot-diagnose serve --idle-timeout 3600\n"
    ),
}


def mb(kb: int) -> float:
    return kb / 1024


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    setup_logging(args.verbose)
    cold_runs, requests, seconds = (2, 100, 5) if args.quick else (12, 1000, 120)
    stored = 1000 if args.quick else 10000
    report = Report("startup_memory", "Start-up and memory")
    with booted() as ct:
        install_opsbot(ct, CONFIG, [UNIT], DROPINS)
        r = inside(
            ct,
            "startup_runs.py",
            "--cold-runs",
            str(cold_runs),
            "--requests",
            str(requests),
            "--diagnose-seconds",
            str(seconds),
            "--unit",
            UNIT,
            "--stored",
            str(stored),
            timeout=3600,
        )
    cold, warm = ms(r["cold_start_s"]), ms(r["warm_list_s"])
    value, base = median(cold), median(warm)
    report.add(
        Figure(
            f"executor cold start (n={len(cold)})",
            value,
            "ms",
            base,
            "same request, warm",
            ratio(value, base),
            "<= 300 ms",
            value <= 300,
        )
    )
    report.add(
        Figure(
            "  reference: python -c pass", median(ms(r["python_startup_s"])), "ms", target="(info)"
        )
    )
    report.add(
        Figure(
            "  reference: python -c 'import executor_svc.daemon'",
            median(ms(r["import_daemon_s"])),
            "ms",
            target="(info)",
            note="includes the interpreter's start",
        )
    )
    ex_idle, ex_warm, ex_after = (
        mb(r[k]["vmrss_kb"]) for k in ("executor_idle", "executor_warm", "executor_after")
    )
    dg_idle, dg_after = mb(r["diagnose_idle"]["vmrss_kb"]), mb(r["diagnose_after"]["vmrss_kb"])
    dg_warm = mb(r["diagnose_warm"]["vmrss_kb"]) if "diagnose_warm" in r else dg_idle
    n_ex = sum(r["executor_requests"].values())
    n_dg = r["diagnoses"]
    report.add(Figure("executor RSS idle", ex_idle, "MB", target="<= 35 MB", met=ex_idle <= 35))
    report.add(
        Figure(
            f"executor RSS growth over {n_ex} requests",
            ex_after - ex_idle,
            "MB",
            target="<= 2 MB",
            met=ex_after - ex_idle <= 2,
            note=f"{ex_idle:.1f} -> {ex_after:.1f} MB; after 10 requests {ex_warm:.1f}",
        )
    )
    report.add(
        Figure(
            "executor RSS growth after warm-up (10 req)", ex_after - ex_warm, "MB", target="(info)"
        )
    )
    so_idle, so_after = (
        mb(r["submits_only_idle"]["vmrss_kb"]),
        mb(r["submits_only_after"]["vmrss_kb"]),
    )
    report.add(
        Figure(
            f"executor RSS growth over {requests} submits only",
            so_after - so_idle,
            "MB",
            target="(info)",
            note=f"{so_idle:.1f} -> {so_after:.1f} MB",
        )
    )
    n_st = r["stored"]
    st_idle, st_after = mb(r["stored_idle"]["vmrss_kb"]), mb(r["stored_after"]["vmrss_kb"])
    report.add(
        Figure(
            f"executor RSS idle over {n_st} stored plans",
            st_idle,
            "MB",
            target="<= 35 MB",
            met=st_idle <= 35,
            note=f"after 100 lists and 100 submits: {st_after:.1f} MB",
        )
    )
    big_list, small_list = median(ms(r["stored_list_s"])), median(ms(r["small_list_s"]))
    report.add(
        Figure(
            f"list over {n_st} stored plans ({r['stored_listed']} newest)",
            big_list,
            "ms",
            small_list,
            f"same list over {r['small_stored']} stored",
            ratio(big_list, small_list),
            "flat (<= 1.5x)",
            big_list <= 1.5 * small_list,
        )
    )
    report.add(Figure("diagnose RSS idle", dg_idle, "MB", target="<= 45 MB", met=dg_idle <= 45))
    report.add(
        Figure(
            f"diagnose RSS growth over {n_dg} diagnoses",
            dg_after - dg_idle,
            "MB",
            target="<= 2 MB",
            met=dg_after - dg_idle <= 2,
            note=f"{dg_idle:.1f} -> {dg_after:.1f} MB; after 3 diagnoses {dg_warm:.1f}",
        )
    )
    report.add(
        Figure(
            "diagnose RSS growth after warm-up (3 diag.)", dg_after - dg_warm, "MB", target="(info)"
        )
    )
    report.add(
        Figure(
            "diagnosis of a healthy unit",
            median(ms(r["diagnose_s"])),
            "ms",
            note=f"{n_dg} in {seconds}s: {r['diagnose_verdicts']}",
        )
    )
    report.raw = {
        "cold_start_ms": summary(cold),
        "warm_list_ms": summary(warm),
        "samples_cold_ms": cold,
        **{
            k: r[k]
            for k in (
                "executor_idle",
                "executor_warm",
                "executor_after",
                "diagnose_idle",
                "diagnose_after",
                "executor_requests",
                "diagnoses",
                "diagnose_verdicts",
            )
        },
        "diagnose_warm": r.get("diagnose_warm"),
        "submits_only_idle": r["submits_only_idle"],
        "submits_only_after": r["submits_only_after"],
        "executor_trajectory_mb_every_100": [round(mb(k), 2) for k in r["executor_trajectory_kb"]],
        "diagnose_ms": summary(ms(r["diagnose_s"])),
        "stored": r["stored"],
        "stored_idle": r["stored_idle"],
        "stored_after": r["stored_after"],
        "stored_list_ms": summary(ms(r["stored_list_s"])),
        "small_stored": r["small_stored"],
        "small_list_ms": summary(ms(r["small_list_s"])),
    }
    report.note(
        "executor RSS every 100 requests of the mix (MB): "
        + ", ".join(f"{mb(k):.1f}" for k in r["executor_trajectory_kb"])
    )
    report.note(
        f"executor: {r['executor_requests']} requests; diagnose: {n_dg} diagnoses of "
        f"healthy {UNIT} in {seconds}s ({r['diagnose_verdicts']})"
    )
    report.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
