"""Host size: how the cost of a diagnosis grows with the number of units on the host.

    sudo /opt/opsbot/venv/bin/python -m bench.host_size [--quick] [--levels 0,500,...]

In a booted container with opsbot installed (the diagnose service socket-activated, with
a drop-in ``--idle-timeout 0`` so the same process answers every diagnosis), a proxy ->
app -> db chain whose db is down (bench/inside/host_size_runs.py): Debian's nginx whose
site's ``proxy_pass`` reaches an app, whose ``EnvironmentFile=`` names its db's port; the
db exits 1 at start (a data directory of the wrong owner). No unit file names another:
the diagnosis must find the db through configuration. The front and the app have health
targets (both answer 503); a healthy status page has one that passes.

Then more services, cumulatively: +0, +500, +2,000 and +10,000 (--quick, the smoke run
CI makes: +0 and +500 only),
instances of one oneshot template (RemainAfterExit=yes, each with a ``LISTEN_PORT=``),
started in chunks. At each level, diagnoses of the failed front (20; --quick 5) and of
the healthy unit, one after another over /run/opsbot/diagnose.sock as ``opsbot diagnose``
asks (as root: no per-user quota), from connect to verdict; each verdict is checked (its
kind, the units it names as data, whether the db is one, the tool errors of its
evidence). Baseline in the same run: ``systemctl list-units --all --no-pager`` at each
level, the +0 level itself, and at each level the same diagnoses with the daemon reading
systemd by ``systemctl show`` only (OPSBOT_SYSTEMD_READ=systemctl, restarted) where it
otherwise reads over D-Bus. Single read tools are timed too, as the diagnose user
(in the JSON result). Last, at the largest level, the diagnose service's VmRSS after each
of 1,000 diagnoses (--quick: 50), front and healthy alternating: its growth is the median
over the last tenth less the median over the first, scaled to 1,000 (VmRSS swings by tens
of MB from one diagnosis to the next, so two single readings say little).

Targets (issue 40): failed-unit diagnosis p50 at +2,000 <= 1.2 x +0's and < 0.5 s; a
healthy unit's p50 < 60 ms at each level; at +10,000 no tool error and the dead db found;
RSS growth <= 2 MB per 1,000 diagnoses.
"""

from __future__ import annotations

import re
from typing import Any

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

FRONT, APP, DB, HEALTHY = (
    "nginx.service",
    "ledger-api.service",
    "ledger-db.service",
    "status-page.service",
)
CONFIG = """\
# opsbot on a host whose ledger chain is down (bench/host_size.py)
[diagnose]
# No unit file names the db: operators may have it diagnosed all the same.
scope = ["ledger-db.service"]

[diagnose.health.ledger]
url = "http://127.0.0.1:8081/healthz"
unit = "nginx.service"
timeout_seconds = 2

[diagnose.health.ledger-api]
url = "http://127.0.0.1:8082/healthz"
unit = "ledger-api.service"
timeout_seconds = 2

[diagnose.health.status]
url = "http://127.0.0.1:8083/healthz"
unit = "status-page.service"
timeout_seconds = 2
"""
DROPINS = {
    "opsbot-diagnose.service": (
        "[Service]\nExecStart=\n"
        "ExecStart=/opt/opsbot/venv/bin/opsbot-diagnose serve --idle-timeout 0\n"
    ),
}
FULL_LEVELS = (0, 500, 2000, 10000)
QUICK_LEVELS = (0, 500)
#: The level the growth targets are judged at.
JUDGED = 2000


