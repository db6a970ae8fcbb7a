"""``python -m diagnose_svc.scope_units [--config PATH] [--] [PREFIX]``: the units of the
diagnosis scope (diagnose_svc/scope.py, from the config and systemd's dependencies as they
stand now), one a line, sorted; only those starting with PREFIX when given.

What bash completes after ``opsbot diagnose``, ``watch`` and ``unwatch``
(opsbot_cli/complete.py runs it: the console may not import diagnosis). Read-only: the
config (world-readable) and a few ``systemctl show`` calls, which any user may make.
Whatever fails (a config it cannot read or that is invalid) prints nothing and exits 1,
without a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from diagnose_svc.scope import build_scope
from shared_io import log
from shared_io.config import load_config
from shared_io.errors import OpsbotError


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    config: Path | None = None
    if args[:1] == ["--config"] and len(args) >= 2:
        config, args = Path(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    prefix = args[0] if args else ""
    log.configure("opsbot-diagnose", journal=False)  # its commands' debug lines: not stdout
    try:
        units = build_scope(load_config(config)).units
    except OpsbotError:
        return 1
    for unit in sorted(u for u in units if u.startswith(prefix)):
        print(unit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
