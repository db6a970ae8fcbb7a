"""opsbot-approver: root's side of the approval page, the one unit that turns a click into
an approval.

opsbot-notify and opsbot-web hold no authority: they ask this daemon, over
/run/opsbot/approver.sock (shared_schema.approver_socket), for the one thing each may ask,
and the peer's uid decides which. A click becomes an approval only here, and only when
its single-use token, bound to one plan id, its sha256, one approver and one decision,
and that approver's TOTP code both check out, and the plan is still the one the executor
logged accepting; then it writes exactly the approval ``opsbot approve`` writes
(plans.approve).

    errors    Refusal: a refused request, with the protocol's ``kind``
    state     what the approver remembers (root-only, /var/lib/opsbot-approver)
    tokens    minting, looking up and using up the one-time tokens
    totp      the approvers' second factor: RFC 6238 codes, each usable once
    view      a stored plan as the page and the notification show it
    service   announce, view, decide
    daemon    the socket-activated server: who may ask what
    rules     the standing rules at work: each plan that waits asked about once
    news      what the approvers are told that asks nothing: outcomes, status links
    trigger   opsbot-rules.service: one ``rules`` request, journaled
    has_rules opsbot-rules.service's condition: does opsbot.toml hold a rule?
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared_io.exports import lazy_exports

if TYPE_CHECKING:
    from approver_svc.errors import Refusal
    from approver_svc.service import ApproverService
    from approver_svc.state import ApproverState, StateFile

#: Each module and the names it exports here.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "approver_svc.errors": ("Refusal",),
    "approver_svc.service": ("ApproverService",),
    "approver_svc.state": ("ApproverState", "StateFile"),
}
__all__ = [
    "ApproverService",
    "ApproverState",
    "Refusal",
    "StateFile",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
