#!/usr/bin/python
"""opsbot.fleet.opsbot_replay: the host's recorded diagnoses asked again of today's policy,
answered from the records (``opsbot replay --json``), and whether each verdict agrees with
the one given then. Reads only: never changed."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.opsbot.fleet.plugins.module_utils.opsbot_cli import CliError, run_json

DOCUMENTATION = r"""
---
module: opsbot_replay
short_description: Replay the diagnoses opsbot recorded on a host
version_added: "0.1.0"
description:
  - Runs C(opsbot replay --json --since SINCE [--unit UNIT]) on the host. Each recorded
    diagnosis is asked again of the host's policy of today, every tool call answered from
    the record (a call the record does not hold is answered "not recorded" and counted,
    never read live); nothing is submitted and nothing is written.
  - Exit status 4 (some replayed verdicts differ from the recorded ones) is a result, not
    a failure (C(differ=true)); any other status but 0 fails with the CLI's message, or,
    where a diagnosis could not be replayed (1, with a report), with its error.
  - Reads only; never reports a change. Runs the same in check mode.
  - Needs root or the diagnose user (C(become)); the records are theirs alone.
options:
  since:
    description: Replay the diagnoses recorded since then (C(30d), C(12h), C(1h)).
    type: str
    default: 30d
  unit:
    description: Only the diagnoses of this unit, e.g. C(app.service).
    type: str
  opsbot_cli:
    description: The host's opsbot command.
    type: path
    default: /usr/local/bin/opsbot
author:
  - opsbot maintainers
"""

EXAMPLES = r"""
- name: Would today's opsbot have said the same about last month's incidents
  opsbot.fleet.opsbot_replay:
    since: 30d
  become: true
  register: replayed
"""

RETURN = r"""
report:
  description: C(opsbot replay --json) as printed (the replay engine's document).
  returned: success
  type: dict
  contains:
    policy: {description: "The policy replayed through (runbook, or the model's).", type: str}
    replays:
      description: >-
        Per recorded diagnosis: run_id, unit, started, asked_by, then and now (kind,
        ended_by, what), outcome (VERIFIED, UNRESOLVED, or null), agree, not_recorded,
        harmful, tokens, seconds, error.
      type: list
      elements: dict
    skipped: {description: "Records not read (record, why).", type: list, elements: dict}
    summary:
      description: >-
        replayed, agree, differ, failed, skipped, plan_where_note, note_where_plan,
        differ_where_unresolved, same_where_unresolved, not_recorded_calls, harmful_steps,
        tokens, seconds_median.
      type: dict
differ: {description: Some replayed verdicts differ (exit status 4)., returned: success, type: bool}
exit_status: {description: C(opsbot replay)'s exit status (0 or 4)., returned: success, type: int}
"""

#: ``opsbot replay``'s exit status when some replayed verdicts differ: a result.
DIFFER = 4


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "since": {"type": "str", "default": "30d"},
            "unit": {"type": "str"},
            "opsbot_cli": {"type": "path", "default": "/usr/local/bin/opsbot"},
        },
        supports_check_mode=True,
    )
    argv = [module.params["opsbot_cli"], "replay", "--json", "--since", module.params["since"]]
    if module.params["unit"]:
        argv += ["--unit", module.params["unit"]]
    try:
        # 1 with a report: a diagnosis could not be replayed (its error says why)
        rc, report = run_json(module, argv, ok=(0, 1, DIFFER))
        if not isinstance(report, dict) or not isinstance(report.get("summary"), dict):
            raise CliError(f"`{' '.join(argv)}` answered no replay report", rc)
    except CliError as exc:
        module.fail_json(msg=exc.message, rc=exc.rc, stderr=exc.stderr)
    said: dict[str, Any] = report["summary"]
    if rc not in (0, DIFFER):
        errors = [r.get("error") for r in report.get("replays", []) if isinstance(r, dict)]
        first = next((str(e) for e in errors if e), "no error said")
        module.fail_json(
            msg=f"`{' '.join(argv)}` exited {rc}: {said.get('failed')} of "
            f"{said.get('replayed')} diagnoses could not be replayed; the first: "
            f"{' '.join(first.split())[:300]}",
            rc=rc,
            report=report,
        )
    module.exit_json(
        changed=False,
        msg=f"{said.get('replayed')} replayed: {said.get('agree')} agree, "
        f"{said.get('differ')} differ",
        report=report,
        differ=rc == DIFFER,
        exit_status=rc,
    )


if __name__ == "__main__":
    main()
