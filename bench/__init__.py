"""Benchmarks: each module measures one thing against a baseline taken in the same run.

    sudo /opt/opsbot/venv/bin/python -m bench.<name> [--quick]
    sudo bench/run-all [--quick]

Each prints its figures (medians, percentiles, ratios against its baseline, the issue's
target and whether it was met) and writes ``bench/results/<name>.json``. Benchmarks are
not tests: they assert nothing and exit 0 whether a target is met or not (non-zero only
when the benchmark itself could not run).
"""
