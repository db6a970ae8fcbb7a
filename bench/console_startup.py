"""Console start-up: how long `opsbot --help`, `opsbot plans` and `opsbot show ID` take
from exec to exit, against `python -c pass` timed in the same run.

    /opt/opsbot/venv/bin/python -m bench.console_startup [--quick] [--runs N] [--tree DIR]

On the host, no container: the executor's socket is served from this process by a canned
executor (testbed/canned_executor.py) that answers at once with what the real one sends
(twenty plans for `plans`, one plan for `show`), so each command runs its whole path:
parse, import what it needs, ask, check the answer (show: the sha256 and the argv), print.
`show` is timed twice: a final plan (VERIFIED: no live state is read) and an open one
(PROPOSED: each unit's live state read with `systemctl show`; with no systemd on the
host that call fails at once, and the line says so). `plans --json` of an executor
that is not there is timed too (the "no socket" error and its hint, which reads the
config). Each run starts every command one after the other, so a machine that slows down
slows all of them; two rounds first are not counted; figures are medians. By default
`opsbot` is this checkout's code, started as the installed console script starts it
(`from opsbot_cli.main import main`) with this interpreter; --tree DIR times another
checkout's code instead (`git archive HEAD~ | tar -x -C DIR`: the figures before a change).

Target (issue 21): each within 100 ms of `python -c pass` timed in the same run. For
reference, what the models would cost the console: `from pydantic import BaseModel` and
the executor socket's models (`import shared_schema.executor_socket`), which is why
`opsbot plans` and `show` read replies with the models' generated JSON Schema instead.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench._common import Figure, Report, median, parser, ratio, setup_logging, summary
from shared_schema import Plan, PlanState
from testbed.canned_executor import PLAN_ID, canned_executor, detail_of, listing_of, summary_of
from testbed.container import REPO_ROOT

#: What the installed console script runs (pip's entry-point shim, minus its argv[0] fix).
SHIM = "import sys; from opsbot_cli.main import main; sys.exit(main())"
#: How much longer than `python -c pass` a command may take.
TARGET_MS = 100.0
PLAN = Plan.model_validate(
    {
        "goal": "bring app back",
        "steps": [
            {
                "tool": "reset_failed_unit",
                "args": {"unit": "app.service"},
                "expect": {"active_state": ["failed"]},
                "reason": "start limit hit",
            },
            {"tool": "restart_unit", "args": {"unit": "app.service"}},
        ],
    }
)


def timed(argv: Sequence[str], env: Mapping[str, str]) -> tuple[float, int, str]:
    """Seconds from start to exit of ``argv``, its exit status and its output (stdout,
    then stderr)."""
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=dict(env),
        cwd="/",
        timeout=60,
        check=False,
    )
    return time.perf_counter() - start, done.returncode, done.stdout + done.stderr


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=0, help="counted runs of each (default 21)")
    p.add_argument("--tree", type=Path, default=REPO_ROOT, help="the source tree to time")
    args = p.parse_args()
    setup_logging(args.verbose)
    runs = args.runs or (5 if args.quick else 21)
    opsbot = [sys.executable, "-c", SHIM]
    listing = listing_of(
        *(summary_of(PLAN, plan_id=f"20261201-1520{i:02d}-0a1b2c3d") for i in range(20))
    )
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-console-"))
        sockets = {name: Path(tmp, f"{name}.sock") for name in ("plans", "final", "open")}
        stack.enter_context(canned_executor(sockets["plans"], listing))
        stack.enter_context(canned_executor(sockets["final"], detail_of(PLAN, PlanState.VERIFIED)))
        stack.enter_context(canned_executor(sockets["open"], detail_of(PLAN)))
        env = {
            **os.environ,
            "PYTHONPATH": str(args.tree.resolve()),
            "OPSBOT_NO_JOURNAL": "1",
        }

        def at(sock: Path | str) -> dict[str, str]:
            return {**env, "OPSBOT_SOCKET": str(sock)}

        nobody = f"{tmp}/nobody-listens/executor.sock"
        #: name -> (argv, its environment, the exit status it must end with, what its
        #: stdout and stderr must say)
        commands: dict[str, tuple[list[str], dict[str, str], int, str]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env, 0, ""),
            "opsbot --help": ([*opsbot, "--help"], env, 0, "usage: opsbot"),
            "opsbot plans": ([*opsbot, "plans"], at(sockets["plans"]), 0, "20 plans listed."),
            "opsbot show ID (final)": (
                [*opsbot, "show", PLAN_ID],
                at(sockets["final"]),
                0,
                "not checked any more",
            ),
            "opsbot show ID (open)": (
                [*opsbot, "show", PLAN_ID],
                at(sockets["open"]),
                0,
                "precondition: app.service",
            ),
            "opsbot plans --json (no executor)": (
                [*opsbot, "plans", "--json"],
                at(nobody),
                1,
                "no socket at",
            ),
            "import pydantic (reference)": (
                [sys.executable, "-c", "from pydantic import BaseModel"],
                env,
                0,
                "",
            ),
            "import the socket's models (reference)": (
                [sys.executable, "-c", "import shared_schema.executor_socket"],
                env,
                0,
                "",
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(runs + 2):
            for name, (argv, environ, status, said) in commands.items():
                seconds, got, output = timed(argv, environ)
                if got != status or said not in output or "Traceback" in output:
                    raise SystemExit(f"bench: {name} ended {got}, not {status}: {output[-500:]}")
                if round_ >= 2:
                    samples[name].append(seconds * 1000)
    report = Report("console_startup", "Console start-up (exec to exit)")
    base_name = "python -c pass"
    base = median(samples[base_name])
    report.add(Figure(f"{base_name} (n={runs})", base, "ms", target="(baseline)"))
    for name, values in samples.items():
        if name == base_name:
            continue
        value = median(values)
        # The target is the path that works; the rest are for reading it.
        reference = name.endswith(("(no executor)", "(reference)"))
        report.add(
            Figure(
                f"{name} (n={runs})",
                value,
                "ms",
                base,
                base_name,
                ratio(value, base),
                "(for reference)" if reference else f"<= pass + {TARGET_MS:.0f} ms",
                None if reference else value - base <= TARGET_MS,
            )
        )
    report.note(f"interpreter {sys.executable}; opsbot_cli from {args.tree.resolve()}")
    report.note(
        "target: within 100 ms of `python -c pass` in the same run (issue 21); the "
        "references say what building the models would add"
    )
    report.raw = {
        "runs": runs,
        "tree": str(args.tree.resolve()),
        "ms": {name: summary(values) for name, values in samples.items()},
        "samples_ms": samples,
    }
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
