"""A TLS certificate that expired: a unit's own output says a peer's certificate was
refused (a lead: anyone can write into a unit's log), and read_certificates finds a
certificate file the unit or a unit it reaches is configured with past its notAfter
(the fact). A restart serves the same file: a note for a human, naming the file, when it
ended, and the unit that serves it."""

from __future__ import annotations

from collections.abc import Iterator

from diagnose_svc.policies import leads
from diagnose_svc.policies.runbook.outcomes import Human
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.policies.runbook.words import cut
from diagnose_svc.tools import JournalLine

#: Units whose certificates are read for one unit's lead, at most (it, and what it reaches).
MAX_READ = 4


def refused(view: View, unit: str) -> JournalLine | None:
    """The last line of ``unit``'s own output saying a certificate was refused."""
    tail = view.found.journal.get(unit)
    return leads.says(leads.own_lines(tail, None), leads.CERT_REFUSED) if tail else None


def to_read(view: View, unit: str) -> Iterator[str]:
    """The units whose certificates ``unit``'s lead calls to read: its own, and those of
    the units it reaches (the peer whose certificate its client refused)."""
    if refused(view, unit) is None:
        return
    yield from [unit, *view.deps(unit)][:MAX_READ]


def expired(view: View, unit: str) -> Human | None:
    """The expired certificate behind ``unit``'s refusal, when a read shows one."""
    line = refused(view, unit)
    if line is None:
        return None
    for owner in [unit, *view.deps(unit)][:MAX_READ]:
        found = view.found.certificates.get(owner)
        for cert in found.expired if found is not None else []:
            ended = f"{cert.not_after:%Y-%m-%d %H:%M} UTC" if cert.not_after else "?"
            said = f'"{cut(line.message, 160)}"'
            who = (
                f"its own output says {said}"
                if owner == unit
                else f"{unit}, which reaches it over TLS, says {said}"
            )
            return Human(
                "certificate_expired",
                owner,
                f"its certificate {cert.path} ({cert.subject}, issued by {cert.issuer}; named "
                f"in {cert.named_in}) expired {ended}, and {who}",
                f"A human must renew it and have {owner} load the new one (reload or "
                f"restart it then); a restart before that serves the same expired "
                f"certificate.",
                via="" if owner == unit else unit,
            )
    return None
