#!/usr/bin/python
"""opsbot.fleet.opsbot_policy_report: what the host's standing approval rules did and would
have done, read through ``opsbot policy report --json`` (root: root's approver answers it).
Reads only: never changed."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.opsbot.fleet.plugins.module_utils.opsbot_cli import CliError, run_json

DOCUMENTATION = r"""
---
module: opsbot_policy_report
short_description: Read what opsbot's standing approval rules did on a host
version_added: "0.1.0"
description:
  - Runs C(opsbot policy report --json) on the host, which root's approver
    (C(opsbot-approver.socket)) answers. Per C([[approve.rule]]) it says the plans the
    rule approved (mode C(enforce)) and would have approved (mode C(shadow)), how those
    ended, and why it refused the others; then the newest decisions, and whether the
    rules are paused.
  - Reads only; never reports a change. Runs the same in check mode.
  - Needs root (C(become)). Fails with the CLI's message where the approver cannot
    answer; fleet-review.yml reports that message for the host and goes on.
options:
  opsbot_cli:
    description: The host's opsbot command.
    type: path
    default: /usr/local/bin/opsbot
author:
  - opsbot maintainers
"""

EXAMPLES = r"""
- name: What the rules would have done
  opsbot.fleet.opsbot_policy_report:
  register: rules
  failed_when: false
"""

RETURN = r"""
report:
  description: C(opsbot policy report --json) as printed (root's approver's answer).
  returned: success
  type: dict
  contains:
    rules:
      description: >-
        Per rule: name, mode (shadow, enforce, or removed), approved, would_approve,
        ended (state -> count, for the plans it would have approved), refused
        (reason -> count).
      type: list
      elements: dict
    recent:
      description: The newest decisions (plan_id, outcome, rule, refused, ...).
      type: list
      elements: dict
    records: {description: Decisions kept., type: int}
    dropped: {description: Decisions dropped to keep the bound (oldest first)., type: int}
    pause: {description: "The last pause or resume (paused, by, at, reason), or null.", type: dict}
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={"opsbot_cli": {"type": "path", "default": "/usr/local/bin/opsbot"}},
        supports_check_mode=True,
    )
    argv = [module.params["opsbot_cli"], "policy", "report", "--json"]
    try:
        _rc, report = run_json(module, argv)
        if not isinstance(report, dict) or not isinstance(report.get("rules"), list):
            raise CliError(f"`{' '.join(argv)}` answered no policy report")
    except CliError as exc:
        module.fail_json(msg=exc.message, rc=exc.rc, stderr=exc.stderr)
    module.exit_json(changed=False, report=report)


if __name__ == "__main__":
    main()
