#!/usr/bin/python
"""opsbot.fleet.opsbot_plans: the host's plans, each with its goal, argv per step,
sha256, state and a summary of its evidence, read through ``opsbot plans --json`` and
``opsbot show ID --json``. Reads only: never changed."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.opsbot.fleet.plugins.module_utils.opsbot_cli import (
    PLAN_ID_RE,
    PLAN_STATES,
    CliError,
    plan_record,
    run_json,
    show,
)

DOCUMENTATION = r"""
---
module: opsbot_plans
short_description: List the plans opsbot stored on a host
version_added: "0.1.0"
description:
  - Reads the host's plans with C(opsbot plans --json), then each one with
    C(opsbot show ID --json) for its steps as argv, preconditions and evidence.
  - Reads only; never reports a change. Runs the same in check mode.
  - Needs a user who may read plans (root, or a member of opsbot-operators).
options:
  state:
    description:
      - Only plans in these states (upper case, as C(opsbot plans) prints them).
    type: list
    elements: str
    choices: [PROPOSED, APPROVED, APPLYING, APPLIED, VERIFIED, UNRESOLVED, FAILED,
              STALE, EXPIRED, REJECTED, INTERRUPTED]
  plan_id:
    description:
      - Only this plan (an id as C(opsbot plans) lists them). Fails if the host has no
        such plan.
    type: str
  opsbot_cli:
    description: The host's opsbot command.
    type: path
    default: /usr/local/bin/opsbot
author:
  - opsbot maintainers
"""

EXAMPLES = r"""
- name: What waits for a decision on each host
  opsbot.fleet.opsbot_plans:
    state: [PROPOSED]
  register: waiting

- name: Follow one plan until it ends
  opsbot.fleet.opsbot_plans:
    plan_id: 20261201-213000-0a1b2c3d
  register: one
  until: one.plans[0].state in ['VERIFIED', 'UNRESOLVED', 'FAILED', 'STALE']
  retries: 60
  delay: 2
"""

RETURN = r"""
plans:
  description: The plans, oldest first, as the host's executor holds them.
  returned: always
  type: list
  elements: dict
  contains:
    plan_id: {description: The plan's id., type: str}
    state: {description: "PROPOSED, APPROVED, ..., VERIFIED.", type: str}
    goal: {description: What the plan means to achieve., type: str}
    sha256:
      description: The plan's whole sha256 (64 hex digits); an approval binds to it.
      type: str
    units: {description: The units its steps act on., type: list, elements: str}
    steps:
      description: Each step, in order.
      type: list
      elements: dict
      contains:
        tool: {description: "restart_unit, reload_unit, ...", type: str}
        unit: {description: The unit it acts on., type: str}
        argv: {description: What the step runs., type: list, elements: str}
        precondition:
          description: The unit state the step expects (the CLI's C(expect)).
          type: dict
        reason: {description: "Why the step, as the diagnosis said.", type: str}
    evidence:
      description: A few lines of why (step reasons, verification).
      type: list
      elements: str
    reason: {description: "Why the plan is in its state (STALE, FAILED, ...).", type: str}
    submitted_at: {description: When it was proposed (ISO 8601)., type: str}
    submitted_by: {description: Who proposed it., type: str}
    verification: {description: "What opsbot-verify saw, once it judged.", type: dict}
    waits_for_window: {description: When an approved plan's apply window opens., type: dict}
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "list", "elements": "str", "choices": list(PLAN_STATES)},
            "plan_id": {"type": "str"},
            "opsbot_cli": {"type": "path", "default": "/usr/local/bin/opsbot"},
        },
        supports_check_mode=True,
    )
    cli: str = module.params["opsbot_cli"]
    plan_id: str | None = module.params["plan_id"]
    states: list[str] = module.params["state"] or []
    if plan_id is not None and not PLAN_ID_RE.match(plan_id):
        module.fail_json(
            msg=f"plan_id {plan_id!r} is not a plan id (e.g. 20261201-213000-0a1b2c3d)"
        )
    argv = [cli, "plans", "--json"] + (["--state", ",".join(states)] if states else [])
    try:
        _rc, listing = run_json(module, argv)
        if not isinstance(listing, list):
            raise CliError(f"`{' '.join(argv)}` answered no list of plans")
        ids = [p["plan_id"] for p in listing if plan_id is None or p["plan_id"] == plan_id]
        if plan_id is not None and not ids:
            wanted = f" in state {', '.join(states)}" if states else ""
            module.fail_json(msg=f"no plan {plan_id}{wanted} on this host")
        plans: list[dict[str, Any]] = [plan_record(show(module, cli, i)) for i in ids]
    except CliError as exc:
        module.fail_json(msg=exc.message, rc=exc.rc, stderr=exc.stderr)
    module.exit_json(changed=False, plans=plans)


if __name__ == "__main__":
    main()
