#!/usr/bin/python
"""opsbot.fleet.opsbot_approve: approve plan ID on a host only if its sha256 there is
the whole sha256 the operator reviewed; idempotent; check mode says what would happen."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.opsbot.fleet.plugins.module_utils.opsbot_cli import (
    PLAN_ID_RE,
    SHA256_RE,
    CliError,
    run_json,
    show,
)

DOCUMENTATION = r"""
---
module: opsbot_approve
short_description: Approve a reviewed opsbot plan, bound to its whole sha256
version_added: "0.1.0"
description:
  - Reads the plan with C(opsbot show ID --json). If its sha256 on the host is not the
    one given (the plan changed since the review), fails and approves nothing.
  - A PROPOSED plan is approved with C(opsbot approve ID --sha256 SHA256 --json), which
    checks the sha256 again against the plan as root reads it and the executor's journal.
  - A plan already approved, applying, applied or verified (same sha256) is left as it
    is (C(changed=false)). A plan that is STALE, EXPIRED, REJECTED, FAILED, UNRESOLVED or
    INTERRUPTED fails, naming its state.
  - In check mode nothing is approved; the result says what would be done.
  - C(opsbot approve) is root-only; use C(become).
options:
  plan_id:
    description: The plan's id, as the review report names it.
    type: str
    required: true
  sha256:
    description:
      - The plan's whole sha256 as reviewed (64 hex digits). A prefix, or anything
        else, is refused; there is never an approval without it.
    type: str
    required: true
  ttl:
    description: How long the approval holds, a systemd duration (C(30m), C(2h)).
    type: str
  now:
    description: Run it at once, outside its apply window (C(opsbot approve --now)).
    type: bool
    default: false
  opsbot_cli:
    description: The host's opsbot command.
    type: path
    default: /usr/local/bin/opsbot
author:
  - opsbot maintainers
"""

EXAMPLES = r"""
- name: Approve what the review saw
  become: true
  opsbot.fleet.opsbot_approve:
    plan_id: 20261201-213000-0a1b2c3d
    sha256: 6d743b17123c914989e6afd4eb57701a7aacd012de4866d2ce93aabd71587a57
    ttl: 30m
"""

RETURN = r"""
plan_id: {description: The plan., returned: always, type: str}
sha256: {description: Its whole sha256 on the host., returned: success, type: str}
state:
  description: Its state before this task (PROPOSED when it was approved).
  returned: success
  type: str
approval:
  description: C(opsbot approve --json)'s answer (the approval, what applies it and when).
  returned: when approved
  type: dict
msg: {description: "What was done, or would be.", returned: always, type: str}
"""

#: Approved already: the same sha256 went through; nothing to do.
DONE = ("APPROVED", "APPLYING", "APPLIED", "VERIFIED")
#: Ended without being fixed, or never to run: an approval now means nothing.
ENDED = ("STALE", "EXPIRED", "REJECTED", "FAILED", "UNRESOLVED", "INTERRUPTED")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "plan_id": {"type": "str", "required": True},
            "sha256": {"type": "str", "required": True, "no_log": False},
            "ttl": {"type": "str"},
            "now": {"type": "bool", "default": False},
            "opsbot_cli": {"type": "path", "default": "/usr/local/bin/opsbot"},
        },
        supports_check_mode=True,
    )
    p = module.params
    cli: str = p["opsbot_cli"]
    plan_id: str = p["plan_id"]
    reviewed: str = p["sha256"].strip().lower()
    if not PLAN_ID_RE.match(plan_id):
        module.fail_json(msg=f"plan_id {plan_id!r} is not a plan id", plan_id=plan_id)
    if not SHA256_RE.match(reviewed):
        module.fail_json(
            msg=f"sha256 {p['sha256'][:80]!r} is not a whole sha256 (64 hex digits): "
            f"plan {plan_id} is approved only with the whole sha256 the review saw",
            plan_id=plan_id,
        )
    try:
        summary = show(module, cli, plan_id)["summary"]
    except CliError as exc:
        module.fail_json(msg=exc.message, rc=exc.rc, stderr=exc.stderr, plan_id=plan_id)
    state: str = summary["state"]
    actual: str = summary["sha256"]
    said: dict[str, Any] = {"plan_id": plan_id, "sha256": actual, "state": state}
    if actual != reviewed:
        module.fail_json(
            msg=f"plan {plan_id} on this host is now sha256 {actual}; the review saw "
            f"{reviewed}; not approved",
            **said,
        )
    if state in DONE:
        module.exit_json(changed=False, msg=f"plan {plan_id} is {state} already", **said)
    if state in ENDED:
        reason = f" ({summary['reason']})" if summary.get("reason") else ""
        module.fail_json(msg=f"plan {plan_id} is {state}{reason}; not approved", **said)
    if state != "PROPOSED":
        module.fail_json(msg=f"plan {plan_id} is in state {state!r}; not approved", **said)
    argv = [cli, "approve", plan_id, "--sha256", reviewed, "--json"]
    argv += ["--ttl", p["ttl"]] if p["ttl"] else []
    argv += ["--now"] if p["now"] else []
    if module.check_mode:
        module.exit_json(
            changed=True, msg=f"would approve plan {plan_id} (sha256 {reviewed})", **said
        )
    try:
        _rc, approval = run_json(module, argv)
    except CliError as exc:
        module.fail_json(msg=exc.message, rc=exc.rc, stderr=exc.stderr, **said)
    module.exit_json(
        changed=True,
        msg=f"approved plan {plan_id} (sha256 {reviewed})",
        approval=approval,
        **said,
    )


if __name__ == "__main__":
    main()