def label(level: int) -> str:
    return f"+{level:,}"


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument(
        "--levels",
        default="",
        help="extra services per level, comma-separated, cumulative (default 0,500,2000,10000;"
        " --quick: 0,500, the smoke run CI makes)",
    )
    args = p.parse_args()
    setup_logging(args.verbose)
    levels = (
        tuple(int(x) for x in args.levels.split(","))
        if args.levels
        else QUICK_LEVELS
        if args.quick
        else FULL_LEVELS
    )
    if levels[0] != 0 or list(levels) != sorted(set(levels)):
        p.error("--levels: increasing, starting at 0")
    runs, rss_diagnoses = (5, 50) if args.quick else (20, 1000)
    report = Report("host_size", "Host size: diagnosis cost against units on the host")
    with booted() as ct:
        install_opsbot(ct, CONFIG, dropins=DROPINS)
        r = inside(
            ct,
            "host_size_runs.py",
            "--levels",
            ",".join(str(x) for x in levels),
            "--runs",
            str(runs),
            "--rss-diagnoses",
            str(rss_diagnoses),
            timeout=3600,
        )
    figures(report, r, levels)
    if 10000 not in levels:
        report.note("+10,000 extra services only without --quick (its targets judged there)")
    report.finish()
    return 0


def figures(report: Report, r: dict[str, Any], levels: tuple[int, ...]) -> None:
    per = r["levels"]
    base = per["0"]
    front0 = median(ms(base["front"]["seconds"]))
    list0 = median(ms(base["list_units_s"]))
    raw: dict[str, Any] = {"chain": r["chain"], "levels": {}}
    for level in levels:
        at = per[str(level)]
        front, healthy = ms(at["front"]["seconds"]), ms(at["healthy"]["seconds"])
        p50 = median(front)
        loaded = at["loaded"]
        judged = level == JUDGED
        q = ratio(p50, front0)
        report.add(
            Figure(
                f"failed front diagnosis p50, {label(level)} (n={len(front)})",
                p50,
                "ms",
                front0,
                "+0",
                q,
                "<= 1.2" if judged else "(info)",
                q <= 1.2 if judged else None,
                note=f"p90 {percentile(front, 90):.0f} ms; {loaded['services']} services "
                f"loaded; {verdicts(at['front'])}",
            )
        )
        if judged:
            report.add(
                Figure(
                    f"failed front diagnosis p50, {label(level)}",
                    p50,
                    "ms",
                    target="< 500 ms",
                    met=p50 < 500,
                )
            )
        hp50 = median(healthy)
        by_systemctl = at.get("by_systemctl")
        hsc = median(ms(by_systemctl["healthy"]["seconds"])) if by_systemctl else None
        report.add(
            Figure(
                f"healthy unit diagnosis p50, {label(level)}",
                hp50,
                "ms",
                hsc,
                "reads by systemctl" if hsc is not None else "",
                ratio(hp50, hsc) if hsc is not None else None,
                target="< 60 ms",
                met=hp50 < 60,
                note=verdicts(at["healthy"]),
            )
        )
        if by_systemctl:
            fsc = median(ms(by_systemctl["front"]["seconds"]))
            report.add(
                Figure(
                    f"  failed front diagnosis p50, {label(level)}, D-Bus reads",
                    p50,
                    "ms",
                    fsc,
                    "reads by systemctl",
                    ratio(p50, fsc),
                    "(info)",
                    note=f"by systemctl: {verdicts(by_systemctl['front'])}",
                )
            )
        listed = median(ms(at["list_units_s"]))
        report.add(
            Figure(
                f"  systemctl list-units --all, {label(level)}",
                listed,
                "ms",
                list0,
                "+0",
                ratio(listed, list0),
                "(baseline)",
                note=f"{loaded['all']} units loaded",
            )
        )
        raw["levels"][str(level)] = {
            "loaded": loaded,
            "add_seconds": at["add_seconds"],
            "front_ms": summary(front),
            "healthy_ms": summary(healthy),
            "by_systemctl_ms": {
                unit: summary(ms(by_systemctl[unit]["seconds"])) for unit in ("front", "healthy")
            }
            if by_systemctl
            else None,
            "list_units_ms": summary(ms(at["list_units_s"])),
            "console_front_ms": ms(at["console_front_s"]),
            "front": {k: v for k, v in at["front"].items() if k != "seconds"},
            "healthy": {k: v for k, v in at["healthy"].items() if k != "seconds"},
            "chain_states": at["chain_states"],
            "daemon_rss_kb": at["daemon_rss_kb"],
            "tools_s": at["tools"],
        }
    top = levels[-1]
    at = per[str(top)]
    runs = len(at["front"]["seconds"])
    errors = at["front"]["tool_errors"] + at["healthy"]["tool_errors"]
    where = label(top) + ("" if top >= 10000 else ", the largest level run")
    report.add(
        Figure(
            f"tool errors in the diagnoses at {where}",
            errors,
            "errors",
            target="0",
            met=errors == 0,
            note=one_line("; ".join(at["front"]["errors"] + at["healthy"]["errors"]))[:300],
        )
    )
    found = at["front"]["db_found"]
    report.add(
        Figure(
            f"front diagnoses naming {DB} as data at {where}",
            found,
            f"of {runs}",
            target=f"{runs} of {runs}",
            met=found == runs,
            note=f"named in the text too: {at['front']['db_named']} of {runs}",
        )
    )
    for level in levels[:-1]:
        at = per[str(level)]
        n = len(at["front"]["seconds"])
        report.note(
            f"{label(level)}: db found {at['front']['db_found']} of {n}, tool errors "
            f"{at['front']['tool_errors'] + at['healthy']['tool_errors']}"
        )
    tools = per[str(top)]["tools"]
    slow = sorted(tools.items(), key=lambda kv: -kv[1]["median_s"])[:4]
    report.note(
        f"single tools at {label(top)}, as the diagnose user, median of 3: "
        + ", ".join(f"{name} {t['median_s'] * 1000:.0f} ms" for name, t in slow)
        + " (+0: "
        + ", ".join(
            f"{name} {per['0']['tools'][name]['median_s'] * 1000:.0f} ms" for name, _ in slow
        )
        + ")"
    )
    failing = [f"{name}: {t['error']}" for name, t in tools.items() if t["error"]]
    if failing:
        report.note(
            one_line(f"tools that answered an error at {label(top)}: " + "; ".join(failing))[:500]
        )
    rss = r["rss"]
    trajectory = rss["trajectory_kb"]
    n = rss["diagnoses"]
    tenth = max(1, len(trajectory) // 10)
    first, last = median(trajectory[:tenth]) / 1024, median(trajectory[-tenth:]) / 1024
    per_1000 = (last - first) * 1000 / (n - tenth)
    report.add(
        Figure(
            f"diagnose RSS growth per 1,000 diagnoses (over {n} at {label(r['rss_level'])})",
            per_1000,
            "MB",
            target="<= 2 MB",
            met=per_1000 <= 2,
            note=f"median VmRSS after the first {tenth} {first:.1f} MB, after the last "
            f"{tenth} {last:.1f} MB; front and healthy alternating, {rss['seconds']:.0f} s",
        )
    )
    idle = (rss["after_kb"] - rss["before_kb"]) / 1024
    report.add(
        Figure(
            "  idle before and after, one second apart from any diagnosis",
            idle * 1000 / n,
            "MB",
            target="(info)",
            note=f"{rss['before_kb'] / 1024:.1f} -> {rss['after_kb'] / 1024:.1f} MB (scaled to "
            f"1,000); between diagnoses VmRSS ranged {min(trajectory) / 1024:.1f}-"
            f"{max(trajectory) / 1024:.1f} MB",
        )
    )
    raw["rss"] = rss
    report.raw = raw


def one_line(text: str) -> str:
    """``text`` with every run of white space (and escaped newline) as one space."""
    return re.sub(r"(\\x0a|\\n|\s)+", " ", text)


def verdicts(runs: dict[str, Any]) -> str:
    """The verdicts of a level's runs in short: ``note healthy status-page.service``."""
    return "verdicts: " + ", ".join(
        " ".join(str(x) for x in (kind, cause, *units) if x)
        for kind, cause, units in runs["verdicts"]
    )


if __name__ == "__main__":
    raise SystemExit(main())
