"""Plans listing: the executor's ``list`` over 100, 1,000 and 10,000 stored plans, and
`opsbot plans` over 10,000 against `python -c pass`, all in the same run.

    sudo /opt/opsbot/venv/bin/python -m bench.plans_listing [--quick]

In a booted container with opsbot installed (bench/inside/listing_runs.py): three state
directories on the host's disk (bound in under /var/lib/opsbot-bench, as
submit_latency's), filled with 100, 1,000 and 10,000 plans by the executor's own store,
each served by an executor of its own (the installed program, as the executor's user).
Interleaved rounds (30; --quick 5), medians, each from connect to the whole reply:

- the 100 newest plans (the same 100 shown in each store: what grows is the store alone),
  as a ratio to the store of 100;
- the 200 newest, as `opsbot plans` asks (100 in the store of 100), for reference;
- the 100 newest right after the store's directory changed (a plan stored or archived a
  moment before): its names are listed again, for reference;
- `opsbot plans` (exec to exit, as root) over the 10,000, against `python -c pass`.

Targets (issue 40): listing 10,000 stored plans <= 1.5 x listing 100; `opsbot plans` over
10,000 within `python -c pass` + 100 ms.
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
    ratio,
    setup_logging,
    summary,
)

UNIT = "bench-a.service"
CONFIG = """\
[executor.allow]
restart_unit = ["bench-a.service"]
"""
SIZES = (100, 1000, 10000)
#: How much longer than `python -c pass` `opsbot plans` may take.
PLANS_TARGET_MS = 100.0
#: How much longer than over 100 stored plans a listing over more may take.
RATIO_TARGET = 1.5


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    setup_logging(args.verbose)
    rounds = 5 if args.quick else 30
    report = Report("plans_listing", "Plans listing over the store's size")
    disk = Path(tempfile.mkdtemp(prefix="opsbot-bench-disk-", dir="/var/tmp"))
    try:
        binds = [(disk, "/var/lib/opsbot-bench")]
        with booted(bind=binds) as ct:
            install_opsbot(ct, CONFIG, [UNIT])
            fs = ct.run(["findmnt", "-no", "FSTYPE", "--target", "/var/lib/opsbot-bench"]).stdout
            result = inside(
                ct,
                "listing_runs.py",
                "--sizes",
                ",".join(str(s) for s in SIZES),
                "--rounds",
                str(rounds),
                "--unit",
                UNIT,
                "--root",
                "/var/lib/opsbot-bench",
                timeout=3600,
            )
    finally:
        shutil.rmtree(disk, ignore_errors=True)

    samples = {name: ms(values) for name, values in result["samples_s"].items()}
    shown = result["shown"]
    smallest, largest = SIZES[0], SIZES[-1]

    def at(name: str, size: int) -> float:
        return median(samples[f"{name}_{size}"])

    base = at("list100", smallest)
    report.add(
        Figure(
            f"list, 100 newest, {smallest:,} stored (n={rounds})", base, "ms", target="(baseline)"
        )
    )
    for size in SIZES[1:]:
        value = at("list100", size)
        report.add(
            Figure(
                f"list, 100 newest, {size:,} stored",
                value,
                "ms",
                base,
                f"{smallest:,} stored",
                ratio(value, base),
                f"<= {RATIO_TARGET}",
                ratio(value, base) <= RATIO_TARGET,
            )
        )
    default_base = at("default", smallest)
    for size in SIZES:
        value = at("default", size)
        report.add(
            Figure(
                f"list, {shown[f'default_{size}']} newest (as opsbot plans), {size:,} stored",
                value,
                "ms",
                None if size == smallest else default_base,
                "" if size == smallest else f"{smallest:,} stored",
                None if size == smallest else ratio(value, default_base),
                "(info)",
            )
        )
    changed_base = at("changed", smallest)
    for size in SIZES:
        value = at("changed", size)
        report.add(
            Figure(
                f"list, 100 newest, store just changed, {size:,} stored",
                value,
                "ms",
                None if size == smallest else changed_base,
                "" if size == smallest else f"{smallest:,} stored",
                None if size == smallest else ratio(value, changed_base),
                "(info)",
            )
        )
    plans, python = median(samples["opsbot_plans"]), median(samples["python_pass"])
    report.add(
        Figure(
            f"opsbot plans, {largest:,} stored ({shown[f'default_{largest}']} listed)",
            plans,
            "ms",
            python,
            "python -c pass",
            ratio(plans, python),
            f"<= pass + {PLANS_TARGET_MS:.0f} ms",
            plans - python <= PLANS_TARGET_MS,
        )
    )
    report.note(
        f"stores on {fs.strip()} (host disk, bound in): "
        + ", ".join(f"{n} plans ({s:.1f} s to store)" for n, s in _filled(result))
        + "; a store's listing is kept once it has not changed for 2 s (plans._listing): "
        "the 'just changed' rows list its names again"
    )
    report.raw = {
        "fs_type": fs.strip(),
        "rounds": rounds,
        "stored": result["stored"],
        "fill_s": result["fill_s"],
        "shown": shown,
        "ms": {name: summary(values) for name, values in samples.items()},
    }
    report.finish()
    return 0


def _filled(result: dict[str, dict[str, float]]) -> list[tuple[int, float]]:
    """(plans stored, seconds it took) of each store."""
    return [(int(result["stored"][k]), result["fill_s"][k]) for k in result["stored"]]


if __name__ == "__main__":
    raise SystemExit(main())
