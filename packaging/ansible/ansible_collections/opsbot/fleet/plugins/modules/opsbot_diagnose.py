#!/usr/bin/python
"""opsbot.fleet.opsbot_diagnose: ask the host's diagnosis service why a unit is down
(``opsbot diagnose UNIT --json``) and return its verdict: a plan (stored, waiting for
approval) or a note."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.opsbot.fleet.plugins.module_utils.opsbot_cli import (
    CliError,
    meaning,
    run_json,
)

DOCUMENTATION = r"""
---
module: opsbot_diagnose
short_description: Diagnose a unit with opsbot and return the verdict
version_added: "0.1.0"
description:
  - Runs C(opsbot diagnose UNIT --json) on the host. A verdict of kind C(plan) stored a
    new plan, which waits for approval (C(changed=true)); a C(note) changes nothing.
  - In check mode nothing runs (a diagnosis stores a plan); the result says so.
  - Fails when the diagnosis could not be made (exit status 1, 2 or 78), with the CLI's
    message.
options:
  unit:
    description: The unit, e.g. C(nginx.service).
    type: str
    required: true
  symptom:
    description: What was seen, e.g. C(nginx returns 502).
    type: str
    default: ""
  opsbot_cli:
    description: The host's opsbot command.
    type: path
    default: /usr/local/bin/opsbot
author:
  - opsbot maintainers
"""

EXAMPLES = r"""
- name: Why is app.service down
  opsbot.fleet.opsbot_diagnose:
    unit: app.service
    symptom: health check fails
  register: diagnosis
"""

RETURN = r"""
verdict: {description: "C(plan) or C(note).", returned: success, type: str}
plan_id: {description: The plan stored (kind plan)., returned: when a plan was proposed, type: str}
sha256: {description: Its whole sha256., returned: when a plan was proposed, type: str}
goal: {description: What the plan means to achieve., returned: when a plan was proposed, type: str}
steps:
  description: Its steps (tool, unit, precondition, reason).
  returned: when a plan was proposed
  type: list
  elements: dict
note: {description: The note's text (kind note)., returned: when no plan, type: str}
ended_by: {description: Why the diagnosis ended., returned: success, type: str}
cause: {description: "The cause the note names, as data.", returned: when no plan, type: dict}
exit_status: {description: C(opsbot diagnose)'s exit status., returned: success, type: int}
exit_meaning: {description: What that exit status means., returned: success, type: str}
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "symptom": {"type": "str", "default": ""},
            "opsbot_cli": {"type": "path", "default": "/usr/local/bin/opsbot"},
        },
        supports_check_mode=True,
    )
    cli: str = module.params["opsbot_cli"]
    unit: str = module.params["unit"]
    if module.check_mode:
        module.exit_json(changed=False, msg=f"would diagnose {unit} (a diagnosis may store a plan)")
    argv = [cli, "diagnose", unit, "--json"]
    if module.params["symptom"]:
        argv += ["--symptom", module.params["symptom"]]
    try:
        # 1 with a verdict: a note saying the executor or the policy failed
        rc, answer = run_json(module, argv, ok=(0, 1, 3, 4, 5))
    except CliError as exc:
        module.fail_json(msg=exc.message, rc=exc.rc, stderr=exc.stderr)
    verdict: dict[str, Any] = answer["verdict"]
    said: dict[str, Any] = {
        "verdict": verdict["kind"],
        "ended_by": verdict.get("ended_by"),
        "exit_status": rc,
        "exit_meaning": meaning(rc),
    }
    if rc == 1:
        module.fail_json(
            msg=f"diagnosis of {unit} failed ({verdict.get('ended_by')}): "
            f"{' '.join(str(verdict.get('text', '')).split())[:300]}",
            note=verdict.get("text", ""),
            **said,
        )
    if verdict["kind"] == "plan":
        plan = verdict["plan"]
        steps = [
            {
                "tool": s["tool"],
                "unit": s["args"]["unit"],
                "precondition": s.get("expect"),
                "reason": s.get("reason"),
            }
            for s in plan["steps"]
        ]
        module.exit_json(
            changed=True,
            msg=f"plan {verdict['plan_id']} proposed on this host: {plan['goal']}",
            plan_id=verdict["plan_id"],
            sha256=verdict["sha256"],
            goal=plan["goal"],
            steps=steps,
            **said,
        )
    module.exit_json(
        changed=False,
        msg=f"no plan for {unit} ({verdict.get('ended_by')})",
        note=verdict.get("text", ""),
        cause=verdict.get("cause"),
        **said,
    )


if __name__ == "__main__":
    main()
