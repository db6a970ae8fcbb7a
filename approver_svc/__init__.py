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
"""
