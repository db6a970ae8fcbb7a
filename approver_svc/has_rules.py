"""opsbot-rules.service's ``ExecCondition=``: does root's opsbot.toml hold a standing rule?

    python -m approver_svc.has_rules      exit 0: it has one ([[approve.rule]]), or it
                                          cannot be read (the trigger runs, and the
                                          approver says why); 1: it has none

On a host without rules, a stored plan then starts neither the trigger nor root's
approver: systemd skips the unit (the condition is not a failure). It reads the file with
tomllib alone and validates nothing (the approver does, on each request), so that the
check costs a Python start and no more. ``OPSBOT_CONFIG`` moves the file, as everywhere.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

DEFAULT_CONFIG = "/etc/opsbot/opsbot.toml"


def has_rules(path: Path) -> bool:
    """Whether ``path`` names a standing rule, or cannot be read (so the approver looks)."""
    try:
        with path.open("rb") as config:
            document = tomllib.load(config)
    except FileNotFoundError:
        return False
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return True
    approve = document.get("approve")
    if approve is None:
        return False
    return not isinstance(approve, dict) or bool(approve.get("rule"))


def main() -> int:
    return 0 if has_rules(Path(os.environ.get("OPSBOT_CONFIG") or DEFAULT_CONFIG)) else 1


if __name__ == "__main__":
    sys.exit(main())
