"""Diagnosis cost: prompt tokens per diagnosis of opsbot's loop against a naive ReAct loop,
on the same scripted turns, and the runtime's own overhead per step.

    sudo /opt/opsbot/venv/bin/python -m bench.diagnosis_cost [--quick]

In a booted container, four failing services are set up as in life (a config error in a
crash loop, a worker killed by SIGKILL, a web front end whose database failed, a chatty
service killed near its memory limit) and diagnosed with the real read tools, twice per
scenario, against testbed/scripted_openai.py replaying the same turns:

* opsbot: diagnose_svc.runtime.run_diagnosis with OpenAICompatPolicy;
* naive: bench/naive_react.py, the same prompt, tool list and turns, every observation
  the tool's full result (bounds lifted, no redaction, no cut), resent every turn.

Prompt tokens are what the server reports (ceil(compact JSON of messages + tools / 4)),
summed per diagnosis; verdicts must be the same (kind, plan fingerprint or note text). A
second naive variant keeps the tools' own bounds and drops only the runtime's (info).

Overhead: run_diagnosis with a scripted in-process policy and instant tools (5 steps,
ending in a plan), with the daemon's logging to journald; time in policy and tools is
subtracted; the median per step over 300 runs (bench/_overhead.py).

Targets (issue): <= 0.6 of the naive loop's tokens with the same verdicts; <= 5 ms per
step of runtime overhead.
"""

from __future__ import annotations

import statistics

from bench._common import (
    Figure,
    Report,
    booted,
    inside,
    parser,
    ratio,
    setup_logging,
    summary as stats,
)


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    setup_logging(args.verbose)
    runs = 30 if args.quick else 300
    report = Report("diagnosis_cost", "Diagnosis cost: prompt tokens and runtime overhead")
    with booted() as ct:
        r = inside(ct, "cost_runs.py", "--overhead-runs", str(runs), timeout=1800)
    total_ops = total_naive = total_bounded = 0
    same = True
    per: dict[str, object] = {}
    for name, sc in r["scenarios"].items():
        ops, naive, bounded = sc["opsbot"], sc["naive_unbounded"], sc["naive_tool_bounds"]
        verdict_same = all(
            (ops["kind"], ops["plan_sha256"], ops["note"])
            == (other["kind"], other["plan_sha256"], other["note"])
            for other in (naive, bounded)
        )
        same = same and verdict_same
        total_ops += ops["prompt_tokens"]
        total_naive += naive["prompt_tokens"]
        total_bounded += bounded["prompt_tokens"]
        q = ratio(ops["prompt_tokens"], naive["prompt_tokens"])
        report.add(
            Figure(
                f"tokens: {name} ({sc['unit']})",
                ops["prompt_tokens"],
                "tokens",
                naive["prompt_tokens"],
                "naive",
                q,
                "(per scenario)",
                None,
                note=f"verdict {ops['kind']} ({ops['ended_by']}), same: {verdict_same}; "
                f"{ops['steps']} steps",
            )
        )
        per[name] = {
            "opsbot": ops,
            "naive_unbounded": naive,
            "naive_tool_bounds": bounded,
            "same_verdict": verdict_same,
            "ratio": q,
        }
    n = len(r["scenarios"])
    mean_ops, mean_naive, mean_bounded = total_ops / n, total_naive / n, total_bounded / n
    q = ratio(mean_ops, mean_naive)
    report.add(
        Figure(
            f"prompt tokens per diagnosis (mean of {n})",
            mean_ops,
            "tokens",
            mean_naive,
            "naive loop",
            q,
            "<= 0.6, same verdicts",
            q <= 0.6 and same,
            note=f"same verdicts: {same}",
        )
    )
    ratios = sorted(x["ratio"] for x in per.values())  # type: ignore[index]
    report.add(
        Figure(
            "per-scenario ratio, median",
            statistics.median(ratios),
            "x",
            target="(info)",
            note=f"range {ratios[0]:.2f}-{ratios[-1]:.2f}",
        )
    )
    report.add(
        Figure(
            "  vs naive keeping the tools' own bounds",
            mean_ops,
            "tokens",
            mean_bounded,
            "naive, tool bounds",
            ratio(mean_ops, mean_bounded),
            "(info)",
        )
    )
    oh = r["overhead"]
    report.add(
        Figure(
            "runtime overhead per step (logging to journald)",
            oh["per_step_median_ms"],
            "ms",
            target="<= 5 ms",
            met=oh["per_step_median_ms"] <= 5,
            note=f"median of {oh['runs']} runs x {oh['steps_per_run']} steps",
        )
    )
    report.add(
        Figure(
            "runtime overhead per step (log events dropped)",
            oh["per_step_median_ms_no_logging"],
            "ms",
            target="(info)",
        )
    )
    report.raw = {
        "unit_states": r["unit_states"],
        "scenarios": per,
        "overhead": {
            "per_step_ms": stats(oh["per_step_ms"]),
            "per_step_no_logging_ms": stats(oh["per_step_ms_no_logging"]),
            "runs": oh["runs"],
            "steps_per_run": oh["steps_per_run"],
        },
        "naive_lifted_bounds": next(iter(r["scenarios"].values()))["naive_unbounded"]["lifted"],
    }
    report.note(f"unit states when diagnosed: {r['unit_states']}")
    report.note(
        "naive = same prompt, tools and turns; observations are the tools' full "
        "results (bounds lifted: "
        + ", ".join(x.rsplit(".", 1)[-1] for x in report.raw["naive_lifted_bounds"])
        + ")"
    )
    report.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
