"""Inside the container: fill the journal with noise from many units and a sparse target,
then time diagnose_svc's tail_journal (in-process) against ``journalctl -u UNIT -n N -o
json`` (a subprocess), interleaved. Prints JSON.

    journal_runs.py --noise-units 8 --lines-per-unit 30000 --calls 40
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _util import ENV, run

TARGET = "bench-target.service"
# Each noise unit spreads its lines evenly over the same few seconds (in bursts of 64),
# so the target's lines, printed every 20 ms meanwhile, are sparse all the way through.
NOISE = (
    "import sys, time, uuid\n"
    "w = sys.stdout.write\n"
    "start = time.monotonic()\n"
    "for i in range({n}):\n"
    "    w(f'{{i}} GET /api/v1/items/{{i * 7919 % 100000}} 200 3.{{i % 10}}ms "
    "user=svc-{u} request_id={{uuid.uuid4()}} upstream=10.0.{u}.{{i % 250}}:8080\\n')\n"
    "    if i % 64 == 0:\n"
    "        sys.stdout.flush()\n"
    "        ahead = start + i * {seconds} / {n} - time.monotonic()\n"
    "        if ahead > 0: time.sleep(ahead)\n"
)
TARGET_CODE = (
    "import itertools, time\n"
    "for i in itertools.count():\n"
    "    print(f'target line {i}: worker pool at {i % 17} of 16, queue depth {i % 5}', "
    "flush=True)\n"
    "    time.sleep(0.02)\n"
)
JOURNALD_CONF = """\
[Journal]
Storage=volatile
RateLimitIntervalSec=0
RuntimeMaxUse=3G
RuntimeKeepFree=0
"""


def count_lines(argv: list[str]) -> int:
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=ENV) as proc:
        assert proc.stdout is not None
        n = sum(1 for _ in proc.stdout)
    return n


def generate(noise_units: int, lines_per_unit: int, seconds: float) -> float:
    conf = Path("/etc/systemd/journald.conf.d/bench.conf")
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(JOURNALD_CONF)
    run(["systemctl", "restart", "systemd-journald.service"])
    started = time.monotonic()
    run(["systemd-run", f"--unit={TARGET}", "/usr/bin/python3", "-c", TARGET_CODE])
    noise = [f"noise-{k}.service" for k in range(noise_units)]
    for k, unit in enumerate(noise):
        code = NOISE.format(n=lines_per_unit, u=k, seconds=seconds)
        run(
            [
                "systemd-run",
                f"--unit={unit}",
                "--property=RemainAfterExit=yes",
                "/usr/bin/python3",
                "-c",
                code,
            ]
        )
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline:
        states = run(["systemctl", "show", "-P", "SubState", *noise]).stdout.split()
        if all(s == "exited" for s in states):
            break
        time.sleep(1)
    else:
        raise RuntimeError("the noise units did not finish in 20 minutes")
    run(["systemctl", "stop", TARGET])
    run(["journalctl", "--sync"])
    return time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--noise-units", type=int, default=8)
    p.add_argument("--lines-per-unit", type=int, default=30000)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--spread-seconds", type=float, default=20.0)
    args = p.parse_args()
    seconds = generate(args.noise_units, args.lines_per_unit, args.spread_seconds)
    total = count_lines(["journalctl", "--no-pager", "-o", "json", "--output-fields=MESSAGE"])
    target = count_lines(
        ["journalctl", "--no-pager", "-u", TARGET, "-o", "json", "--output-fields=MESSAGE"]
    )
    header = run(["journalctl", "--header"]).stdout
    files = header.count("File path:")

    from diagnose_svc.tools import READ_TOOLS, ToolContext
    from shared_schema import DiagnoseSettings

    tool = READ_TOOLS["tail_journal"]
    context = ToolContext(settings=DiagnoseSettings())
    out: dict[str, object] = {
        "generate_seconds": seconds,
        "entries_total": total,
        "entries_target": target,
        "journal_files": files,
    }
    for lines in (100, 200):

        def tool_call(lines: int = lines) -> tuple[float, int, int]:
            started = time.perf_counter()
            output = tool(tool.parse_args({"unit": TARGET, "lines": lines}), context)
            elapsed = time.perf_counter() - started
            return elapsed, len(output.lines), output.omitted  # type: ignore[attr-defined]

        argv = ["journalctl", "-u", TARGET, "-n", str(lines), "-o", "json"]

        def journalctl(argv: list[str] = argv) -> tuple[float, int]:
            started = time.perf_counter()
            proc = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, env=ENV, check=True
            )
            elapsed = time.perf_counter() - started
            return elapsed, proc.stdout.count(b"\n")

        tool_call()
        journalctl()  # warm-up: imports, page cache
        tool_times: list[float] = []
        jctl_times: list[float] = []
        kept = omitted = got = 0
        for i in range(args.calls):
            pair = [0, 1] if i % 2 == 0 else [1, 0]
            for which in pair:
                if which == 0:
                    elapsed, kept, omitted = tool_call()
                    tool_times.append(elapsed)
                else:
                    elapsed, got = journalctl()
                    jctl_times.append(elapsed)
        out[f"lines_{lines}"] = {
            "tool_s": tool_times,
            "journalctl_s": jctl_times,
            "tool_lines_kept": kept,
            "tool_lines_omitted": omitted,
            "journalctl_entries": got,
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
