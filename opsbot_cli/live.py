"""The live state of a plan's units, for ``opsbot show``: read as the apply reads it
(shared_io.unit_show.read_unit_state: ``systemctl show``, which any user may run) and
said in the apply's words (plans.precondition_checks).

opsbot_cli/show.py imports this module only for a plan that may still run, after the
executor answered. Reading runs systemctl through shared_io.run, which logs only where
structlog is loaded: ``show`` does not load it, so nothing is logged and nothing prints.
"""

from __future__ import annotations

from plans import Check, precondition_checks
from shared_io.errors import UnitStateError
from shared_io.unit_show import UnitState, read_unit_state

__all__ = ["Check", "UnitState", "precondition_checks", "read"]


def read(unit: str) -> UnitState | str:
    """``unit``'s live state, or why it could not be read, in one line (systemctl's
    message may have several)."""
    try:
        return read_unit_state(unit, timeout=5.0)
    except UnitStateError as exc:
        return " ".join(exc.message.split())
