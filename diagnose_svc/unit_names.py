"""A unit's name as systemctl reads it from a command line: ``app`` is ``app.service``.

Its own light module: ``opsbot-diagnose run`` and opsbot-onfailure@'s client
(diagnose_svc.onfailure, which loads no model) read UNIT the same way.
"""

from __future__ import annotations

__all__ = ["UNIT_TYPES", "unit_arg"]

#: systemd's unit types: a name ending in none of them is a service, as systemctl reads it.
UNIT_TYPES = frozenset(
    "service socket target device mount automount swap timer path slice scope".split()
)


def unit_arg(value: str) -> str:
    """UNIT as systemctl reads it: ``app`` is ``app.service``. The watch drop-in's
    ``OnFailure=opsbot-onfailure@%N.service`` passes a service's name without its suffix, so
    that the unit that diagnoses app.service is ``opsbot-onfailure@app.service``."""
    return value if value.rpartition(".")[2] in UNIT_TYPES else f"{value}.service"
