"""The bounded diagnosis runtime: the policy proposes, this code decides.

loop       run_diagnosis: steps, tokens, which tools are visible, how a run ends
dispatch   what happens to one action: tool calls refused, nudged or run; plans
           validated, checked for readiness, submitted
evidence   what the run has looked at: the verdict's evidence, readiness, unknowns
"""

from diagnose_svc.runtime.loop import NOTE_LIMIT, new_run_id, run_diagnosis

__all__ = ["NOTE_LIMIT", "new_run_id", "run_diagnosis"]
